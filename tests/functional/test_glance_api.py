"""The Glance slice over real HTTP on every backend: a project creates, uploads, shows, lists
and deletes its own images with Glance's rules and messages, and the compute API (its image
proxy, server create and rebuild) sees them the same way."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from cloudseed.db.engines import Database
from cloudseed.images import service as images
from cloudseed.images import store
from cloudseed.settings import GlanceSection, Settings
from tests.support.cloud import Cloud, create_server, wait_for
from tests.support.server import running_api
from tests.support.snapshot import changes, snapshot

ADMIN = {"X-Auth-Token": "admin:proj"}
BOB = {"X-Auth-Token": "bob:other"}
OCTETS = {"Content-Type": "application/octet-stream"}
DATA = bytes(range(256)) * 16  # 4 KiB of raw disk
QCOW2_HEAD = b"QFI\xfb"
SCHEMA = "Provided object does not match schema 'image': "
DENIED = "You are not authorized to complete"


def create(api: httpx.Client, headers: dict[str, str] | None = None, **fields: Any) -> Any:
    body = {"name": "mine", "disk_format": "raw", "container_format": "bare", **fields}
    r = api.post("/image/v2/images", json=body, headers=headers or {})
    assert r.status_code == 201, r.text
    return r.json()


def upload(
    api: httpx.Client, image_id: str, data: bytes = DATA, headers: dict[str, str] | None = None
) -> httpx.Response:
    return api.put(
        f"/image/v2/images/{image_id}/file", content=data, headers={**OCTETS, **(headers or {})}
    )


def glance_error(r: httpx.Response, status: int) -> str:
    """The message of a Glance-shaped error body, after checking its shape."""
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"message", "code", "title"}, body
    assert body["code"].startswith(f"{status} ") and body["code"].endswith(body["title"])
    message: str = body["message"]
    return message


class TestCreateAndUpload:
    def test_create_queued_then_upload_makes_it_active(
        self, api: httpx.Client, cloud: Cloud, migrated_settings: Settings
    ) -> None:
        r = api.post(
            "/image/v2/images",
            json={
                "name": "mine",
                "disk_format": "raw",
                "container_format": "bare",
                "visibility": "private",
                "min_ram": 1024,
                "min_disk": 2,
                "tags": ["a", "b", "a"],
                "os_distro": "debian",
            },
        )
        assert r.status_code == 201, r.text
        image = r.json()
        assert r.headers["location"] == f"/v2/images/{image['id']}"
        assert {k: image[k] for k in ("status", "size", "checksum", "os_hash_value")} == {
            "status": "queued",
            "size": None,
            "checksum": None,
            "os_hash_value": None,
        }
        assert (image["owner"], image["visibility"], image["protected"]) == (
            "proj",
            "private",
            False,
        )
        assert (image["min_ram"], image["min_disk"], image["tags"]) == (1024, 2, ["a", "b"])
        assert image["os_distro"] == "debian"  # extra properties are flattened, as Glance's

        assert upload(api, image["id"]).status_code == 204
        shown = api.get(f"/image/v2/images/{image['id']}").json()
        assert shown["status"] == "active"
        assert (shown["size"], shown["virtual_size"]) == (len(DATA), len(DATA))
        assert shown["checksum"] == hashlib.md5(DATA).hexdigest()
        assert shown["os_hash_algo"] == "sha256"
        assert shown["os_hash_value"] == hashlib.sha256(DATA).hexdigest()
        stored = [
            p
            for p in store.images_dir(migrated_settings.state_dir).iterdir()
            if p.read_bytes() == DATA
        ]
        assert len(stored) == 1 and not stored[0].name.startswith(".")

        # A second upload is Glance's 409; the data stays as it was.
        message = glance_error(upload(api, image["id"], b"other"), 409)
        assert message == "Image status transition from active to saving is not allowed"
        assert api.get(f"/image/v2/images/{image['id']}").json()["checksum"] == shown["checksum"]

    def test_a_given_id_and_its_duplicate(self, api: httpx.Client, cloud: Cloud) -> None:
        image_id = "8f7c1d3e-2b4a-4c5d-9e6f-0a1b2c3d4e5f"
        assert create(api, id=image_id)["id"] == image_id
        r = api.post("/image/v2/images", json={"id": image_id, "name": "again"})
        assert glance_error(r, 409) == f"Image ID {image_id} already exists!"

    @pytest.mark.parametrize(
        ("body", "status", "message"),
        [
            ({"status": "active"}, 403, "Attribute 'status' is read-only."),
            ({"size": 5}, 403, "Attribute 'size' is read-only."),
            ({"self": "/x"}, 403, "Attribute 'self' is read-only."),
            ({"location": "file:///etc/passwd"}, 403, "Attribute 'location' is reserved."),
            ({"os_glance_x": "y"}, 403, "Attribute 'os_glance_x' is reserved."),
            ({"visibility": "public"}, 403, f"{DENIED} publicize_image action."),
            ({"owner": "other"}, 403, "You are not permitted to create images owned by 'other'."),
            ({"os_distro": 5}, 400, f"{SCHEMA}5 is not of type 'string'"),
            ({"disk_format": "iso"}, 400, f"{SCHEMA}'iso' is not one of [None, 'raw', 'qcow2']"),
            ({"min_ram": -1}, 400, f"{SCHEMA}-1 is less than the minimum of 0"),
            ({"id": "not-a-uuid"}, 400, None),
            ({"x" * 256: "y"}, 400, "Custom property should not be greater than 255 characters."),
            ({f"p{i}": "v" for i in range(129)}, 413, None),
        ],
    )
    def test_refused_creates_change_nothing(
        self,
        api: httpx.Client,
        api_db: Database,
        cloud: Cloud,
        body: dict[str, Any],
        status: int,
        message: str | None,
    ) -> None:
        before = snapshot(api_db)
        answer = glance_error(api.post("/image/v2/images", json={"name": "x", **body}), status)
        if message is not None:
            assert answer == message
        assert changes(before, snapshot(api_db)) == []

    def test_upload_refusals(self, api: httpx.Client, api_db: Database, cloud: Cloud) -> None:
        image = create(api)
        before = snapshot(api_db)
        r = api.put(
            f"/image/v2/images/{image['id']}/file",
            content=DATA,
            headers={"Content-Type": "application/json"},
        )
        assert glance_error(r, 415) == "Unsupported Content-Type"
        r = upload(api, image["id"], headers=BOB)
        assert glance_error(r, 404) == f"No image found with ID {image['id']}"
        # Content that is not the declared format: 400, and the image is queued again.
        qcow = create(api, disk_format="qcow2")
        before = snapshot(api_db)
        r = upload(api, qcow["id"], b"not a qcow2 image" * 10)
        assert glance_error(r, 400) == "The image data is not a qcow2 image"
        r = upload(api, image["id"], QCOW2_HEAD + DATA)
        assert glance_error(r, 400) == "The image data is a qcow2 image, not raw"
        assert changes(before, snapshot(api_db)) == []
        assert upload(api, image["id"]).status_code == 204  # a retry works

    def test_upload_without_formats(self, api: httpx.Client, cloud: Cloud) -> None:
        bare = api.post("/image/v2/images", json={"name": "no formats"}).json()
        assert (bare["disk_format"], bare["container_format"], bare["visibility"]) == (
            None,
            None,
            "shared",
        )
        assert glance_error(upload(api, bare["id"]), 400) == (
            "Properties disk_format, container_format must be set prior to saving data."
        )

    def test_upload_over_the_cap(
        self, api: httpx.Client, api_db: Database, cloud: Cloud, migrated_settings: Settings
    ) -> None:
        settings = dataclasses.replace(migrated_settings, glance=GlanceSection(image_size_cap=1000))
        with (
            running_api(settings, api_db=api_db, compute=False) as base,
            httpx.Client(base_url=base, headers=api.headers, timeout=30) as small,
        ):
            image = create(small)
            before = snapshot(api_db)
            too_large = "The incoming image is too large: The provided image is too large."
            # Declared too large: refused before any byte is read.
            assert glance_error(upload(small, image["id"]), 413) == too_large

            def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
                yield from (DATA[:500], DATA[500:1200])

            r = small.put(f"/image/v2/images/{image['id']}/file", content=chunks(), headers=OCTETS)
            assert glance_error(r, 413) == too_large
            assert changes(before, snapshot(api_db)) == []
            assert upload(small, image["id"], DATA[:1000]).status_code == 204


class TestWhoSeesWhat:
    def test_private_images_are_their_projects(self, api: httpx.Client, cloud: Cloud) -> None:
        private = create(api, name="private", visibility="private")
        community = create(api, name="community", visibility="community")
        public = create(api, ADMIN, name="public", visibility="public")
        theirs = create(api, BOB, name="theirs", visibility="private")
        hidden = create(api, name="hidden", os_hidden=True)

        def listed(headers: dict[str, str], query: str = "") -> set[str]:
            r = api.get(f"/image/v2/images{query}", headers=headers)
            assert r.status_code == 200, r.text
            return {i["name"] for i in r.json()["images"]}

        operators = {"cirros", "debian"}
        assert listed({}) == operators | {"private", "community", "public"}
        assert listed(BOB) == operators | {"public", "theirs"}
        assert listed(BOB, "?visibility=community") == {"community"}
        assert listed({}, "?os_hidden=true") == {"hidden"}
        assert listed(ADMIN) == operators | {"private", "community", "public", "theirs"}
        assert api.get(f"/image/v2/images/{community['id']}", headers=BOB).status_code == 200
        r = api.get(f"/image/v2/images/{private['id']}", headers=BOB)
        assert glance_error(r, 404) == f"No image found with ID {private['id']}"
        assert api.get(f"/image/v2/images/{theirs['id']}", headers=ADMIN).status_code == 200
        assert public["owner"] == "proj" and hidden["os_hidden"] is True

        # Nova's image proxy shows each caller the same images (hidden ones left out).
        def proxied(headers: dict[str, str]) -> dict[str, tuple[str, int]]:
            r = api.get("/v2.1/images/detail", headers=headers)
            assert r.status_code == 200, r.text
            return {i["name"]: (i["status"], i["progress"]) for i in r.json()["images"]}

        assert proxied({})["private"] == ("SAVING", 25)  # queued, in Nova's words
        assert "private" not in proxied(BOB) and "theirs" in proxied(BOB)
        assert "hidden" not in proxied({})
        r = api.get(f"/v2.1/images/{private['id']}", headers=BOB)
        assert r.status_code == 404 and "itemNotFound" in r.json()

    def test_list_filters_and_pages(self, api: httpx.Client, cloud: Cloud) -> None:
        for name in ("one", "two", "three"):
            create(api, name=name, tags=[name, "mine"], role=name)
        assert [
            i["name"] for i in api.get("/image/v2/images?tag=mine&tag=two").json()["images"]
        ] == ["two"]
        assert [i["name"] for i in api.get("/image/v2/images?role=one").json()["images"]] == ["one"]
        # Glance's "in:" operator, as the openstack CLI's server list asks for image names.
        ids = {i["name"]: i["id"] for i in api.get("/image/v2/images?tag=mine").json()["images"]}
        listed = api.get("/image/v2/images", params={"id": f"in:{ids['one']},{ids['three']}"})
        assert sorted(i["name"] for i in listed.json()["images"]) == ["one", "three"]
        listed = api.get("/image/v2/images", params={"name": 'in:two,"x,y"', "tag": "mine"})
        assert [i["name"] for i in listed.json()["images"]] == ["two"]
        assert glance_error(api.get("/image/v2/images?id=in:"), 400).startswith(
            "Invalid filter value in:."
        )
        first = api.get("/image/v2/images?tag=mine&limit=2").json()
        assert [i["name"] for i in first["images"]] == ["three", "two"]  # newest first
        rest = api.get(f"/image{first['next']}").json()
        assert [i["name"] for i in rest["images"]] == ["one"] and "next" not in rest
        r = api.get("/image/v2/images?visibility=everyone")
        assert glance_error(r, 400) == "Invalid visibility value: everyone"
        assert (
            glance_error(api.get("/image/v2/images?limit=x"), 400)
            == "limit param must be an integer"
        )

    def test_errors_are_glances_everywhere_under_image(
        self, api: httpx.Client, api_url: str, cloud: Cloud
    ) -> None:
        assert glance_error(httpx.get(f"{api_url}/image/v2/images"), 401)
        r = api.patch(f"/image/v2/images/{cloud.image_id}", json=[])
        assert glance_error(r, 405) and r.headers["allow"] == "DELETE, GET, HEAD"
        assert glance_error(api.get("/image/v2/nothing"), 404)


class TestDownload:
    """``GET /v2/images/{id}/file``: what compute agents fill their image caches from."""

    def test_the_whole_and_one_range(self, api: httpx.Client, cloud: Cloud) -> None:
        image = create(api)
        assert upload(api, image["id"]).status_code == 204
        url = f"/image/v2/images/{image['id']}/file"
        r = api.get(url)
        assert r.status_code == 200 and r.content == DATA
        assert r.headers["content-type"] == "application/octet-stream"
        assert r.headers["content-md5"] == hashlib.md5(DATA).hexdigest()
        assert r.headers["content-length"] == str(len(DATA))
        for asked, start, end in (
            ("bytes=100-", 100, len(DATA)),
            ("bytes=0-9", 0, 10),
            ("bytes=4000-5000", 4000, len(DATA)),  # cut to the end
            ("bytes=-6", len(DATA) - 6, len(DATA)),
        ):
            r = api.get(url, headers={"Range": asked})
            assert r.status_code == 206, (asked, r.text)
            assert r.content == DATA[start:end], asked
            assert r.headers["content-range"] == f"bytes {start}-{end - 1}/{len(DATA)}"
        for asked in ("bytes=4096-", "bytes=9-2", "bytes=0-1,5-6", "items=0-1", "bytes=-0"):
            r = api.get(url, headers={"Range": asked})
            assert glance_error(r, 416) == "Requested range not satisfiable", asked
            assert r.headers["content-range"] == f"bytes */{len(DATA)}"

    def test_who_may_and_what_has_no_data(self, api: httpx.Client, cloud: Cloud) -> None:
        private = create(api, BOB, visibility="private")
        assert upload(api, private["id"], headers=BOB).status_code == 204
        url = f"/image/v2/images/{private['id']}/file"
        assert glance_error(api.get(url), 404) == f"No image found with ID {private['id']}"
        assert api.get(url, headers=ADMIN).content == DATA  # an agent's token: admin
        queued = create(api)
        r = api.get(f"/image/v2/images/{queued['id']}/file")
        assert r.status_code == 204 and r.content == b""
        # The operator's image (cloudseed image add), public: anyone may.
        r = api.get(f"/image/v2/images/{cloud.image_id}/file", headers=BOB)
        assert r.status_code == 200 and r.content == b"\0" * 4096

    def test_data_gone_from_this_node_is_no_content(
        self, api: httpx.Client, api_db: Database, cloud: Cloud
    ) -> None:
        image = create(api)
        assert upload(api, image["id"]).status_code == 204
        with api_db.read() as session:
            path = images.get_image(session, image["id"]).path
        assert path is not None
        os.unlink(path)
        r = api.get(f"/image/v2/images/{image['id']}/file")
        assert r.status_code == 204 and r.content == b""


class TestDelete:
    def test_owner_deletes_and_the_file_goes(
        self, api: httpx.Client, cloud: Cloud, migrated_settings: Settings
    ) -> None:
        image = create(api)
        assert upload(api, image["id"], b"\1" * 512).status_code == 204
        directory = store.images_dir(migrated_settings.state_dir)
        before = set(directory.iterdir())
        r = api.delete(f"/image/v2/images/{image['id']}", headers=BOB)
        assert glance_error(r, 404) == f"Failed to find image {image['id']} to delete"
        assert api.delete(f"/image/v2/images/{image['id']}").status_code == 204
        assert glance_error(api.get(f"/image/v2/images/{image['id']}"), 404)
        gone = before - set(directory.iterdir())
        assert len(gone) == 1 and next(iter(gone)).suffix == ".raw"

    def test_protected_and_others_images_stay(self, api: httpx.Client, cloud: Cloud) -> None:
        protected = create(api, protected=True)
        r = api.delete(f"/image/v2/images/{protected['id']}")
        assert (
            glance_error(r, 403) == f"Image {protected['id']} is protected and cannot be deleted."
        )
        community = create(api, BOB, visibility="community")
        r = api.delete(f"/image/v2/images/{community['id']}")
        assert glance_error(r, 403) == f"{DENIED} delete_image action."
        r = api.delete(f"/image/v2/images/{cloud.image_id}")  # the operator's: admin only
        assert glance_error(r, 403) == f"{DENIED} delete_image action."
        assert api.delete(f"/image/v2/images/{community['id']}", headers=ADMIN).status_code == 204

    def test_the_file_of_an_image_a_server_boots_from_stays(
        self, api: httpx.Client, cloud: Cloud, migrated_settings: Settings
    ) -> None:
        image = create(api)
        assert upload(api, image["id"], b"\2" * 512).status_code == 204
        server = create_server(api, cloud, imageRef=image["id"])
        wait_for(api, server["id"], "ACTIVE")
        directory = store.images_dir(migrated_settings.state_dir)
        before = set(directory.iterdir())
        assert api.delete(f"/image/v2/images/{image['id']}").status_code == 204
        assert set(directory.iterdir()) == before


class TestServersSeeProjectImages:
    def test_create_and_rebuild_check_the_image(
        self, api: httpx.Client, api_db: Database, cell_db: Database, cloud: Cloud
    ) -> None:
        queued = create(api)
        big_ram = create(api, min_ram=513)  # flavor 1 has 512 MiB and a 1 GiB disk
        big_disk = create(api, min_disk=2)
        private = create(api, visibility="private")
        for image in (big_ram, big_disk, private):
            assert upload(api, image["id"]).status_code == 204
        before = snapshot(cell_db)

        def refused(image_id: str, headers: dict[str, str] | None = None) -> httpx.Response:
            body = {"server": {"name": "vm", "imageRef": image_id, "flavorRef": "1"}}
            return api.post("/v2.1/servers", json=body, headers=headers or {})

        def message(r: httpx.Response, status: int = 400) -> str:
            assert r.status_code == status, r.text
            ((_name, fault),) = r.json().items()
            text: str = fault["message"]
            return text

        assert message(refused(queued["id"])) == f"Image {queued['id']} is not active."
        assert (
            message(refused(big_ram["id"])) == "Flavor's memory is too small for requested image."
        )
        assert message(refused(big_disk["id"])).startswith(
            "Flavor's disk is smaller than the minimum size specified in image metadata."
        )
        assert message(refused(private["id"], BOB), 404) == (
            f"Image {private['id']} could not be found."
        )
        assert changes(before, snapshot(cell_db)) == []

        server = create_server(api, cloud, imageRef=private["id"])
        assert wait_for(api, server["id"], "ACTIVE")["image"]["id"] == private["id"]
        action = f"/v2.1/servers/{server['id']}/action"
        r = api.post(action, json={"rebuild": {"imageRef": queued["id"]}})
        assert message(r) == f"Image {queued['id']} is not active."
        r = api.post(action, json={"rebuild": {"imageRef": big_ram["id"]}})
        assert message(r) == "Flavor's memory is too small for requested image."
        r = api.post(action, json={"rebuild": {"imageRef": cloud.image2_id}})
        assert r.status_code == 202, r.text
        assert wait_for(api, server["id"], "ACTIVE")["image"]["id"] == cloud.image2_id

    def test_an_admin_boots_another_projects_private_image(
        self, api: httpx.Client, cloud: Cloud
    ) -> None:
        theirs = create(api, BOB, visibility="private")
        assert upload(api, theirs["id"], headers=BOB).status_code == 204
        body = {"server": {"name": "vm", "imageRef": theirs["id"], "flavorRef": "1"}}
        r = api.post("/v2.1/servers", json=body, headers=ADMIN)
        assert r.status_code == 202, r.text


def test_the_registry_function_the_agent_uses_sees_everything(
    api: httpx.Client, api_db: Database, cloud: Cloud
) -> None:
    image = create(api, BOB, visibility="private")
    with api_db.read() as session:
        assert images.get_image(session, image["id"]).uuid == image["id"]
