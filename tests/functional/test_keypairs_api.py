"""os-keypairs over real HTTP, per microversion, on every database backend."""

from __future__ import annotations

import base64
import concurrent.futures
import hashlib

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from sqlalchemy import Connection
from sqlalchemy.orm import Session

from cloudseed.keypairs import service
from cloudseed.keypairs.errors import KeypairExists, KeypairNotFound
from cloudseed.quotas.models import ProjectQuota, ProjectUserQuota
from tests.support import keys


def mv(version: str) -> dict[str, str]:
    return {"OpenStack-API-Version": f"compute {version}"}


def create(
    api: httpx.Client,
    name: str,
    public_key: str | None = None,
    version: str = "2.10",
    **extra: object,
) -> httpx.Response:
    body: dict[str, object] = {"name": name, **extra}
    if public_key is not None:
        body["public_key"] = public_key
    return api.post("/v2.1/os-keypairs", json={"keypair": body}, headers=mv(version))


class TestCreate:
    def test_import_2_1_returns_200_without_type(self, api):
        pub = keys.ed25519_public()
        r = create(api, "k1", pub, version="2.1")
        assert r.status_code == 200
        assert r.json() == {
            "keypair": {
                "name": "k1",
                "public_key": pub,
                "user_id": "alice",
                "fingerprint": keys.md5_fingerprint(pub),
            }
        }

    def test_import_2_2_returns_201_with_type(self, api):
        pub = keys.ecdsa_public()
        r = create(api, "k1", pub, version="2.2")
        assert r.status_code == 201
        assert r.json()["keypair"]["type"] == "ssh"
        assert set(r.json()["keypair"]) == {"name", "public_key", "user_id", "fingerprint", "type"}

    def test_public_key_stored_exactly_as_sent(self, api):
        pub = keys.rsa_public() + " with comment\n"
        assert create(api, "k1", pub).status_code == 201
        shown = api.get("/v2.1/os-keypairs/k1", headers=mv("2.10")).json()["keypair"]
        assert shown["public_key"] == pub
        assert shown["fingerprint"] == keys.md5_fingerprint(pub)

    def test_x509_import(self, api):
        pem, fingerprint = keys.self_signed_pem()
        r = create(api, "cert", pem, version="2.2", type="x509")
        assert r.status_code == 201
        assert r.json()["keypair"]["fingerprint"] == fingerprint
        assert r.json()["keypair"]["type"] == "x509"

    def test_generated_ssh_key_below_2_92(self, api):
        r = create(api, "gen", version="2.10")
        assert r.status_code == 201
        body = r.json()["keypair"]
        private = serialization.load_pem_private_key(body["private_key"].encode(), None)
        public_line = (
            private.public_key()
            .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
            .decode()
        )
        assert body["public_key"].startswith(public_line)
        assert body["fingerprint"] == keys.md5_fingerprint(body["public_key"])
        # The private key is never stored.
        shown = api.get("/v2.1/os-keypairs/gen", headers=mv("2.10")).json()["keypair"]
        assert "private_key" not in shown

    def test_generation_refused_from_2_92(self, api):
        r = create(api, "gen", version="2.92")
        assert r.status_code == 400
        assert r.json()["badRequest"]["message"] == (
            "Invalid input for field/attribute keypair. Value: {'name': 'gen'}. "
            "'public_key' is a required property"
        )

    def test_2_92_allows_at_and_dot_in_names(self, api):
        name = "me.and.myself@this.nice.domain.com mooh."
        assert create(api, name, keys.ed25519_public(), version="2.92").status_code == 201
        assert api.get(f"/v2.1/os-keypairs/{name}", headers=mv("2.92")).status_code == 200
        r = create(api, "a.b", keys.ed25519_public(), version="2.91")
        assert r.status_code == 400
        assert r.json()["badRequest"]["message"].startswith(
            "Invalid input for field/attribute name. Value: a.b."
        )

    @pytest.mark.parametrize(
        "name, message",
        [
            ("", None),
            (
                " lead",
                "An invalid 'name' value was provided. The name must be: printable "
                "characters. Can not start or end with whitespace.",
            ),
            ("x" * 256, None),
            ("bad/name", None),
        ],
    )
    def test_invalid_names(self, api, name, message):
        r = create(api, name, keys.ed25519_public())
        assert r.status_code == 400
        fault = r.json()["badRequest"]
        assert fault["code"] == 400
        if message:
            assert fault["message"] == message
        else:
            assert fault["message"].startswith("Invalid input for field/attribute name.")

    @pytest.mark.parametrize(
        "public_key", ["", "ssh-rsa", "ssh-rsa AAAA", "garbage", "ssh-ed25519 bm90IGEga2V5"]
    )
    def test_invalid_public_keys(self, api, public_key):
        r = create(api, "k1", public_key)
        assert r.status_code == 400
        assert r.json() == {
            "badRequest": {
                "code": 400,
                "message": "Keypair data is invalid: failed to generate fingerprint",
            }
        }
        assert api.get("/v2.1/os-keypairs/k1").status_code == 404

    def test_invalid_certificate(self, api):
        r = create(
            api,
            "c",
            "-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----",
            version="2.2",
            type="x509",
        )
        assert r.status_code == 400
        assert r.json()["badRequest"]["message"].startswith(
            "Keypair data is invalid: failed to generate X509 fingerprint. Error message:"
        )

    def test_unknown_fields_and_types_rejected(self, api):
        r = create(api, "k1", keys.ed25519_public(), version="2.1", type="ssh")
        assert r.status_code == 400
        message = r.json()["badRequest"]["message"]
        assert message.startswith("Invalid input for field/attribute keypair. Value: {")
        assert message.endswith("Additional properties are not allowed ('type' was unexpected)")
        r = create(api, "k1", keys.ed25519_public(), version="2.2", type="pgp")
        assert r.status_code == 400
        assert r.json()["badRequest"]["message"].startswith(
            "Invalid input for field/attribute type. Value: pgp."
        )
        r = create(api, "k1", keys.ed25519_public(), version="2.2", user_id="bob")
        assert r.status_code == 400  # user_id arrives with 2.10

    def test_duplicate_name_conflicts(self, api):
        assert create(api, "k1", keys.ed25519_public()).status_code == 201
        r = create(api, "k1", keys.ed25519_public())
        assert r.status_code == 409
        assert r.json() == {
            "conflictingRequest": {"code": 409, "message": "Key pair 'k1' already exists."}
        }

    def test_names_are_case_sensitive_on_every_backend(self, api):
        assert create(api, "Key", keys.ed25519_public()).status_code == 201
        assert create(api, "key", keys.ed25519_public()).status_code == 201

    def test_same_name_for_different_users(self, api):
        assert create(api, "k1", keys.ed25519_public()).status_code == 201
        r = api.post(
            "/v2.1/os-keypairs",
            headers={"X-Auth-Token": "bob:proj"},
            json={"keypair": {"name": "k1", "public_key": keys.ed25519_public()}},
        )
        assert r.status_code == 200  # 2.1 default

    def test_concurrent_duplicates_exactly_one_wins(self, api, api_url):
        public_keys = [keys.ed25519_public() for _ in range(8)]

        def attempt(pub: str) -> int:
            with httpx.Client(base_url=api_url, timeout=30) as client:
                return client.post(
                    "/v2.1/os-keypairs",
                    headers={"X-Auth-Token": "alice:proj", **mv("2.10")},
                    json={"keypair": {"name": "race", "public_key": pub}},
                ).status_code

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            statuses = sorted(pool.map(attempt, public_keys))
        assert statuses == [201] + [409] * 7
        listed = api.get("/v2.1/os-keypairs").json()["keypairs"]
        assert [k["keypair"]["name"] for k in listed] == ["race"]


class TestUserIdAndPolicy:
    def test_admin_creates_for_another_user_from_2_10(self, api):
        admin = {"X-Auth-Token": "admin:admin", **mv("2.10")}
        r = api.post(
            "/v2.1/os-keypairs",
            headers=admin,
            json={"keypair": {"name": "k1", "public_key": keys.ed25519_public(), "user_id": "bob"}},
        )
        assert r.status_code == 201
        assert r.json()["keypair"]["user_id"] == "bob"
        bob = {"X-Auth-Token": "bob:proj", **mv("2.10")}
        assert api.get("/v2.1/os-keypairs/k1", headers=bob).status_code == 200
        assert api.get("/v2.1/os-keypairs?user_id=bob", headers=admin).json()["keypairs"]
        assert api.get("/v2.1/os-keypairs/k1?user_id=bob", headers=admin).status_code == 200
        assert api.delete("/v2.1/os-keypairs/k1?user_id=bob", headers=admin).status_code == 204
        assert api.get("/v2.1/os-keypairs/k1", headers=bob).status_code == 404

    def test_user_cannot_act_for_another(self, api):
        r = create(api, "k1", keys.ed25519_public(), user_id="bob")
        assert r.status_code == 403
        assert r.json() == {
            "forbidden": {
                "code": 403,
                "message": (
                    "Policy doesn't allow os_compute_api:os-keypairs:create to be performed."
                ),
            }
        }
        for method, path, action in [
            ("GET", "/v2.1/os-keypairs?user_id=bob", "index"),
            ("GET", "/v2.1/os-keypairs/k1?user_id=bob", "show"),
            ("DELETE", "/v2.1/os-keypairs/k1?user_id=bob", "delete"),
        ]:
            r = api.request(method, path, headers=mv("2.10"))
            assert r.status_code == 403, path
            assert action in r.json()["forbidden"]["message"]

    def test_user_id_query_ignored_before_2_10(self, api):
        assert create(api, "mine", keys.ed25519_public()).status_code == 201
        r = api.get("/v2.1/os-keypairs?user_id=bob", headers=mv("2.9"))
        assert [k["keypair"]["name"] for k in r.json()["keypairs"]] == ["mine"]

    def test_show_missing(self, api):
        r = api.get("/v2.1/os-keypairs/nope")
        assert r.status_code == 404
        assert r.json() == {
            "itemNotFound": {"code": 404, "message": "Keypair nope not found for user alice"}
        }


class TestShowListDelete:
    def test_show_fields_by_version(self, api):
        pub = keys.ed25519_public()
        create(api, "k1", pub)
        body = api.get("/v2.1/os-keypairs/k1").json()["keypair"]
        assert set(body) == {
            "name",
            "public_key",
            "fingerprint",
            "user_id",
            "created_at",
            "deleted",
            "deleted_at",
            "id",
            "updated_at",
        }
        assert body["deleted"] is False and body["deleted_at"] is None
        assert isinstance(body["id"], int)
        body = api.get("/v2.1/os-keypairs/k1", headers=mv("2.2")).json()["keypair"]
        assert body["type"] == "ssh"

    def test_sha256_fingerprint_from_2_105_only(self, api):
        pub = keys.ed25519_public()
        r = create(api, "k1", pub, version="2.105")
        blob = base64.b64decode(pub.split()[1])
        expected = "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
        assert r.json()["keypair"]["fingerprint_sha256"] == expected
        for version in ("2.1", "2.104"):
            assert (
                "fingerprint_sha256"
                not in api.get("/v2.1/os-keypairs/k1", headers=mv(version)).json()["keypair"]
            )
        listed = api.get("/v2.1/os-keypairs", headers=mv("latest")).json()["keypairs"]
        assert listed[0]["keypair"]["fingerprint_sha256"] == expected

    def test_list_shape_by_version(self, api):
        create(api, "k1", keys.ed25519_public())
        item = api.get("/v2.1/os-keypairs").json()["keypairs"][0]["keypair"]
        assert set(item) == {"name", "public_key", "fingerprint"}
        item = api.get("/v2.1/os-keypairs", headers=mv("2.2")).json()["keypairs"][0]["keypair"]
        assert set(item) == {"name", "public_key", "fingerprint", "type"}

    def test_delete_status_by_version(self, api):
        create(api, "a", keys.ed25519_public())
        create(api, "b", keys.ed25519_public())
        r = api.delete("/v2.1/os-keypairs/a", headers=mv("2.1"))
        assert (r.status_code, r.content) == (202, b"")
        r = api.delete("/v2.1/os-keypairs/b", headers=mv("2.2"))
        assert (r.status_code, r.content) == (204, b"")
        r = api.delete("/v2.1/os-keypairs/b", headers=mv("2.2"))
        assert r.status_code == 404
        assert r.json()["itemNotFound"]["message"] == "Keypair b not found for user alice"

    def test_project_id_in_url(self, api):
        create(api, "k1", keys.ed25519_public())
        assert api.get("/v2.1/proj/os-keypairs/k1").status_code == 200
        r = api.get("/v2.1/other/os-keypairs/k1")
        assert r.status_code == 400
        assert "doesn't match Context's project_id 'proj'" in r.json()["badRequest"]["message"]


class TestPagination:
    @pytest.fixture()
    def five(self, api):
        for name in ["e", "a", "d", "b", "c"]:
            assert create(api, name, keys.ed25519_public()).status_code == 201

    def names(self, response: httpx.Response) -> list[str]:
        return [k["keypair"]["name"] for k in response.json()["keypairs"]]

    def test_limit_marker_and_links(self, api, five):
        r = api.get("/v2.1/os-keypairs?limit=2", headers=mv("2.35"))
        assert self.names(r) == ["a", "b"]
        link = r.json()["keypairs_links"]
        assert link[0]["rel"] == "next"
        assert link[0]["href"].endswith("/v2.1/os-keypairs?limit=2&marker=b")
        r = api.get(link[0]["href"], headers=mv("2.35"))
        assert self.names(r) == ["c", "d"]
        r = api.get("/v2.1/os-keypairs?limit=2&marker=d", headers=mv("2.35"))
        assert self.names(r) == ["e"]
        assert "keypairs_links" not in r.json()

    def test_limit_ignored_before_2_35(self, api, five):
        r = api.get("/v2.1/os-keypairs?limit=2", headers=mv("2.34"))
        assert self.names(r) == ["a", "b", "c", "d", "e"]

    def test_max_limit_caps_pages(self, api, five, migrated_settings):
        # No limit given: a full page of max_limit gets a link; here 5 < 1000, so none.
        r = api.get("/v2.1/os-keypairs", headers=mv("2.35"))
        assert "keypairs_links" not in r.json()

    def test_bad_marker_and_limit(self, api, five):
        r = api.get("/v2.1/os-keypairs?marker=zzz", headers=mv("2.35"))
        assert r.status_code == 400
        assert r.json()["badRequest"]["message"] == "Marker zzz could not be found."
        r = api.get("/v2.1/os-keypairs?limit=-1", headers=mv("2.35"))
        assert r.status_code == 400
        assert r.json()["badRequest"]["message"].startswith(
            "Invalid input for query parameters limit. Value: -1."
        )

    def test_unknown_query_parameters_from_2_75(self, api, five):
        assert api.get("/v2.1/os-keypairs?foo=1", headers=mv("2.74")).status_code == 200
        r = api.get("/v2.1/os-keypairs?foo=1", headers=mv("2.75"))
        assert r.status_code == 400
        assert r.json()["badRequest"]["message"] == (
            "Additional properties are not allowed ('foo' was unexpected)"
        )
        assert api.get("/v2.1/os-keypairs/a?foo=1", headers=mv("2.75")).status_code == 400
        assert api.delete("/v2.1/os-keypairs/a?foo=1", headers=mv("2.75")).status_code == 400


class TestQuota:
    def test_default_quota(self, api, api_db, migrated_settings):
        # The suite's settings use the default of 100; fill it through the API.
        limit = migrated_settings.quota.key_pairs
        for i in range(limit):
            assert create(api, f"k{i:03}", keys.ed25519_public()).status_code == 201
        r = create(api, "one-too-many", keys.ed25519_public())
        assert r.status_code == 403
        assert r.json() == {
            "forbidden": {"code": 403, "message": "Quota exceeded, too many key pairs."}
        }
        # Generation is refused too, before any key is made.
        assert create(api, "gen").status_code == 403

    def test_per_user_override(self, api, api_db):
        def work(session: Session) -> None:
            session.add(
                ProjectUserQuota(
                    project_id="proj", user_id="alice", resource="key_pairs", hard_limit=1
                )
            )

        api_db.run(work, write=True)
        assert create(api, "k1", keys.ed25519_public()).status_code == 201
        assert create(api, "k2", keys.ed25519_public()).status_code == 403
        # bob is not limited by alice's override
        r = api.post(
            "/v2.1/os-keypairs",
            headers={"X-Auth-Token": "bob:proj"},
            json={"keypair": {"name": "k2", "public_key": keys.ed25519_public()}},
        )
        assert r.status_code == 200

    def test_project_override_and_the_user_row_winning_over_it(self, api, api_db):
        api_db.run(
            lambda session: session.add(
                ProjectQuota(project_id="proj", resource="key_pairs", hard_limit=1)
            ),
            write=True,
        )
        assert create(api, "k1", keys.ed25519_public()).status_code == 201
        assert create(api, "k2", keys.ed25519_public()).status_code == 403

        def work2(session: Session) -> None:
            session.add(
                ProjectUserQuota(
                    project_id="proj", user_id="alice", resource="key_pairs", hard_limit=-1
                )
            )

        api_db.run(work2, write=True)
        # alice's own row (unlimited) replaces her project's limit; other quotas are apart.
        assert create(api, "k2", keys.ed25519_public()).status_code == 201
        assert create(api, "k3", keys.ed25519_public()).status_code == 201

    def test_quota_is_checked_before_the_name(self, api, api_db):
        # As Nova: at the limit, an existing name is refused for the quota, not as a conflict.
        def work3(session: Session) -> None:
            session.add(
                ProjectUserQuota(
                    project_id="proj", user_id="alice", resource="key_pairs", hard_limit=1
                )
            )

        api_db.run(work3, write=True)
        assert create(api, "k1", keys.ed25519_public()).status_code == 201
        r = create(api, "k1", keys.ed25519_public())
        assert r.status_code == 403
        assert r.json()["forbidden"]["message"] == "Quota exceeded, too many key pairs."

    def test_concurrent_imports_never_pass_the_limit(self, api, api_db, api_url):
        def work4(session: Session) -> None:
            session.add(
                ProjectUserQuota(
                    project_id="proj", user_id="alice", resource="key_pairs", hard_limit=3
                )
            )

        api_db.run(work4, write=True)
        public_keys = [keys.ed25519_public() for _ in range(12)]

        def one(i: int) -> int:
            with httpx.Client(base_url=api_url, headers={"X-Auth-Token": "alice:proj"}) as c:
                body = {"keypair": {"name": f"c{i}", "public_key": public_keys[i]}}
                return c.post("/v2.1/os-keypairs", json=body, headers=mv("2.10")).status_code

        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            statuses = sorted(pool.map(one, range(12)))
        listed = api.get("/v2.1/os-keypairs", headers=mv("2.10")).json()["keypairs"]
        assert len(listed) <= 3
        assert statuses.count(201) == len(listed)
        assert set(statuses) <= {201, 403}


class TestServiceTransactions:
    """The service functions on a Core connection (what the routes use) and on a Session
    (what the CLI uses) write the same rows, and a failure leaves nothing behind."""

    QUOTA = service.Quota(default=10, recheck=True, project_id="proj")

    def test_a_failed_transaction_leaves_nothing(self, clean_api_db):
        def import_three(connection: Connection) -> None:
            for name in ("a", "b", "a"):
                service.import_keypair(
                    connection,
                    user_id="u",
                    name=name,
                    public_key=keys.ed25519_public(),
                    key_type="ssh",
                    quota=self.QUOTA,
                )

        with pytest.raises(KeypairExists):
            clean_api_db.run(import_three, write=True, core=True)
        with clean_api_db.read() as session:
            assert service.list_keypairs(session, user_id="u") == []

    def test_connection_and_session_write_the_same_row(self, clean_api_db):
        public_key = keys.ed25519_public()
        by_connection = clean_api_db.run(
            lambda connection: service.import_keypair(
                connection,
                user_id="u",
                name="c",
                public_key=public_key,
                key_type="ssh",
                quota=self.QUOTA,
            ),
            write=True,
            core=True,
        )

        by_session = clean_api_db.run(
            lambda session: service.import_keypair(
                session,
                user_id="u",
                name="s",
                public_key=public_key,
                key_type="ssh",
                quota=self.QUOTA,
            ),
            write=True,
        )
        with clean_api_db.read() as session:
            stored = {k.name: k for k in service.list_keypairs(session, user_id="u")}
        for made in (by_connection, by_session):
            row = stored[made.name]
            assert (made.id, made.fingerprint, made.fingerprint_sha256, made.type) == (
                row.id,
                row.fingerprint,
                row.fingerprint_sha256,
                row.type,
            )
            assert made.created_at == row.created_at.replace(tzinfo=None)
        clean_api_db.run(
            lambda connection: service.delete_keypair(connection, user_id="u", name="c"),
            write=True,
            core=True,
        )

        def work6(session: Session) -> None:
            service.delete_keypair(session, user_id="u", name="s")
            with pytest.raises(KeypairNotFound):
                service.delete_keypair(session, user_id="u", name="s")

        clean_api_db.run(work6, write=True)
