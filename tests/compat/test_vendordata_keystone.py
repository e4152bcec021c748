"""DynamicJSON's service token against a real Keystone (tests/support/keystone.py: installed
from PyPI into a cached venv, served by gunicorn).

cloudseed is configured as a Nova operator would write ``[vendordata_dynamic_auth]``: the
password plugin and the ``cloudseed`` service user. The target (tests/support/
vendordata_targets.py) validates the ``X-Auth-Token`` it receives with Keystone itself, so a
test passes only if the token is a real one, of that user, in that project.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from cloudseed.settings import Settings, load_settings
from cloudseed.vendordata import Vendordata, VendordataError, VendordataRequest
from tests.support import keystone as keystone_support
from tests.support.keystone import Keystone
from tests.support.vendordata_targets import Targets, running_targets

pytestmark = [pytest.mark.compat, pytest.mark.anyio]


@pytest.fixture()
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def keystone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Keystone]:
    def report(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        with keystone_support.running_keystone(
            tmp_path_factory.mktemp("keystone"), report=report
        ) as ks:
            yield ks
    except keystone_support.KeystoneUnavailable as exc:
        if keystone_support.required():
            pytest.fail(f"CLOUDSEED_REQUIRE_DBS=1 but {exc}")
        pytest.skip(f"Keystone cannot be installed here: {exc}")


def keystone_check(keystone: Keystone) -> Any:
    """The target's token check: ask Keystone whose token it is (a token may validate
    itself), and answer with the user, project and roles it names."""

    def check(seen: str | None) -> Any:
        if seen is None:
            return None
        response = httpx.get(
            f"{keystone.auth_url}/auth/tokens",
            timeout=30,
            headers={"X-Auth-Token": seen, "X-Subject-Token": seen},
        )
        if response.status_code != 200:
            return None
        token = response.json()["token"]
        return {
            "user": token["user"]["name"],
            "project": token["project"]["name"],
            "roles": sorted(role["name"] for role in token["roles"]),
        }

    return check


@pytest.fixture(scope="module")
def module_targets(keystone: Keystone) -> Iterator[Targets]:
    with running_targets(check_token=keystone_check(keystone)) as targets:
        yield targets


@pytest.fixture()
def targets(module_targets: Targets) -> Targets:
    module_targets.reset()
    return module_targets


def make_settings(
    tmp_path: Path, keystone: Keystone, target: str, *, password: str | None = None
) -> Settings:
    user = keystone.service_user
    config = tmp_path / "cloudseed.conf"
    # As in nova.conf.
    config.write_text(f"""\
[api]
vendordata_providers = StaticJSON,DynamicJSON
vendordata_dynamic_targets = {target}
vendordata_dynamic_failure_fatal = true

[vendordata_dynamic_auth]
auth_type = password
auth_url = {keystone.auth_url}
username = {user.name}
password = {password or user.password}
project_name = {user.project}
user_domain_name = Default
project_domain_name = Default
""")
    settings = load_settings(config_file=config, environ={})
    assert settings.warnings == ()
    return settings


@asynccontextmanager
async def vendordata(settings: Settings) -> AsyncIterator[Vendordata]:
    service = Vendordata(settings)
    try:
        yield service
    finally:
        await service.aclose()


def request_for(instance_id: str) -> VendordataRequest:
    return VendordataRequest(
        project_id="proj",
        instance_id=instance_id,
        image_id="img",
        user_data=None,
        hostname="vm",
        metadata={},
        boot_roles="member",
    )


SERVICE_USER = {"user": "cloudseed", "project": "service", "roles": ["service"]}


async def test_service_users_token_reaches_the_target(
    tmp_path: Path, keystone: Keystone, targets: Targets
) -> None:
    settings = make_settings(tmp_path, keystone, f"secure@{targets.url('/token')}")
    async with vendordata(settings) as service:
        await service.check_for_build(request_for("ks-1"))
        first = await service.vendor_data2(request_for("ks-1"))
        second = await service.vendor_data2(request_for("ks-2"))
    assert first == b'{"static":{},"secure":' + _compact(SERVICE_USER) + b"}"
    assert second == first
    tokens = {call.headers["x-auth-token"] for call in targets.calls_to("/token")}
    assert len(targets.calls_to("/token")) == 3
    assert len(tokens) == 1  # keystoneauth logged in once and reused the token


async def test_a_refused_token_is_replaced_once(
    tmp_path: Path, keystone: Keystone, targets: Targets
) -> None:
    settings = make_settings(tmp_path, keystone, f"secure@{targets.url('/token-once')}")
    async with vendordata(settings) as service:
        await service.check_for_build(request_for("ks-revoked"))
        data = await service.vendor_data2(request_for("ks-revoked"))
    assert data == b'{"static":{},"secure":' + _compact(SERVICE_USER) + b"}"
    calls = targets.calls_to("/token-once")
    assert calls[0].headers["x-auth-token"] == targets.refused_tokens[0]
    assert calls[1].headers["x-auth-token"] != targets.refused_tokens[0]  # a new login


async def test_a_wrong_password_fails_the_build(
    tmp_path: Path, keystone: Keystone, targets: Targets
) -> None:
    settings = make_settings(
        tmp_path, keystone, f"secure@{targets.url('/token')}", password="not-the-password"
    )
    async with vendordata(settings) as service:
        with pytest.raises(VendordataError) as raised:
            await service.check_for_build(request_for("ks-denied"))
        data = await service.vendor_data2(request_for("ks-denied"))
    assert raised.value.target == "secure"
    assert raised.value.reason.startswith("no service token: ")
    assert "401" in raised.value.reason
    assert data == b'{"static":{},"secure":{}}'
    assert targets.calls_to("/token") == []  # no token, no call


def _compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()
