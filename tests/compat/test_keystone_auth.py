"""The ``keystone`` auth strategy against a real Keystone (installed from PyPI, served by gunicorn).

cloudseed runs with ``[api] auth_strategy = keystone`` and a ``[keystone_authtoken]`` section as
a Nova operator would write it; keystonemiddleware validates real fernet tokens that Keystone
issued to real users (``tests/support/keystone.py`` sets them up), and the key pairs API must
see the identity Keystone vouches for: user id, project id and roles.

Runs on the SQLite backend only: what is under test is authentication, not the database.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from sqlalchemy import select

from cloudseed.db.engines import Database
from cloudseed.keypairs.models import KeyPair
from cloudseed.schema import sync as schema_sync
from cloudseed.settings import Settings, load_settings
from tests.support import keystone as keystone_support
from tests.support.keystone import Keystone
from tests.support.server import running_api

pytestmark = [
    pytest.mark.compat,
    # Only SQLite: what is under test is authentication, not the database.
    pytest.mark.parametrize("backend", ["sqlite"], indirect=True),
    # keystonemiddleware imports webob, whose webob.compat does "from cgi import parse_header";
    # Python 3.11 warns that cgi is deprecated. Not cloudseed's doing, and raised while the
    # server thread builds the app (so it would abort the server's start-up under "error").
    pytest.mark.filterwarnings(
        "ignore:'cgi' is deprecated and slated for removal in Python 3.13:DeprecationWarning"
    ),
]

V2_10 = {"OpenStack-API-Version": "compute 2.10", "X-OpenStack-Nova-API-Version": "2.10"}


def _reporter(config: pytest.Config) -> Callable[[str], None]:
    """Print a line on the terminal even while output is captured (the timings)."""
    terminal = config.pluginmanager.getplugin("terminalreporter")
    capture = config.pluginmanager.getplugin("capturemanager")

    def write(line: str) -> None:
        # In -q mode the progress dots leave the cursor mid-line, and write_line() does not
        # know it.
        if getattr(getattr(terminal, "_tw", None), "width_of_current_line", 0):
            terminal.write("\n")
        terminal.write_line(line)

    def report(line: str) -> None:
        if terminal is None:
            print(line, file=sys.stderr, flush=True)
        elif capture is not None:
            with capture.global_and_fixture_disabled():
                write(line)
        else:
            write(line)

    return report


@pytest.fixture(scope="module")
def keystone(
    backend: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Keystone]:
    try:
        with keystone_support.running_keystone(
            tmp_path_factory.mktemp("keystone"), report=_reporter(request.config)
        ) as ks:
            yield ks
    except keystone_support.KeystoneUnavailable as exc:
        if keystone_support.required():
            pytest.fail(f"CLOUDSEED_REQUIRE_DBS=1 but {exc}")
        pytest.skip(f"Keystone cannot be installed here: {exc}")


@pytest.fixture(scope="module")
def keystone_settings(keystone: Keystone, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    state = tmp_path_factory.mktemp("cloudseed-keystone")
    database = f"sqlite:///{state / 'cloudseed.sqlite'}"
    config = state / "cloudseed.conf"
    # As an operator would write it for Nova; no memcached_servers: keystonemiddleware then
    # caches validated tokens in process.
    config.write_text(f"""\
[DEFAULT]
state_path = {state}

[api]
auth_strategy = keystone

[api_database]
connection = {database}

[database]
connection = {database}

[keystone_authtoken]
www_authenticate_uri = {keystone.auth_url}
auth_url = {keystone.auth_url}
auth_type = password
username = {keystone.service_user.name}
password = {keystone.service_user.password}
project_name = {keystone.service_user.project}
user_domain_name = Default
project_domain_name = Default
""")
    settings = load_settings(config_file=config, environ={})
    assert settings.warnings == ()
    assert settings.api.auth_strategy == "keystone"
    schema_sync.sync(settings)
    return settings


@pytest.fixture(scope="module")
def compute(keystone_settings: Settings) -> Iterator[str]:
    """Base URL of a cloudseed API server using the keystone strategy."""
    with running_api(keystone_settings) as url:
        yield url


@pytest.fixture(scope="module")
def tokens(keystone: Keystone, request: pytest.FixtureRequest) -> dict[str, str]:
    started = time.monotonic()
    issued = {
        "alice": keystone.token(keystone.alice),
        "bob": keystone.token(keystone.bob),
        "admin": keystone.token(keystone.admin),
    }
    _reporter(request.config)(
        f"keystone: 3 project-scoped tokens: {time.monotonic() - started:.1f} s"
    )
    return issued


def _client(base: str, token: str | None = None) -> httpx.Client:
    headers = dict(V2_10)
    if token is not None:
        headers["X-Auth-Token"] = token
    return httpx.Client(base_url=base, headers=headers, timeout=60)


def _public_key() -> str:
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    return key.public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    ).decode()


@pytest.fixture(scope="module")
def bobs_keypair(compute: str, tokens: dict[str, str]) -> str:
    with _client(compute, tokens["bob"]) as bob:
        response = bob.post(
            "/v2.1/os-keypairs", json={"keypair": {"name": "bob-key", "public_key": _public_key()}}
        )
    assert response.status_code == 201, response.text
    return "bob-key"


def _assert_unauthorized(response: httpx.Response, keystone: Keystone) -> None:
    assert response.status_code == 401, response.text
    # keystonemiddleware's own refusal, passed through: it tells the client where to log in.
    assert response.headers["www-authenticate"] == f'Keystone uri="{keystone.auth_url}"'


def test_version_discovery_needs_no_token(compute: str) -> None:
    response = httpx.get(f"{compute}/v2.1", timeout=30)
    assert response.status_code == 200, response.text
    version = response.json()["version"]
    assert version["id"] == "v2.1"
    assert version["status"] == "CURRENT"
    assert httpx.get(f"{compute}/", timeout=30).status_code == 200


def test_request_without_token_is_refused(compute: str, keystone: Keystone) -> None:
    with _client(compute) as anonymous:
        _assert_unauthorized(anonymous.get("/v2.1/os-keypairs"), keystone)
        _assert_unauthorized(
            anonymous.post(
                "/v2.1/os-keypairs", json={"keypair": {"name": "k", "public_key": _public_key()}}
            ),
            keystone,
        )


def test_garbage_token_is_refused(compute: str, keystone: Keystone) -> None:
    with _client(compute, "not-a-token") as garbage:
        _assert_unauthorized(garbage.get("/v2.1/os-keypairs"), keystone)
    # noauth2's "user:project" form means nothing to Keystone either.
    with _client(compute, f"{keystone.alice.id}:{keystone.project_ids['proj']}") as forged:
        _assert_unauthorized(forged.get("/v2.1/os-keypairs"), keystone)


def test_alice_manages_her_own_keypair(
    compute: str, keystone: Keystone, keystone_settings: Settings, tokens: dict[str, str]
) -> None:
    alice_id = keystone.alice.id
    public_key = _public_key()
    with _client(compute, tokens["alice"]) as alice:
        created = alice.post(
            "/v2.1/os-keypairs", json={"keypair": {"name": "alice-key", "public_key": public_key}}
        )
        assert created.status_code == 201, created.text
        assert created.json()["keypair"]["user_id"] == alice_id
        assert created.json()["keypair"]["public_key"] == public_key

        listed = alice.get("/v2.1/os-keypairs")
        assert listed.status_code == 200, listed.text
        assert [k["keypair"]["name"] for k in listed.json()["keypairs"]] == ["alice-key"]

        shown = alice.get("/v2.1/os-keypairs/alice-key")
        assert shown.status_code == 200, shown.text
        assert shown.json()["keypair"]["user_id"] == alice_id

        # The project id in old-style URLs must be the token's project.
        in_project = alice.get(f"/v2.1/{keystone.project_ids['proj']}/os-keypairs")
        assert in_project.status_code == 200, in_project.text
        other_project = alice.get(f"/v2.1/{keystone.project_ids['admin']}/os-keypairs")
        assert other_project.status_code == 400, other_project.text

        # What is stored is Keystone's user id, not a name.
        db = Database.connect("api", keystone_settings.api_database_url)
        try:
            with db.read() as session:
                stored = (
                    session.execute(select(KeyPair.user_id).where(KeyPair.name == "alice-key"))
                    .scalars()
                    .all()
                )
        finally:
            db.dispose()
        assert stored == [alice_id]

        deleted = alice.delete("/v2.1/os-keypairs/alice-key")
        assert deleted.status_code == 204, deleted.text
        assert alice.get("/v2.1/os-keypairs/alice-key").status_code == 404


def test_alice_cannot_see_bobs_keypairs(
    compute: str, keystone: Keystone, tokens: dict[str, str], bobs_keypair: str
) -> None:
    with _client(compute, tokens["alice"]) as alice:
        response = alice.get("/v2.1/os-keypairs", params={"user_id": keystone.bob.id})
        assert response.status_code == 403, response.text
        assert response.json() == {
            "forbidden": {
                "code": 403,
                "message": (
                    "Policy doesn't allow os_compute_api:os-keypairs:index to be performed."
                ),
            }
        }

        shown = alice.get(f"/v2.1/os-keypairs/{bobs_keypair}", params={"user_id": keystone.bob.id})
        assert shown.status_code == 403, shown.text

        # Her own list (same project as bob) does not include his key pair.
        own = alice.get("/v2.1/os-keypairs")
        assert own.status_code == 200, own.text
        assert bobs_keypair not in [k["keypair"]["name"] for k in own.json()["keypairs"]]

        # Nor may she create one in his name.
        for_bob = alice.post(
            "/v2.1/os-keypairs",
            json={
                "keypair": {
                    "name": "planted",
                    "public_key": _public_key(),
                    "user_id": keystone.bob.id,
                }
            },
        )
        assert for_bob.status_code == 403, for_bob.text


def test_admin_lists_bobs_keypairs(
    compute: str, keystone: Keystone, tokens: dict[str, str], bobs_keypair: str
) -> None:
    with _client(compute, tokens["admin"]) as admin:
        response = admin.get("/v2.1/os-keypairs", params={"user_id": keystone.bob.id})
        assert response.status_code == 200, response.text
        assert [k["keypair"]["name"] for k in response.json()["keypairs"]] == [bobs_keypair]

        shown = admin.get(f"/v2.1/os-keypairs/{bobs_keypair}", params={"user_id": keystone.bob.id})
        assert shown.status_code == 200, shown.text
        assert shown.json()["keypair"]["user_id"] == keystone.bob.id

        # Without ?user_id= the admin sees only their own (none).
        own = admin.get("/v2.1/os-keypairs")
        assert own.status_code == 200, own.text
        assert own.json()["keypairs"] == []
