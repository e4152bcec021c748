"""One copy of equal values among cached guests (sharing.py), and a guest's meta_data.json
held once per variant whichever versions it asks for (documents.py)."""

from __future__ import annotations

import base64
import collections
import datetime as dt
import json

import pytest

from cloudseed.metadata import render
from cloudseed.metadata import versions as v
from cloudseed.metadata.delivery import guest_facts
from cloudseed.metadata.documents import GuestDocuments
from cloudseed.metadata.facts import GuestFacts, KeyFacts
from cloudseed.metadata.sharing import Sharing
from tests.support.guest_facts import facts, record


def fresh(text: str) -> str:
    """An equal string that is another object (as each database row gives)."""
    return "".join(list(text))


def test_equal_values_come_back_as_one_object() -> None:
    table = Sharing(entries=16, largest=4096)
    first = table(fresh("#cloud-config\nhostname: web\n"))
    second = table(fresh("#cloud-config\nhostname: web\n"))
    assert second is first
    pair = table((fresh("role"), fresh("web")))
    assert table((fresh("role"), fresh("web"))) is pair
    assert table(fresh("other")) is not first


def test_values_of_other_types_are_never_handed_out_for_each_other() -> None:
    table = Sharing(entries=16, largest=4096)
    assert table(1) == 1
    assert table(True) is True
    assert table(b"a") == b"a" and table("a") == "a"
    assert type(table(b"a")) is bytes and type(table("a")) is str


def test_large_values_are_not_kept() -> None:
    table = Sharing(entries=16, largest=100)
    big = fresh("x" * 200)
    assert table(big) is big
    assert table(fresh("x" * 200)) is not big
    assert len(table) == 0
    # A tuple's size counts what it holds.
    held = (fresh("y" * 200),)
    assert table(held) is held and len(table) == 0
    # So does a dataclass's, through its fields (a key set is a tuple of them), and a tuple
    # subclass's: neither shell is large, what they hold is.
    table = Sharing(entries=16, largest=300)

    def key_set() -> tuple[KeyFacts, ...]:
        return (KeyFacts(name="k", type="ssh", public_key=fresh("ssh-ed25519 " + "A" * 400)),)

    keys = key_set()
    assert table(keys) is keys and table(key_set()) is not keys
    pair = collections.namedtuple("pair", "left right")
    wide = pair(fresh("z" * 400), "")
    assert table(wide) is wide and table(pair(fresh("z" * 400), "")) is not wide
    assert len(table) == 0
    small = KeyFacts(name="k", type="ssh", public_key="ssh-ed25519 AAAA")
    assert table((small,)) == (small,) and len(table) == 1


def test_a_full_table_starts_again() -> None:
    table = Sharing(entries=3, largest=4096)
    values = [table(fresh(f"value {i}")) for i in range(3)]
    assert len(table) == 3
    table(fresh("value 3"))
    assert len(table) == 1  # emptied, then the new value
    assert table(fresh("value 0")) is not values[0]  # no longer shared
    assert table(fresh("value 3")) == "value 3"


def test_meta_data_rendered_once_per_variant_in_any_order() -> None:
    guest = GuestDocuments(facts(), "novalocal")
    latest = guest.meta_data("latest")
    assert guest.meta_data(v.VICTORIA) is latest  # the same variant
    folsom = guest.meta_data(v.FOLSOM)
    assert folsom is not latest and folsom.suffix is None  # no seed before Grizzly
    assert guest.meta_data(v.FOLSOM) is folsom
    assert guest.meta_data("latest") is latest
    liberty = guest.meta_data(v.LIBERTY)
    assert guest.meta_data(v.LIBERTY) is liberty
    assert "project_id" in json.loads(liberty.render())
    assert "random_seed" not in json.loads(folsom.render())


def test_a_guest_versions_hold_one_copy_of_what_they_have_in_common() -> None:
    guest = GuestDocuments(facts(), "novalocal")
    rocky, latest = guest.meta_data(v.ROCKY), guest.meta_data("latest")
    assert rocky is not latest
    # Only their last members differ (devices' variant, dedicated_cpus).
    assert latest.head is rocky.head and latest.tail is rocky.tail
    assert "dedicated_cpus" in json.loads(latest.render())
    assert "dedicated_cpus" not in json.loads(rocky.render())


def test_a_prepared_guest_renders_what_cloud_init_asks_first_no_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    guest = GuestDocuments(facts(), "novalocal")
    guest.prepare()
    prepared = {version: guest.meta_data(version) for version in v.FIRST_ASKED}

    def render_again(*args: object, **kwargs: object) -> render.SeededJSON:
        raise AssertionError("rendered after prepare()")

    monkeypatch.setattr(render, "meta_data", render_again)
    assert {version: guest.meta_data(version) for version in v.FIRST_ASKED} == prepared
    expected = GuestDocuments(facts(), "novalocal")
    monkeypatch.undo()
    for version in v.FIRST_ASKED:
        # The same document a request would have made (its random seed apart).
        made, asked = prepared[version], expected.meta_data(version)
        assert (made.head, made.alike, made.tail, made.suffix) == (
            asked.head,
            asked.alike,
            asked.tail,
            asked.suffix,
        )


def test_guests_alike_share_what_follows_the_seed() -> None:
    one = GuestDocuments(facts(uuid="u-1"), "novalocal").meta_data("latest")
    two = GuestDocuments(facts(uuid="u-2"), "novalocal").meta_data("latest")
    assert one.prefix != two.prefix
    assert one.suffix is not None and one.suffix is two.suffix


def test_guests_alike_hold_one_copy_of_what_they_have_in_common() -> None:
    now = dt.datetime(2030, 1, 1)

    def loaded(uuid: str, name: str) -> GuestFacts:
        entries = [{"name": fresh("k"), "public_key": fresh("ssh-ed25519 AAAA k")}]
        made = record(entries)
        made.instance.uuid, made.instance.display_name = uuid, fresh(name)
        made.instance.hostname = fresh(name)
        made.instance.user_data = fresh(base64.b64encode(b"#cloud-config\n").decode())
        made.instance.reservation_id = fresh("r-1")
        made.metadata = {fresh("role"): fresh("web"), fresh("env"): fresh("bench")}
        return guest_facts(made, now)

    one, two = loaded("u-1", "web-1"), loaded("u-2", "web-2")
    assert one.user_data is two.user_data
    assert one.meta is two.meta and one.meta == (("env", "bench"), ("role", "web"))
    assert one.keys is two.keys
    assert one.reservation_id is two.reservation_id
    assert one.security_groups is two.security_groups
    assert one.hostname is one.name  # the hostname made from the name: one string
    assert one.name != two.name and one.uuid != two.uuid


def test_guests_alike_hold_one_copy_of_large_user_data() -> None:
    # Above the 4 KiB the general table keeps: a boot storm's 16 MiB Ignition config, once.
    now = dt.datetime(2030, 1, 1)
    large = base64.b64encode(bytes(range(256)) * 4096).decode()  # 1 MiB, 1.4 MB of base64

    def loaded(uuid: str, user_data: str) -> GuestFacts:
        made = record([])
        made.instance.uuid, made.instance.user_data = uuid, fresh(user_data)
        return guest_facts(made, now)

    one, two = loaded("u-1", large), loaded("u-2", large)
    assert one.user_data == large and one.user_data is two.user_data
    other = loaded("u-3", large[:-4] + "AAAA")
    assert other.user_data is not one.user_data  # equal values only
    assert render.user_data(one) == bytes(range(256)) * 4096


def test_guests_alike_share_their_metadata_items_and_keys_in_meta_data() -> None:
    one = GuestDocuments(facts(uuid="u-1", name="a"), "novalocal").meta_data("latest")
    two = GuestDocuments(facts(uuid="u-2", name="b"), "novalocal").meta_data("latest")
    assert one.alike is two.alike and one.head != two.head
    assert one.alike == b'"meta": {"a": "1"}, "public_keys": {"k": "ssh-ed25519 AAAA k"}, ' + (
        b'"keys": [{"name": "k", "type": "ssh", "data": "ssh-ed25519 AAAA k"}]'
    )
    doc = json.loads(one.render(b"seed"))
    assert doc["uuid"] == "u-1" and doc["name"] == "a" and doc["random_seed"] == "seed"
    assert doc["meta"] == {"a": "1"} and doc["keys"][0]["data"] == "ssh-ed25519 AAAA k"


def test_meta_data_is_cut_only_where_the_members_stand_together() -> None:
    # A config drive's files come between the metadata items and the keys: one piece.
    files = [{"path": "/etc/x", "content_path": "/content/0000"}]
    drive = render.meta_data(facts(), "latest", dhcp_domain="", files=files)
    assert drive.alike == b"" and drive.tail == b""
    assert json.loads(drive.render(b"s"))["files"] == files
    # Nothing alike to cut out: one piece.
    bare = render.meta_data(facts(keys=(), meta=()), "latest", dhcp_domain="")
    assert bare.alike == b"" and b'"keys"' not in bare.prefix
    # Cut or not, the same bytes.
    cut = render.meta_data(facts(), "latest", dhcp_domain="")
    whole = render.dumps({**json.loads(cut.render(b"s")), "random_seed": "s"})
    assert cut.render(b"s") == whole
