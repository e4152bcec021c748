"""The metadata service over real HTTP, on every database backend.

Guests are simulated by connecting from other loopback addresses: instances get fixed IPs on
a 127.0.0.0/24 network, and a client bound to an instance's address is that instance as far
as the service can tell. Proxy and token modes run their own servers.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from sqlalchemy import text, update
from sqlalchemy.orm import Session

from cloudseed.cells.service import CellDatabases
from cloudseed.db.engines import Database
from cloudseed.metadata.loading import BY_ADDRESS, BY_UUID, Key, load_guests
from cloudseed.servers.models import GuestChange, Instance
from cloudseed.settings import Settings
from cloudseed.signing import sign
from tests.support.cloud import Cloud, b64, mv
from tests.support.guests import SECRET, Guest, MetadataServer, boot
from tests.support.waiting import eventually, wait_until

pytestmark = [pytest.mark.databases, pytest.mark.loopback_guests]

OPENSTACK_VERSIONS = [
    "2012-08-10",
    "2013-04-04",
    "2013-10-17",
    "2015-10-15",
    "2016-06-30",
    "2016-10-06",
    "2017-02-22",
    "2018-08-27",
    "2020-10-14",
    "2025-04-04",
]


# -- the OpenStack tree -------------------------------------------------------------------


def test_openstack_tree(api: httpx.Client, cloud: Cloud, metadata_url: str) -> None:
    guest = boot(
        api,
        cloud,
        key_name="key1",
        user_data=b64("#!/bin/sh\necho hi\n"),
        metadata={"role": "web"},
        availability_zone="nova",
    )
    with guest.client(metadata_url) as md:
        r = md.get("/openstack")
        assert r.status_code == 200
        assert r.text.splitlines() == [*OPENSTACK_VERSIONS, "latest"]
        assert r.headers["content-type"].startswith("text/plain")
        listing = md.get("/openstack/2018-08-27").text.splitlines()
        assert listing == [
            "meta_data.json",
            "user_data",
            "password",
            "vendor_data.json",
            "network_data.json",
            "vendor_data2.json",
        ]
        assert md.get("/openstack/2012-08-10/").text.splitlines() == ["meta_data.json", "user_data"]
        r = md.get("/openstack/latest/meta_data.json")
        assert r.headers["content-type"] == "application/json"
        meta = r.json()
        assert list(meta) == [
            "uuid",
            "meta",
            "public_keys",
            "keys",
            "hostname",
            "name",
            "launch_index",
            "availability_zone",
            "random_seed",
            "project_id",
            "devices",
            "dedicated_cpus",
        ]
        assert meta["uuid"] == guest.id
        assert meta["meta"] == {"role": "web"}
        assert meta["public_keys"] == {"key1": cloud.key1}
        assert meta["keys"] == [{"name": "key1", "type": "ssh", "data": cloud.key1}]
        assert meta["hostname"] == "vm.novalocal"
        assert meta["availability_zone"] == "nova"
        assert meta["project_id"] == "proj"
        assert len(base64.b64decode(meta["random_seed"])) == 512
        again = md.get("/openstack/latest/meta_data.json").json()
        assert again["random_seed"] != meta["random_seed"]  # fresh per request, as Nova
        old = md.get("/openstack/2012-08-10/meta_data.json").json()
        assert "random_seed" not in old and "project_id" not in old
        assert "devices" not in md.get("/openstack/2015-10-15/meta_data.json").json()
        r = md.get("/openstack/2018-08-27/user_data")
        assert r.content == b"#!/bin/sh\necho hi\n"
        network = md.get("/openstack/latest/network_data.json")
        assert network.headers["content-type"] == "application/json"
        (link,) = network.json()["links"]
        assert link["ethernet_mac_address"] == guest.mac
        (net,) = network.json()["networks"]
        assert net["ip_address"] == guest.address and net["type"] == "ipv4"
        assert net["routes"] == [
            {"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "127.0.0.1"}
        ]
        assert md.get("/openstack/latest/vendor_data.json").json() == {}
        assert md.get("/openstack/latest/vendor_data2.json").json() == {"static": {}}


def test_missing_things_are_404(api: httpx.Client, cloud: Cloud, metadata_url: str) -> None:
    guest = boot(api, cloud)
    with guest.client(metadata_url) as md:
        assert md.get("/openstack/latest/user_data").status_code == 404
        assert md.get("/2009-04-04/user-data").status_code == 404
        assert "user_data" not in md.get("/openstack/latest").text.splitlines()
        for path in (
            "/openstack/2011-01-01/meta_data.json",
            "/openstack/latest/nothing",
            "/openstack/2012-08-10/password",
            "/openstack/2013-04-04/vendor_data.json",
            "/openstack/latest/content",
            "/openstack/content",
            "/openstack/content/0000",
            "/2010-01-01/meta-data/",
            "/latest/meta-data/nothing",
            "/latest/nothing",
            "/nothing",
        ):
            assert md.get(path).status_code == 404, path
        meta = md.get("/openstack/latest/meta_data.json").json()
        assert "public_keys" not in meta and "keys" not in meta and "meta" not in meta


def test_paths_normalise_as_nova(api: httpx.Client, cloud: Cloud, metadata_url: str) -> None:
    guest = boot(api, cloud)
    with guest.client(metadata_url) as md:
        for path in (
            "/openstack/latest/../latest/meta_data.json",
            "/openstack//latest/meta_data.json/",
            "/openstack/./latest/meta_data.json",
        ):
            r = md.get(path)
            assert r.status_code == 200 and r.json()["uuid"] == guest.id, path
        assert (
            md.get("/ec2/latest/meta-data/instance-id").text
            == md.get("/latest/meta-data/instance-id").text
        )


def test_methods_and_head(api: httpx.Client, cloud: Cloud, metadata_url: str) -> None:
    guest = boot(api, cloud, user_data=b64("data"))
    with guest.client(metadata_url) as md:
        get = md.get("/openstack/latest/meta_data.json")
        head = md.head("/openstack/latest/meta_data.json")
        assert head.status_code == 200 and head.content == b""
        assert head.headers["content-length"] == get.headers["content-length"]
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            r = md.request(method, "/openstack/latest/meta_data.json")
            assert r.status_code == 405, method
            assert r.headers["allow"] == "GET, HEAD"
        assert md.put("/latest/meta-data/").status_code == 405
        assert md.get("/latest/api/token").status_code == 405
        assert md.delete("/openstack/latest/password").headers["allow"] == "POST, GET, HEAD"
        # The same MethodNotAllowed as the compute API's, in the metadata service's plain text.
        r = md.post("/latest/meta-data/")
        assert r.headers["content-type"] == "text/plain; charset=utf-8"
        assert r.text == (
            "405 Method Not Allowed\n\nThe method is not allowed for the requested URL."
        )


# -- the EC2 tree ---------------------------------------------------------------------------


def test_ec2_tree(api: httpx.Client, cloud: Cloud, metadata_url: str) -> None:
    guest = boot(
        api,
        cloud,
        key_name="key1",
        user_data=b64("#cloud-config\n{}\n"),
        availability_zone="nova",
    )
    with guest.client(metadata_url) as md:
        index = md.get("/")
        assert index.text.splitlines()[-2:] == ["2009-04-04", "latest"]
        assert md.get("/latest").text.splitlines() == ["dynamic/", "meta-data/", "user-data"]
        listing = md.get("/latest/meta-data/").text.splitlines()
        for entry in (
            "ami-id",
            "ami-launch-index",
            "hostname",
            "instance-id",
            "local-ipv4",
            "public-keys/",
            "placement/",
            "block-device-mapping/",
            "instance-type",
            "reservation-id",
            "local-hostname",
            "instance-action",
        ):
            assert entry in listing
        assert listing == sorted(listing)
        assert md.get("/latest/meta-data/local-ipv4").text == guest.address
        assert md.get("/latest/meta-data/hostname").text == "vm.novalocal"
        assert md.get("/latest/meta-data/instance-type").text == "m1.tiny"
        assert md.get("/latest/meta-data/placement/availability-zone").text == "nova"
        assert md.get("/latest/meta-data/public-keys/").text == "0=key1"
        assert md.get("/latest/meta-data/public-keys/0").text == "openssh-key"
        assert md.get("/latest/meta-data/public-keys/0/openssh-key").text == cloud.key1
        assert md.get("/latest/meta-data/public-keys/1/openssh-key").status_code == 404
        assert md.get("/2009-04-04/user-data").content == b"#cloud-config\n{}\n"
        assert md.get("/1.0/meta-data/").status_code == 200
        assert "placement/" not in md.get("/1.0/meta-data/").text
        assert md.get("/latest/meta-data/instance-id").text.startswith("i-")


def test_ec2_security_groups_follow_the_server(
    api: httpx.Client, cloud: Cloud, metadata_url: str
) -> None:
    guest = boot(api, cloud)
    with guest.client(metadata_url) as md:
        path = "/latest/meta-data/security-groups"
        assert md.get(path).text == "default"
        r = api.post(
            f"/v2.1/servers/{guest.id}/action", json={"removeSecurityGroup": {"name": "default"}}
        )
        assert r.status_code == 202, r.text
        eventually(lambda: md.get(path).text == "")


# -- who is asking ------------------------------------------------------------------------


def test_unknown_and_deleted_callers_get_nothing(
    api: httpx.Client, cloud: Cloud, metadata_url: str
) -> None:
    stranger = Guest("none", "127.0.0.99", "")
    with stranger.client(metadata_url) as md:
        assert md.get("/").status_code == 200  # the EC2 index names nobody, as in Nova
        assert md.get("/openstack").status_code == 404
        assert md.get("/openstack/latest/meta_data.json").status_code == 404
        assert md.get("/latest/meta-data/").status_code == 404
    guest = boot(api, cloud)
    with guest.client(metadata_url) as md:
        assert md.get("/openstack/latest/meta_data.json").status_code == 200  # now cached
        assert api.delete(f"/v2.1/servers/{guest.id}").status_code == 204
        eventually(lambda: md.get("/openstack/latest/meta_data.json").status_code == 404, timeout=2)


def test_an_unknown_caller_cannot_tell_from_a_missing_document(
    api: httpx.Client, cloud: Cloud, metadata_url: str
) -> None:
    """UnknownCaller (nobody has this address) and NoSuchDocument (no user data here) are two
    errors for the log, one answer for the caller."""
    guest = boot(api, cloud)  # no user data
    with Guest("none", "127.0.0.98", "").client(metadata_url) as md:
        unknown = md.get("/openstack/latest/user_data")
    with guest.client(metadata_url) as md:
        missing = md.get("/openstack/latest/user_data")
        no_path = md.get("/openstack/latest/nothing")
    for r in (unknown, missing, no_path):
        assert r.status_code == 404
        assert r.headers["content-type"] == "text/plain; charset=utf-8"
        assert r.text == "404 Not Found\n\nThe resource could not be found."


def test_forwarded_headers_count_only_from_trusted_proxies(
    api: httpx.Client, cloud: Cloud, metadata_url: str
) -> None:
    victim, attacker = boot(api, cloud, user_data=b64("secret")), boot(api, cloud)
    spoofs = [
        {"X-Forwarded-For": victim.address},
        {"Forwarded": f"for={victim.address}"},
        {"X-Forwarded-For": f"{victim.address}, {victim.address}"},
        {
            "X-Instance-ID": victim.id,
            "X-Tenant-ID": "proj",
            "X-Instance-ID-Signature": sign(SECRET, victim.id),
        },
    ]
    with attacker.client(metadata_url) as md:
        for headers in spoofs:
            r = md.get("/openstack/latest/meta_data.json", headers=headers)
            assert r.json()["uuid"] == attacker.id, headers
            assert md.get("/openstack/latest/user_data", headers=headers).status_code == 404
    proxy = Guest("proxy", "127.0.0.250", "")
    with proxy.client(metadata_url) as md:
        assert md.get("/openstack/latest/meta_data.json").status_code == 404  # itself
        r = md.get("/openstack/latest/meta_data.json", headers={"X-Forwarded-For": victim.address})
        assert r.json()["uuid"] == victim.id
        # Only the configured header (X-Forwarded-For by default) counts: Forwarded is the
        # guest's own, so the caller is the proxy itself.
        r = md.get(
            "/openstack/latest/meta_data.json",
            headers={"Forwarded": f'for="{attacker.address}:4711";proto=http'},
        )
        assert r.status_code == 404
        # A client that prepends a forged hop is still itself: the nearest untrusted hop.
        r = md.get(
            "/openstack/latest/meta_data.json",
            headers={"X-Forwarded-For": f"{victim.address}, {attacker.address}"},
        )
        assert r.json()["uuid"] == attacker.id


def test_proxy_mode_signed_headers(
    api: httpx.Client, cloud: Cloud, metadata_server: MetadataServer
) -> None:
    guest = boot(api, cloud, user_data=b64("mine"))
    other = boot(api, cloud)
    good = {
        "X-Instance-ID": guest.id,
        "X-Tenant-ID": "proj",
        "X-Instance-ID-Signature": sign(SECRET, guest.id),
    }
    neutron = ("neutron", {"service_metadata_proxy": True, "metadata_proxy_shared_secret": SECRET})
    with metadata_server(neutron) as url, httpx.Client(base_url=url, timeout=10) as md:
        assert md.get("/openstack/latest/user_data", headers=good).content == b"mine"
        cases: list[tuple[dict[str, str], int, str]] = [
            ({}, 400, "X-Instance-ID header is missing"),
            ({"X-Instance-ID": guest.id}, 400, "X-Instance-ID-Signature header is missing"),
            (
                {"X-Instance-ID": guest.id, "X-Instance-ID-Signature": "00"},
                400,
                "X-Tenant-ID header is missing",
            ),
            (
                {**good, "X-Instance-ID-Signature": sign("wrong", guest.id)},
                403,
                "Invalid proxy request signature.",
            ),
            ({**good, "X-Instance-ID": other.id}, 403, "Invalid proxy request signature."),
            ({**good, "X-Tenant-ID": "someone-else"}, 404, ""),
        ]
        for headers, status, message in cases:
            r = md.get("/openstack/latest/meta_data.json", headers=headers)
            assert r.status_code == status, (headers, r.text)
            assert message in r.text
        twice = httpx.Headers(
            [
                ("X-Instance-ID", guest.id),
                ("X-Instance-ID", other.id),
                ("X-Tenant-ID", "proj"),
                ("X-Instance-ID-Signature", sign(SECRET, guest.id)),
            ]
        )
        r = md.get("/openstack/latest/meta_data.json", headers=twice)
        assert r.status_code == 400 and "Multiple X-Instance-ID headers" in r.text
        # The source address means nothing in this mode.
        with guest.client(url) as from_guest:
            assert from_guest.get("/openstack/latest/meta_data.json").status_code == 400


def test_proxy_mode_metadata_provider(
    api: httpx.Client, cloud: Cloud, metadata_server: MetadataServer
) -> None:
    guest = boot(api, cloud)
    neutron = ("neutron", {"service_metadata_proxy": True, "metadata_proxy_shared_secret": SECRET})
    provider = cloud.network_id
    with metadata_server(neutron) as url, httpx.Client(base_url=url, timeout=10) as md:
        ok = {
            "X-Metadata-Provider": provider,
            "X-Forwarded-For": guest.address,
            "X-Metadata-Provider-Signature": sign(SECRET, provider),
        }
        assert md.get("/openstack/latest/meta_data.json", headers=ok).json()["uuid"] == guest.id
        r = md.get(
            "/openstack/latest/meta_data.json",
            headers={k: v for k, v in ok.items() if k != "X-Forwarded-For"},
        )
        assert r.status_code == 400 and "X-Forwarded-For is missing" in r.text
        bad = {**ok, "X-Metadata-Provider-Signature": sign("wrong", provider)}
        assert md.get("/openstack/latest/meta_data.json", headers=bad).status_code == 403
        other = {
            **ok,
            "X-Metadata-Provider": "another-network",
            "X-Metadata-Provider-Signature": sign(SECRET, "another-network"),
        }
        assert md.get("/openstack/latest/meta_data.json", headers=other).status_code == 400


# -- session tokens ---------------------------------------------------------------------------


def test_session_tokens(api: httpx.Client, cloud: Cloud, metadata_url: str) -> None:
    guest, other = boot(api, cloud), boot(api, cloud)
    with guest.client(metadata_url) as md, other.client(metadata_url) as md2:
        r = md.put("/latest/api/token", headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"})
        assert r.status_code == 200
        assert r.headers["x-aws-ec2-metadata-token-ttl-seconds"] == "60"
        token = r.text
        with_token = {"X-aws-ec2-metadata-token": token}
        assert md.get("/latest/meta-data/instance-id", headers=with_token).status_code == 200
        assert md.get("/openstack/latest/meta_data.json", headers=with_token).status_code == 200
        assert (
            md.get(
                "/latest/meta-data/",
                headers={
                    "X-aws-ec2-metadata-token": token[:-1] + ("1" if token[-1] == "0" else "0"),
                },
            ).status_code
            == 401
        )
        # Bound to the instance: another guest cannot use it.
        assert md2.get("/latest/meta-data/", headers=with_token).status_code == 401
        # Not required here, so no token is fine.
        assert md.get("/latest/meta-data/").status_code == 200
        for ttl in ("0", "21601", "soon", None):
            headers = {} if ttl is None else {"X-aws-ec2-metadata-token-ttl-seconds": ttl}
            assert md.put("/latest/api/token", headers=headers).status_code == 400, ttl
        r = md.put(
            "/latest/api/token",
            headers={"X-aws-ec2-metadata-token-ttl-seconds": "60", "X-Forwarded-For": "127.0.0.9"},
        )
        assert r.status_code == 403
        short = md.put(
            "/latest/api/token", headers={"X-aws-ec2-metadata-token-ttl-seconds": "1"}
        ).text
        expires = int(short.split(".")[1])  # v1.<expires>.<mac>
        wait_until(lambda: time.time() > expires, what="the short token's expiry passed")
        assert (
            md.get("/latest/meta-data/", headers={"X-aws-ec2-metadata-token": short}).status_code
            == 401
        )


def test_tokens_required_globally(
    api: httpx.Client, cloud: Cloud, metadata_server: MetadataServer
) -> None:
    guest = boot(api, cloud)
    with metadata_server(("metadata", {"require_token": True})) as url, guest.client(url) as md:
        for path in ("/latest/meta-data/", "/openstack/latest/meta_data.json", "/openstack"):
            r = md.get(path)
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Token"
        token = md.put(
            "/latest/api/token", headers={"X-aws-ec2-metadata-token-ttl-seconds": "300"}
        ).text
        for path in ("/latest/meta-data/", "/openstack/latest/meta_data.json"):
            assert md.get(path, headers={"X-aws-ec2-metadata-token": token}).status_code == 200


def test_tokens_required_per_instance(api: httpx.Client, cloud: Cloud, metadata_url: str) -> None:
    strict = boot(api, cloud, metadata={"metadata_http_tokens": "required"})
    relaxed = boot(api, cloud)
    with strict.client(metadata_url) as md:
        assert md.get("/openstack/latest/meta_data.json").status_code == 401
        token = md.put(
            "/latest/api/token", headers={"X-aws-ec2-metadata-token-ttl-seconds": "300"}
        ).text
        assert (
            md.get(
                "/openstack/latest/meta_data.json", headers={"X-aws-ec2-metadata-token": token}
            ).status_code
            == 200
        )
    with relaxed.client(metadata_url) as md:
        assert md.get("/openstack/latest/meta_data.json").status_code == 200


# -- password -----------------------------------------------------------------------------------


def test_password_posted_once_and_read_through_the_api(
    api: httpx.Client, cloud: Cloud, metadata_url: str
) -> None:
    guest = boot(api, cloud)
    url = f"/v2.1/servers/{guest.id}/os-server-password"
    with guest.client(metadata_url) as md:
        assert md.get("/openstack/latest/password").content == b""
        assert api.get(url).json() == {"password": ""}
        assert md.post("/openstack/latest/password", content=b"x" * 1021).status_code == 400
        assert md.post("/openstack/latest/password", content=b"p" * 1020).status_code == 200
        assert md.post("/openstack/latest/password", content=b"again").status_code == 409
        assert md.get("/openstack/latest/password").content == b"p" * 1020
        assert api.get(url).json() == {"password": "p" * 1020}
        assert api.delete(url).status_code == 204
        assert api.get(url).json() == {"password": ""}
        eventually(lambda: md.get("/openstack/latest/password").content == b"")
        assert md.post("/openstack/latest/password", content=b"new").status_code == 200
        assert api.get(url).json() == {"password": "new"}
    assert api.get("/v2.1/servers/nope/os-server-password").status_code == 404
    assert httpx.get(
        api.base_url.join(url), headers={"X-Auth-Token": "mallory:other"}
    ).status_code in (403, 404)


def test_empty_password_post_sets_nothing(
    api: httpx.Client, cloud: Cloud, metadata_url: str
) -> None:
    """As Nova: an empty post is a no-op (200), so the guest can still post its password."""
    guest = boot(api, cloud)
    with guest.client(metadata_url) as md:
        assert md.post("/openstack/latest/password", content=b"").status_code == 200
        assert md.get("/openstack/latest/password").content == b""
        assert md.post("/openstack/latest/password", content=b"real").status_code == 200
        assert md.get("/openstack/latest/password").content == b"real"


def test_password_that_is_not_utf8_is_refused(
    api: httpx.Client, cloud: Cloud, metadata_url: str
) -> None:
    guest = boot(api, cloud)
    url = f"/v2.1/servers/{guest.id}/os-server-password"
    with guest.client(metadata_url) as md:
        for body in (b"pass\xffword", b"\xed\xa0\x80", b"\xc3"):  # bad byte, surrogate, cut
            r = md.post("/openstack/latest/password", content=body)
            assert r.status_code == 400 and "not valid UTF-8" in r.text, body
        assert api.get(url).json() == {"password": ""}
        assert md.post("/openstack/latest/password", content="pässword".encode()).status_code == 200
        assert md.get("/openstack/latest/password").text == "pässword"


# -- changes are visible at once -----------------------------------------------------------


def test_changes_reach_every_worker_at_once(
    api: httpx.Client, cloud: Cloud, metadata_url: str, metadata_server: MetadataServer
) -> None:
    guest = boot(api, cloud, key_name="key1", user_data=b64("v1"))
    with metadata_server() as second, guest.client(metadata_url) as w1, guest.client(second) as w2:
        for worker in (w1, w2):  # both have it cached now
            assert worker.get("/openstack/latest/user_data").content == b"v1"
        r = api.put(
            f"/v2.1/servers/{guest.id}",
            json={"server": {"user_data": b64("v2")}},
            headers=mv("2.105"),
        )
        assert r.status_code == 200, r.text
        for worker in (w1, w2):
            took = eventually(
                lambda w=worker: w.get("/openstack/latest/user_data").content == b"v2", timeout=1
            )
            assert took < 1
        # Rebuild with another key: the snapshot changes, the old key is gone.
        r = api.post(
            f"/v2.1/servers/{guest.id}/action",
            json={"rebuild": {"imageRef": cloud.image_id, "key_name": "key2"}},
            headers=mv("2.54"),
        )
        assert r.status_code == 202, r.text
        for worker in (w1, w2):
            eventually(
                lambda w=worker: (
                    w.get("/openstack/latest/meta_data.json").json().get("public_keys")
                    == {"key2": cloud.key2}
                )
            )
            assert worker.get("/latest/meta-data/public-keys/0/openssh-key").text == cloud.key2
        # Deleting the key pair changes nothing for the instance (it keeps its snapshot).
        assert api.delete("/v2.1/os-keypairs/key2").status_code == 202
        api.put(f"/v2.1/servers/{guest.id}/metadata/k", json={"meta": {"k": "v"}})
        for worker in (w1, w2):
            eventually(
                lambda w=worker: (
                    w.get("/openstack/latest/meta_data.json").json().get("meta") == {"k": "v"}
                )
            )
            meta = worker.get("/openstack/latest/meta_data.json").json()
            assert meta["public_keys"] == {"key2": cloud.key2}


def test_json_documents_are_valid_json_for_every_version(
    api: httpx.Client, cloud: Cloud, metadata_url: str
) -> None:
    guest = boot(api, cloud, key_name="key1", metadata={"quote": 'a"b\\c', "uni": "é✓"})
    with guest.client(metadata_url) as md:
        for version in [*OPENSTACK_VERSIONS, "latest"]:
            for name in md.get(f"/openstack/{version}").text.splitlines():
                r = md.get(f"/openstack/{version}/{name}")
                assert r.status_code == 200, (version, name)
                if name.endswith(".json"):
                    json.loads(r.content)


def test_tokens_through_trusted_forwarders_but_not_through_a_guest_relay(
    api: httpx.Client, cloud: Cloud, metadata_url: str, metadata_server: MetadataServer
) -> None:
    guest = boot(api, cloud)
    ttl = {"X-aws-ec2-metadata-token-ttl-seconds": "60"}
    proxy = Guest("proxy", "127.0.0.250", "")  # in trusted_proxies
    with proxy.client(metadata_url) as md:
        r = md.put("/latest/api/token", headers={**ttl, "X-Forwarded-For": guest.address})
        assert r.status_code == 200
        relayed = {**ttl, "X-Forwarded-For": f"127.0.0.77, {guest.address}"}
        assert md.put("/latest/api/token", headers=relayed).status_code == 403
    signed = {
        "X-Instance-ID": guest.id,
        "X-Tenant-ID": "proj",
        "X-Instance-ID-Signature": sign(SECRET, guest.id),
    }
    neutron = ("neutron", {"service_metadata_proxy": True, "metadata_proxy_shared_secret": SECRET})
    with metadata_server(neutron) as url, httpx.Client(base_url=url, timeout=10) as md:
        r = md.put("/latest/api/token", headers={**ttl, **signed, "X-Forwarded-For": guest.address})
        assert r.status_code == 200
        assert (
            md.get(
                "/latest/meta-data/", headers={**signed, "X-aws-ec2-metadata-token": r.text}
            ).status_code
            == 200
        )
        r = md.put(
            "/latest/api/token",
            headers={**ttl, **signed, "X-Forwarded-For": f"10.9.9.9, {guest.address}"},
        )
        assert r.status_code == 403


def test_forwarded_headers_from_localhost_are_not_believed_either(
    api: httpx.Client, cloud: Cloud, metadata_url: str
) -> None:
    victim = boot(api, cloud)
    local = Guest("local", "127.0.0.1", "")  # the address ASGI servers trust by default
    with local.client(metadata_url) as md:
        r = md.get("/openstack/latest/meta_data.json", headers={"X-Forwarded-For": victim.address})
        assert r.status_code == 404


def test_a_cold_storm_loads_each_guest_its_own_documents(
    api: httpx.Client, cloud: Cloud, metadata_url: str
) -> None:
    """Concurrent misses are loaded together in batches; each caller must still get its own
    instance, and strangers nothing, whatever else is in the batch."""
    # More guests than Nova's default instance quota (10) allows one project.
    r = api.put(
        "/v2.1/os-quota-sets/proj",
        json={"quota_set": {"instances": -1}},
        headers={"X-Auth-Token": "admin:proj"},
    )
    assert r.status_code == 200, r.text
    guests = [boot(api, cloud, name=f"storm-{n}") for n in range(12)]
    strangers = [Guest("none", f"127.0.0.{200 + n}", "") for n in range(3)]

    def crawl(guest: Guest) -> list[tuple[int, str | None]]:
        with guest.client(metadata_url) as md:
            answers = []
            for path in (
                "/openstack/latest/meta_data.json",
                "/latest/meta-data/instance-id",
                "/openstack/2012-08-10/meta_data.json",
            ):
                r = md.get(path)
                answers.append(
                    (
                        r.status_code,
                        r.json()["uuid"]
                        if r.status_code == 200 and path.endswith(".json")
                        else None,
                    )
                )
            return answers

    with ThreadPoolExecutor(max_workers=len(guests) + len(strangers)) as pool:
        results = list(pool.map(crawl, guests + strangers))
    for guest, answers in zip(guests, results, strict=False):
        assert answers == [(200, guest.id), (200, None), (200, guest.id)]
    for answers in results[len(guests) :]:
        assert [status for status, _ in answers] == [404, 404, 404]


def test_batch_loader_answers_each_key(api: httpx.Client, cloud: Cloud, api_db: Database) -> None:
    guests = [boot(api, cloud, name=f"batch-{n}") for n in range(4)]
    gone = boot(api, cloud, name="gone")
    assert api.delete(f"/v2.1/servers/{gone.id}").status_code == 204
    wait_until(
        lambda: api.get(f"/v2.1/servers/{gone.id}").status_code == 404,
        timeout=10,
        what="the deleted server gone",
    )
    keys = [
        Key(BY_UUID, guests[0].id),
        Key(BY_UUID, guests[1].id),
        Key(BY_ADDRESS, guests[2].address),
        Key(BY_ADDRESS, guests[3].address),
        Key(BY_ADDRESS, guests[0].address),  # the same guest by both keys
        Key(BY_UUID, gone.id),
        Key(BY_ADDRESS, gone.address),
        Key(BY_UUID, "00000000-0000-0000-0000-000000000000"),
        Key(BY_ADDRESS, "127.0.0.222"),
    ]
    cells = CellDatabases(api_db)
    try:
        found = load_guests(cells, keys, dhcp_domain="")
    finally:
        cells.dispose()
    uuids = {key: (doc.facts.uuid if doc is not None else None) for key, doc in found.items()}
    assert uuids == {
        keys[0]: guests[0].id,
        keys[1]: guests[1].id,
        keys[2]: guests[2].id,
        keys[3]: guests[3].id,
        keys[4]: guests[0].id,
        keys[5]: None,
        keys[6]: None,
        keys[7]: None,
        keys[8]: None,
    }
    assert found[keys[0]] is found[keys[4]]  # one object per instance in a batch


# -- PostgreSQL: the change feed on LISTEN/NOTIFY -------------------------------------------

# A change made as the API makes it (records.guest_changed: the feed row, and a NOTIFY at
# commit) but in another process, so this process's metadata service hears of it only
# through the database, never through the in-process announcement.
CHANGE_ELSEWHERE = """
import sys
from sqlalchemy import update
from cloudseed.db.engines import Database
from cloudseed.servers import records
from cloudseed.servers.models import Instance
url, uuid, user_data = sys.argv[1:]
db = Database.connect("cell1", url)
try:
    def change(session):
        session.execute(update(Instance).where(Instance.uuid == uuid).values(user_data=user_data))
        records.guest_changed(session, uuid)

    db.run(change, write=True)
finally:
    db.dispose()
"""
LISTENER = "cloudseed cloudseed_guest_changes"  # the LISTEN connection's application_name


def change_elsewhere(settings: Settings, uuid: str, user_data: str) -> None:
    subprocess.run(
        [sys.executable, "-c", CHANGE_ELSEWHERE, settings.cell_database_url, uuid, user_data],
        check=True,
        timeout=60,
    )


def change_silently(cell_db: Database, uuid: str, user_data: str) -> None:
    """A feed row with no NOTIFY: only a poll finds it."""

    def work3(session: Session) -> None:
        session.execute(update(Instance).where(Instance.uuid == uuid).values(user_data=user_data))
        session.add(GuestChange(instance_uuid=uuid))

    cell_db.run(work3, write=True)


def listener_pids(cell_db: Database) -> set[int]:
    with cell_db.read() as session:
        return set(
            session.scalars(
                text(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = :name "
                    "AND datname = current_database() AND query LIKE 'LISTEN%'"
                ),
                {"name": LISTENER},
            )
        )


def new_listener(cell_db: Database, before: set[int]) -> int:
    (pid,) = wait_until(
        lambda: listener_pids(cell_db) - before, timeout=10, what="a new LISTEN connection"
    )
    return pid


LONG_FALLBACK = ("metadata", {"change_fallback_interval_ms": 60000})
# A worker that reads the feed every 20 ms, LISTEN or not: the witness of what a poll finds.
POLLING = ("metadata", {"change_fallback_interval_ms": 20})
# NOTIFY is PostgreSQL's; the other backends poll (the tests above). Only that backend, rather
# than a skip on the others: CI refuses every skip that is not opt-in.
ONLY_POSTGRESQL = pytest.mark.parametrize("backend", ["postgresql"], indirect=True)


@ONLY_POSTGRESQL
def test_postgresql_changes_are_pushed_with_a_long_fallback(
    api: httpx.Client,
    cloud: Cloud,
    backend: str,
    migrated_settings: Settings,
    cell_db: Database,
    metadata_server: MetadataServer,
) -> None:
    """The worker reads the feed once a minute unless told: a change without a NOTIFY is not
    seen, one committed as the API commits is seen at once."""
    guest = boot(api, cloud, user_data=b64("v1"))
    before = listener_pids(cell_db)
    path = "/openstack/latest/user_data"
    with metadata_server(LONG_FALLBACK) as url, guest.client(url) as md:
        new_listener(cell_db, before)
        assert md.get(path).content == b"v1"  # cached
        # A NOTIFY is read at once. The LISTEN thread tells of its connection before of any
        # NOTIFY, so once this one is heard, so was the connection and its read: the long
        # wait has begun.
        change_elsewhere(migrated_settings, guest.id, b64("told"))
        wait_until(lambda: md.get(path).content == b"told", what="the NOTIFY heard")
        with metadata_server(POLLING) as polling, guest.client(polling) as witness:
            assert witness.get(path).content == b"told"  # cached there too
            change_silently(cell_db, guest.id, b64("unannounced"))
            # A worker that polls has read it from the feed: ours had that chance too.
            wait_until(lambda: witness.get(path).content == b"unannounced", what="a poll")
        assert md.get(path).content == b"told"  # nobody polled
        change_elsewhere(migrated_settings, guest.id, b64("v2"))
        took = eventually(lambda: md.get("/openstack/latest/user_data").content == b"v2", 1)
        assert took < 0.5


@ONLY_POSTGRESQL
def test_postgresql_feed_survives_a_lost_listen_connection(
    api: httpx.Client,
    cloud: Cloud,
    backend: str,
    migrated_settings: Settings,
    cell_db: Database,
    metadata_server: MetadataServer,
) -> None:
    """While its LISTEN connection is gone the worker polls (a change without NOTIFY is seen
    within a poll); it reconnects, and NOTIFY works again."""
    guest = boot(api, cloud, user_data=b64("v1"))
    before = listener_pids(cell_db)
    with metadata_server(LONG_FALLBACK) as url, guest.client(url) as md:
        first = new_listener(cell_db, before)
        assert md.get("/openstack/latest/user_data").content == b"v1"
        cell_db.run(
            lambda session: session.execute(
                text("SELECT pg_terminate_backend(:pid)"), {"pid": first}
            ),
            write=True,
        )
        change_silently(cell_db, guest.id, b64("v2"))
        took = eventually(lambda: md.get("/openstack/latest/user_data").content == b"v2", 2)
        assert took < 1  # polled: the lost connection ended the long wait
        second = new_listener(cell_db, before)
        assert second != first
        change_elsewhere(migrated_settings, guest.id, b64("v3"))
        took = eventually(lambda: md.get("/openstack/latest/user_data").content == b"v3", 1)
        assert took < 0.5
