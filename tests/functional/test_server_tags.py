"""Server tags (2.26, on create 2.52) and device role tags (2.32/2.42) over real HTTP, on every
database backend: Nova's answers, limits and faults, the list filters, the change feed, and
meta_data.json's ``devices`` as the metadata service serves it."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import func, select

from cloudseed.db.engines import Database
from cloudseed.servers.models import Instance, InstanceTag
from tests.support.cloud import Cloud, create_server, mv, wait_for
from tests.support.guests import Guest

pytestmark = pytest.mark.databases

V226, V252 = mv("2.26"), mv("2.52")


def tags_url(server_id: str, tag: str | None = None) -> str:
    base = f"/v2.1/servers/{server_id}/tags"
    return base if tag is None else f"{base}/{tag}"


def generation(cell_db: Database, server_id: str) -> int | None:
    return cell_db.run(
        lambda s: s.scalar(select(Instance.generation).where(Instance.uuid == server_id))
    )


def message(r: httpx.Response) -> str:
    body = r.json()
    (fault,) = body.values()
    return str(fault["message"])


def test_tags_as_nova(api: httpx.Client, cloud: Cloud, cell_db: Database) -> None:
    server_id = create_server(api, cloud, "2.52", tags=["web", "blue", "web"])["id"]
    server = wait_for(api, server_id, "ACTIVE", version="2.26")
    assert server["tags"] == ["blue", "web"]
    assert api.get(tags_url(server_id), headers=V226).json() == {"tags": ["blue", "web"]}
    # Below 2.26 the resource does not exist and the view has no tags.
    assert api.get(tags_url(server_id), headers=mv("2.25")).status_code == 404
    assert api.put(tags_url(server_id, "x"), headers=mv("2.25")).status_code == 404
    assert "tags" not in wait_for(api, server_id, "ACTIVE", version="2.25")

    before = generation(cell_db, server_id)
    r = api.put(tags_url(server_id), json={"tags": ["a", "b", "a"]}, headers=V226)
    assert (r.status_code, r.json()) == (200, {"tags": ["a", "b"]})
    assert before is not None and generation(cell_db, server_id) == before + 1  # the feed hears

    r = api.put(tags_url(server_id, "Ab-c d"), headers=V226)
    assert r.status_code == 201 and r.content == b""
    assert r.headers["location"].endswith(f"/servers/{server_id}/tags/Ab-c%20d")
    assert api.put(tags_url(server_id, "Ab-c d"), headers=V226).status_code == 204
    assert api.put(tags_url(server_id, "ab-c d"), json=None, headers=V226).status_code == 201
    assert api.get(tags_url(server_id, "Ab-c d"), headers=V226).status_code == 204
    r = api.get(tags_url(server_id, "zz"), headers=V226)
    assert (r.status_code, message(r)) == (404, f"Server {server_id} has no tag 'zz'")
    assert api.get(f"/v2.1/servers/{server_id}", headers=V226).json()["server"]["tags"] == [
        "Ab-c d",
        "a",
        "ab-c d",
        "b",
    ]

    assert api.delete(tags_url(server_id, "a"), headers=V226).status_code == 204
    r = api.delete(tags_url(server_id, "a"), headers=V226)
    assert (r.status_code, message(r)) == (404, f"Instance {server_id} has no tag 'a'")
    assert api.delete(tags_url(server_id), headers=V226).status_code == 204
    assert api.get(tags_url(server_id), headers=V226).json() == {"tags": []}

    # A stopped server's tags change too; another project's server does not exist.
    assert api.post(f"/v2.1/servers/{server_id}/action", json={"os-stop": None}).status_code == 202
    wait_for(api, server_id, "SHUTOFF")
    assert api.put(tags_url(server_id, "off"), headers=V226).status_code == 201
    other = {**V226, "X-Auth-Token": "mallory:other"}
    assert api.get(tags_url(server_id), headers=other).status_code == 404
    assert api.put(tags_url(server_id, "x"), headers=other).status_code == 404

    # Deleting the server drops its tags, as Nova does.
    assert api.delete(f"/v2.1/servers/{server_id}").status_code == 204
    left = cell_db.run(
        lambda s: s.scalar(
            select(func.count())
            .select_from(InstanceTag)
            .where(InstanceTag.instance_uuid == server_id)
        )
    )
    assert left == 0


def test_bad_tags_get_nova_faults_and_change_nothing(
    api: httpx.Client, cloud: Cloud, fake_driver
) -> None:
    server_id = create_server(api, cloud, "2.52", tags=["keep"])["id"]
    wait_for(api, server_id, "ACTIVE")
    url = tags_url(server_id)
    for bad in (["a,b"], ["a/b"], [""], ["x" * 61], [1], "tag", [f"t{i}" for i in range(51)]):
        r = api.put(url, json={"tags": bad}, headers=V226)
        assert r.status_code == 400, (bad, r.text)
        assert message(r).startswith("Invalid input for field/attribute "), message(r)
    assert api.put(url, json={"tags": ["a"], "x": 1}, headers=V226).status_code == 400
    assert api.put(url, json={}, headers=V226).status_code == 400
    r = api.put(tags_url(server_id, "a,b"), headers=V226)
    assert r.status_code == 400
    assert message(r).startswith(
        "Tag 'a,b' is invalid. It must be a non empty string without characters '/' and ','."
    )
    r = api.put(tags_url(server_id, "x" * 61), headers=V226)
    assert r.status_code == 400 and "is too long" in message(r)
    r = api.put(tags_url(server_id, "a"), json={"tag": "a"}, headers=V226)
    assert r.status_code == 400
    assert api.get(url, headers=V226).json() == {"tags": ["keep"]}

    # 50 at most: the 51st is refused, even a tag the server already has (Nova's order).
    fifty = [f"t{i:02d}" for i in range(50)]
    assert api.put(url, json={"tags": fifty}, headers=V226).json() == {"tags": fifty}
    for tag in ("new", "t00"):
        r = api.put(tags_url(server_id, tag), headers=V226)
        assert (r.status_code, message(r)) == (
            400,
            "The number of tags exceeded the per-server limit 50",
        )

    # Create: tags from 2.52 only, within the same rules.
    body = {"name": "vm", "imageRef": cloud.image_id, "flavorRef": "1", "networks": "auto"}
    r = api.post("/v2.1/servers", json={"server": {**body, "tags": ["a"]}}, headers=mv("2.51"))
    assert r.status_code == 400
    assert message(r).endswith("Additional properties are not allowed ('tags' was unexpected)")
    for bad in (["a/b"], [f"t{i}" for i in range(51)]):
        r = api.post("/v2.1/servers", json={"server": {**body, "tags": bad}}, headers=V252)
        assert r.status_code == 400, bad

    # A server that is not active, paused, suspended or stopped keeps its tags: 409.
    fake_driver.fail("spawn", message="no room")
    broken = create_server(api, cloud, "2.52", tags=["x"])["id"]
    wait_for(api, broken, "ERROR")
    for method, path in (
        ("PUT", tags_url(broken, "y")),
        ("DELETE", tags_url(broken, "x")),
        ("DELETE", tags_url(broken)),
    ):
        r = api.request(method, path, headers=V226)
        assert r.status_code == 409, (method, path)
    r = api.put(tags_url(broken), json={"tags": []}, headers=V226)
    assert (r.status_code, message(r)) == (
        409,
        f"Cannot 'update tags' instance {broken} while it is in vm_state error",
    )
    assert api.get(tags_url(broken), headers=V226).json() == {"tags": ["x"]}


def test_list_filters(api: httpx.Client, cloud: Cloud) -> None:
    made = {
        name: create_server(api, cloud, "2.52", name=name, tags=tags)["id"]
        for name, tags in (
            ("ab", ["a", "b"]),
            ("a", ["a"]),
            ("bc", ["b", "c"]),
            ("none", []),
        )
    }

    def names(version: str = "2.26", path: str = "/v2.1/servers", **params: str) -> set[str]:
        r = api.get(path, params=params, headers=mv(version))
        assert r.status_code == 200, r.text
        return {s["name"] for s in r.json()["servers"]}

    assert names(tags="a") == {"ab", "a"}
    assert names(tags="a,b") == {"ab"}
    assert names(**{"tags-any": "a,c"}) == {"ab", "a", "bc"}
    assert names(**{"not-tags": "a,b"}) == {"a", "bc", "none"}
    assert names(**{"not-tags-any": "a,c"}) == {"none"}
    assert names(tags="b", **{"not-tags-any": "c"}) == {"ab"}
    assert names(tags="") == set()
    assert names(tags="zz") == set()
    # More tags than a server can have: no server has them all, none has not them all.
    sixty = ",".join(["a", *(f"x{i}" for i in range(60))])
    assert names(tags=sixty) == set()
    assert names(**{"not-tags": sixty}) == set(made)
    r = api.get("/v2.1/servers", params={"tags-any": ",".join(map(str, range(1001)))}, headers=V226)
    assert r.status_code == 400
    # Before 2.26 the filters are not Nova's: ignored.
    assert names("2.25", tags="a") == set(made)
    detail = api.get("/v2.1/servers/detail", params={"tags": "c"}, headers=V226).json()
    (server,) = detail["servers"]
    assert (server["name"], server["tags"]) == ("bc", ["b", "c"])


@pytest.mark.loopback_guests
def test_device_role_tags_in_meta_data(api: httpx.Client, cloud: Cloud, metadata_url: str) -> None:
    net = cloud.network_id
    networks = [{"uuid": net}, {"uuid": net, "tag": "storage"}]
    # The tag is Nova's from 2.32 to 2.36 and from 2.42 on; 2.37 to 2.41 refuse it.
    body = {"name": "vm", "imageRef": cloud.image_id, "flavorRef": "1", "networks": networks}
    r = api.post("/v2.1/servers", json={"server": body}, headers=mv("2.37"))
    assert r.status_code == 400
    assert create_server(api, cloud, "2.32", networks=[{"uuid": net, "tag": "old"}])["id"]
    server_id = create_server(api, cloud, "2.42", networks=networks)["id"]
    server = wait_for(api, server_id, "ACTIVE")
    first, second = server["addresses"]["loop"]
    guest = Guest(server_id, first["addr"], first["OS-EXT-IPS-MAC:mac_addr"])
    tagged = {
        "type": "nic",
        "mac": second["OS-EXT-IPS-MAC:mac_addr"],
        "bus": "pci",
        "address": "0000:00:11.0",  # the second port's fixed slot (compute/pci_slots.py)
        "tags": ["storage"],
    }
    with guest.client(metadata_url) as md:

        def devices(version: str) -> object:
            r = md.get(f"/openstack/{version}/meta_data.json")
            assert r.status_code == 200, r.text
            return r.json().get("devices", "absent")

        assert devices("2015-10-15") == "absent"
        assert devices("2016-06-30") == devices("2017-02-22") == [tagged]
        with_trust = [{"vf_trusted": False, **tagged}]
        assert devices("2018-08-27") == devices("latest") == with_trust
        r = md.get("/openstack/latest/meta_data.json")
        assert list(r.json()["devices"][0]) == [
            "vf_trusted",
            "type",
            "mac",
            "bus",
            "address",
            "tags",
        ]
