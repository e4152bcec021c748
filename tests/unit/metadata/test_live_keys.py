"""Live keys in the IO-free core: every current key in both trees, authorized_keys, expiry
at request time, the login name of ``?user=``, and the facts agreeing with key_delivery."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from cloudseed.errors import InvalidInput
from cloudseed.metadata import render, render_ec2, tree
from cloudseed.metadata import versions as v
from cloudseed.metadata.delivery import guest_facts, posix_time
from cloudseed.metadata.documents import GuestDocuments
from cloudseed.metadata.facts import GuestFacts, KeyFacts
from cloudseed.servers.live_keys import delivery as key_delivery
from tests.support.guest_facts import facts, record

ED = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGFsaWNl alice@laptop"
RSA = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ bob"
X509 = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def three_keys(**changes: Any) -> GuestFacts:
    keys = (
        KeyFacts("alice", "ssh", ED),
        KeyFacts("bob", "ssh", RSA, expires_at=2000.0),
        KeyFacts("win", "x509", X509, expires_at=1000.0),
    )
    return facts(keys=keys, keys_refresh_at=1000.0, **changes)


def test_meta_data_carries_every_key_in_order() -> None:
    doc = json.loads(render.meta_data(three_keys(), v.ROCKY, dhcp_domain="").render())
    assert doc["public_keys"] == {"alice": ED, "bob": RSA, "win": X509}
    assert list(doc["public_keys"]) == ["alice", "bob", "win"]
    assert doc["keys"] == [
        {"name": "alice", "type": "ssh", "data": ED},
        {"name": "bob", "type": "ssh", "data": RSA},
        {"name": "win", "type": "x509", "data": X509},
    ]
    none = json.loads(render.meta_data(facts(keys=()), v.ROCKY, dhcp_domain="").render())
    assert "public_keys" not in none and "keys" not in none


def test_a_repeated_name_does_not_hide_a_key() -> None:
    # A project's key named like one of the server's own (another user's key pair).
    keys = (KeyFacts("k", "ssh", ED), KeyFacts("k-2", "ssh", "ssh-x a"), KeyFacts("k", "ssh", RSA))
    same = facts(keys=keys)
    assert render.key_names(same) == ["k", "k-2", "k-3"]
    doc = json.loads(render.meta_data(same, v.ROCKY, dhcp_domain="").render())
    assert list(doc["public_keys"].values()) == [ED, "ssh-x a", RSA]
    assert render_ec2.ec2_public_keys(same, ()) == b"0=k\n1=k-2\n2=k-3"


def test_ec2_public_keys() -> None:
    guest = three_keys()
    assert render_ec2.ec2_public_keys(guest, ()) == b"0=alice\n1=bob\n2=win"
    assert render_ec2.ec2_public_keys(guest, ("1",)) == b"openssh-key"
    assert render_ec2.ec2_public_keys(guest, ("1", "openssh-key")) == RSA.encode()
    assert render_ec2.ec2_public_keys(guest, ("2", "openssh-key")) == X509.encode()
    for rest in [("3",), ("01",), ("00",), ("-1",), ("+1",), ("\u0661",), ("1 ",), ("99999999",)]:
        assert render_ec2.ec2_public_keys(guest, rest) is None, rest
    assert render_ec2.ec2_public_keys(guest, ("0", "other")) is None
    assert render_ec2.ec2_public_keys(guest, ("0", "openssh-key", "x")) is None
    tree_ = render_ec2.ec2_meta_data(guest, v.EC2_LATEST, dhcp_domain="", local_ipv4=None)
    assert tree_["public-keys"] == {
        "0": {"openssh-key": ED},
        "1": {"openssh-key": RSA},
        "2": {"openssh-key": X509},
    }


def test_authorized_keys_one_ssh_key_per_line() -> None:
    hostile = KeyFacts("evil", "ssh", ED + " comment\nssh-rsa AAAA injected\n")
    guest = facts(keys=(*three_keys().keys, hostile))
    assert render.authorized_keys(guest) == f"{ED}\n{RSA}\n{ED} comment\n".encode()
    assert render.authorized_keys(facts(keys=())) == b""


def test_keys_expire_at_request_time() -> None:
    guest = three_keys()
    assert guest.at(999.9) is guest
    later = guest.at(1000.0)  # the x509 key expires at 1000: not served from then on
    assert [k.name for k in later.keys] == ["alice", "bob"]
    assert later.keys_refresh_at == 2000.0
    last = later.at(2500.0)
    assert [k.name for k in last.keys] == ["alice"] and last.keys_refresh_at is None
    assert last.at(1e12) is last
    documents = GuestDocuments(guest, "", marked=3)
    assert documents.at(10.0) is documents
    moved = documents.at(1500.0)
    assert moved is not documents and moved.marked == 3
    assert b"win" not in moved.meta_data(v.ROCKY).render()


def iso(when: dt.datetime) -> str:
    return when.isoformat() + "Z"


@pytest.mark.parametrize("seconds", [0, 59, 60, 61, 119, 120, 121, 3600, 86400])
def test_cached_facts_agree_with_key_delivery(seconds: int) -> None:
    """What a cached guest serves ``seconds`` after it was loaded is what key_delivery says
    is current then, and it is refreshed when key_delivery says the set changes next."""
    loaded = dt.datetime(2030, 1, 1, 12, 0, 0)
    minute = dt.timedelta(seconds=60)
    entries: list[dict[str, Any]] = [
        {"name": "a", "public_key": "ssh-ed25519 A", "expires_at": iso(loaded + minute)},
        {"name": "b", "public_key": "ssh-ed25519 B"},
        {"name": "c", "public_key": "ssh-ed25519 C", "expires_at": iso(loaded - minute)},
        # Another spelling of a UTC time, as stored entries may carry it.
        {"name": "d", "public_key": "ssh-ed25519 D", "expires_at": "2030-01-01T12:02:00+00:00"},
        {"name": "e", "public_key": "ssh-ed25519 E", "expires_at": None, "source": "project"},
    ]
    cached = guest_facts(record(entries), loaded)
    now = loaded + dt.timedelta(seconds=seconds)
    served = cached.at(posix_time(now))
    stored = [key_delivery.entry_defaults(e) for e in entries]
    assert [k.name for k in served.keys] == [e["name"] for e in key_delivery.current(stored, now)]
    following = key_delivery.next_expiry(stored, now)
    assert served.keys_refresh_at == (posix_time(following) if following else None)


def test_facts_carry_the_generations() -> None:
    now = dt.datetime(2030, 1, 1)
    made = guest_facts(
        record(
            [{"name": "a", "public_key": "ssh-ed25519 A"}],
            keys_generation=4,
            keys_boot_generation=2,
            keys_applied_generation=3,
        ),
        now,
    )
    assert (made.keys_generation, made.keys_boot_generation) == (4, 2)
    assert made.keys_applied_generation == 3 and made.keys_refresh_at is None
    assert made.keys == (KeyFacts("a", "ssh", "ssh-ed25519 A"),)
    # A record whose extra row was never written: the columns' defaults.
    bare = guest_facts(record([]), now)
    assert (bare.keys_generation, bare.keys_boot_generation, bare.keys_applied_generation) == (
        1,
        1,
        0,
    )
    assert GuestDocuments(made, "").marked == 3


def test_authorized_keys_path_only_under_latest() -> None:
    assert tree.parse("/openstack/latest/authorized_keys") == tree.Target(
        tree.AUTHORIZED_KEYS, v.EPOXY
    )
    assert tree.parse("/openstack/latest/./authorized_keys/") == tree.Target(
        tree.AUTHORIZED_KEYS, v.EPOXY
    )
    for path in (
        "/openstack/2025-04-04/authorized_keys",
        "/openstack/2018-08-27/authorized_keys",
        "/openstack/latest/authorized_keys/x",
        "/latest/authorized_keys",
        "/openstack/authorized_keys",
    ):
        assert tree.parse(path) is None, path


@pytest.mark.parametrize(
    ("query", "user"),
    [
        (b"", None),
        (b"user=root", "root"),
        (b"user=debian&other=1", "debian"),
        (b"user=ad.user%40EXAMPLE.ORG", "ad.user@EXAMPLE.ORG"),
        (b"user=host%24", "host$"),
        (b"user=_svc-1", "_svc-1"),
        (b"other=x", None),
        (b"user=" + b"a" * 256, "a" * 256),
    ],
)
def test_login_user(query: bytes, user: str | None) -> None:
    assert tree.login_user(query) == user


@pytest.mark.parametrize(
    "query",
    [
        b"user=",
        b"user=-oProxyCommand",
        b"user=a%20b",
        b"user=a+b",
        b"user=a%0Ab",
        b"user=a%00",
        b"user=..%2Fetc",
        b"user=a/b",
        b"user=%FF",
        b"user=\xc3\xa9",
        b"user=%C3%A9",
        b"user=a$b",
        b"user=root&user=root",
        b"user=" + b"a" * 258,
        b"&".join([b"x=1"] * 40),
    ],
)
def test_login_user_refused(query: bytes) -> None:
    with pytest.raises(InvalidInput):
        tree.login_user(query)
