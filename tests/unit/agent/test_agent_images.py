"""Where a compute agent fetches images from, and with which credentials (agent/images.py):
settings only, no server."""

from __future__ import annotations

import pytest

from cloudseed.agent.images import credentials, image_servers, make_image_cache
from cloudseed.compute.fake import FakeDriver
from cloudseed.errors import ConfigError
from cloudseed.settings import load_settings


def settings_of(**env: str):
    return load_settings(environ={f"CLOUDSEED_{k}": v for k, v in env.items()})


@pytest.mark.parametrize(
    ("env", "servers"),
    [
        ({}, ["http://127.0.0.1:8774/image"]),
        (
            {"OSAPI_COMPUTE_LISTEN": "0.0.0.0", "OSAPI_COMPUTE_LISTEN_PORT": "9"},
            ["http://127.0.0.1:9/image"],
        ),
        ({"OSAPI_COMPUTE_LISTEN": "::"}, ["http://[::1]:8774/image"]),
        ({"OSAPI_COMPUTE_LISTEN": "10.0.0.5"}, ["http://10.0.0.5:8774/image"]),
        (
            {"GLANCE__API_SERVERS": "http://a:8774/image, https://b/image"},
            ["http://a:8774/image", "https://b/image"],
        ),
    ],
)
def test_image_servers(env: dict[str, str], servers: list[str]) -> None:
    assert image_servers(settings_of(**env)) == servers


def test_a_port_picked_at_start_needs_api_servers() -> None:
    with pytest.raises(ConfigError, match=r"needs \[glance\] api_servers"):
        image_servers(settings_of(OSAPI_COMPUTE_LISTEN_PORT="0"))


def test_noauth2_agents_are_admin() -> None:
    assert credentials(settings_of()).headers() == {"X-Auth-Token": "admin"}


def test_keystone_needs_the_service_user(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"configure \[service_user\]"):
        credentials(settings_of(API__AUTH_STRATEGY="keystone"))
    conf = tmp_path / "cloudseed.conf"
    conf.write_text(
        "[api]\nauth_strategy = keystone\n"
        "[service_user]\nauth_type = admin_token\ntoken = svc\nendpoint = http://127.0.0.1:1/\n"
    )
    loaded = load_settings(config_file=conf, environ={})
    assert credentials(loaded).headers() == {"X-Auth-Token": "svc"}
    conf.write_text("[api]\nauth_strategy = keystone\n[service_user]\nauth_type = pasword\n")
    with pytest.raises(ConfigError, match=r"\[service_user\] auth_type = pasword"):
        credentials(load_settings(config_file=conf, environ={}))


def test_the_fake_driver_fetches_only_when_told_where_from(tmp_path) -> None:
    driver = FakeDriver()
    assert make_image_cache(settings_of(STATE_PATH=str(tmp_path)), driver) is None
    cache = make_image_cache(
        settings_of(STATE_PATH=str(tmp_path), GLANCE__API_SERVERS="http://api:8774/image"),
        driver,
    )
    assert cache is not None and cache.directory == (tmp_path / "_base").resolve()
    assert cache.downloads.servers == ["http://api:8774/image"]
    cache.close()
