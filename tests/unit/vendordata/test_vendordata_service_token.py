"""[vendordata_dynamic_auth] through keystoneauth1: what is refused at start, and the token
headers of a plugin that needs no Keystone (admin_token; the real Keystone is in
tests/compat/test_vendordata_keystone.py)."""

from __future__ import annotations

import logging

import pytest

from cloudseed.errors import ConfigError
from cloudseed.vendordata.errors import TargetFailure
from cloudseed.vendordata.service_token import load_service_token

pytestmark = pytest.mark.anyio

PASSWORD = {
    "auth_type": "password",
    "auth_url": "http://127.0.0.1:1/v3",
    "username": "cloudseed",
    "password": "secret",
    "project_name": "service",
    "user_domain_name": "Default",
    "project_domain_name": "Default",
}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"auth_type": "pasword"}, "auth_type = pasword: no such keystoneauth plugin"),
        ({"auth_type": "password", "username": "u"}, "auth_type = password needs: auth_url"),
        ({**PASSWORD, "insecure": "maybe"}, "insecure = 'maybe': expected true or false"),
        ({**PASSWORD, "timeout": "soon"}, "timeout = 'soon': expected seconds"),
    ],
)
def test_mistakes_stop_start_up(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_service_token(options, default_timeout=10)


def test_unknown_options_are_reported(caplog: pytest.LogCaptureFixture) -> None:
    token = load_service_token(
        {**PASSWORD, "pasword": "x", "tenant_name": "service", "cafile": "", "insecure": "false"},
        default_timeout=10,
    )
    token.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    # tenant_name is password's deprecated spelling of project_name: known.
    assert warnings == [
        "[vendordata_dynamic_auth] pasword is not an option of keystoneauth's "
        "password plugin (ignored)"
    ]


async def test_admin_token_headers() -> None:
    token = load_service_token(
        {"auth_type": "admin_token", "token": "abc", "endpoint": "http://127.0.0.1:1/"},
        default_timeout=10,
    )
    try:
        assert dict(await token.headers()) == {"X-Auth-Token": "abc"}
        assert await token.invalidate() is False  # a fixed token: no point retrying
    finally:
        token.close()


async def test_unreachable_keystone_is_a_target_failure() -> None:
    token = load_service_token(PASSWORD, default_timeout=5)
    try:
        with pytest.raises(TargetFailure, match=r"^no service token: "):
            await token.headers()
    finally:
        token.close()
