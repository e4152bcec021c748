"""images/visibility.py: Glance's default rules on who sees and who changes an image."""

from __future__ import annotations

import pytest

from cloudseed.images import visibility as access
from cloudseed.images.errors import ForeignOwner, ImageActionForbidden
from cloudseed.images.visibility import Viewer

MEMBER = Viewer(project_id="p", roles=frozenset({"member", "reader"}))
READER = Viewer(project_id="p", roles=frozenset({"reader"}))
OTHER = Viewer(project_id="q", roles=frozenset({"member", "reader"}))
ADMIN = Viewer(project_id="a", is_admin=True, roles=frozenset({"admin"}))


@pytest.mark.parametrize(
    ("visibility", "owner_sees", "other_sees"),
    [
        ("public", True, True),
        ("community", True, True),
        ("shared", True, False),
        ("private", True, False),
    ],
)
def test_who_sees_an_image(visibility: str, owner_sees: bool, other_sees: bool) -> None:
    assert access.can_see(MEMBER, owner="p", visibility=visibility) is owner_sees
    assert access.can_see(READER, owner="p", visibility=visibility) is owner_sees
    assert access.can_see(OTHER, owner="p", visibility=visibility) is other_sees
    assert access.can_see(ADMIN, owner="p", visibility=visibility)


def test_the_operators_images_are_seen_by_all_and_changed_by_admins_only() -> None:
    assert access.can_see(OTHER, owner=None, visibility="public")
    assert not access.can_change(MEMBER, owner=None)
    assert access.can_change(ADMIN, owner=None)
    assert access.can_change(access.OPERATOR, owner="p")


def test_changes_take_the_owners_member_role() -> None:
    assert access.can_change(MEMBER, owner="p")
    assert not access.can_change(READER, owner="p")  # a project reader only reads
    assert not access.can_change(OTHER, owner="p")
    with pytest.raises(ImageActionForbidden, match="complete delete_image action"):
        access.check_change(OTHER, "delete_image", owner="p")


@pytest.mark.parametrize(
    ("viewer", "owner", "visibility", "refused"),
    [
        (MEMBER, "p", "private", None),
        (MEMBER, "p", "community", None),
        (MEMBER, "p", "public", "You are not authorized to complete publicize_image action."),
        (READER, "p", "private", "You are not authorized to complete add_image action."),
        (MEMBER, "q", "private", "You are not permitted to create images owned by 'q'."),
        (ADMIN, "q", "public", None),
    ],
)
def test_who_creates_what(viewer: Viewer, owner: str, visibility: str, refused: str | None) -> None:
    if refused is None:
        access.check_create(viewer, owner=owner, visibility=visibility)
        return
    with pytest.raises((ImageActionForbidden, ForeignOwner)) as info:
        access.check_create(viewer, owner=owner, visibility=visibility)
    assert info.value.message == refused
