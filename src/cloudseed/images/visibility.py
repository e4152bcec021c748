"""Who sees and who changes an image: Glance's default rules, IO-free (plain values in,
booleans or errors out; service.py turns the same rules into SQL for lists).

- An administrator sees and changes every image.
- Anyone sees ``public`` and ``community`` images, and a project its own of any visibility.
  Glance also shows ``shared`` images to their members; cloudseed has no members API, so a
  shared image is its owner's alone, as a private one.
- Lists leave out other projects' ``community`` images unless asked for them
  (``?visibility=community``), and ``os_hidden`` images unless ``?os_hidden=true``.
- Creating, uploading to and deleting images takes the ``member`` role (a project reader only
  reads); making an image ``public`` takes an administrator; only the owner (or an
  administrator) uploads to or deletes an image. The operator's images (``cloudseed image
  add``) have no owner: only an administrator deletes them.
"""

from __future__ import annotations

from dataclasses import dataclass

from cloudseed.images.errors import ForeignOwner, ImageActionForbidden

SEEN_BY_ALL = ("public", "community")


@dataclass(frozen=True)
class Viewer:
    """The caller, as the image rules need it."""

    project_id: str
    is_admin: bool = False
    roles: frozenset[str] = frozenset()

    @property
    def is_member(self) -> bool:
        return self.is_admin or "member" in self.roles


# The operator's view (the CLI, the compute agent): every image.
OPERATOR = Viewer(project_id="", is_admin=True)


def can_see(viewer: Viewer, *, owner: str | None, visibility: str) -> bool:
    return viewer.is_admin or visibility in SEEN_BY_ALL or owner == viewer.project_id


def can_change(viewer: Viewer, *, owner: str | None) -> bool:
    return viewer.is_admin or (viewer.is_member and owner == viewer.project_id)


def check_create(viewer: Viewer, *, owner: str, visibility: str) -> None:
    """Glance's add_image, publicize_image and owner checks, in its order."""
    if not viewer.is_member:
        raise ImageActionForbidden("add_image")
    if visibility == "public" and not viewer.is_admin:
        raise ImageActionForbidden("publicize_image")
    if owner != viewer.project_id and not viewer.is_admin:
        raise ForeignOwner(owner)


def check_change(viewer: Viewer, action: str, *, owner: str | None) -> None:
    """``action`` (Glance's policy name: upload_image, delete_image) on an image ``viewer``
    sees; the caller has already answered 404 for one it does not."""
    if not can_change(viewer, owner=owner):
        raise ImageActionForbidden(action)
