"""Settings: precedence, Nova's INI layout, and clear failures."""

from __future__ import annotations

from pathlib import Path

import pytest
from tools import options_table

from cloudseed.errors import ConfigError
from cloudseed.settings import all_options, load_settings, split_list

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cloudseed.conf"
    path.write_text(text)
    return path


def test_defaults_match_nova():
    s = load_settings(environ={})
    assert s.api.auth_strategy == "noauth2"
    assert s.api.max_limit == 1000
    assert s.quota.key_pairs == 100
    assert s.default.osapi_compute_listen_port == 8774
    assert s.default.metadata_listen_port == 8775
    assert s.oslo_middleware.max_request_body_size == 114688
    assert s.api_database_url == "sqlite:///var/cloudseed_api.sqlite"


def test_precedence_defaults_file_env_flags(tmp_path):
    conf = write(
        tmp_path, "[api]\nmax_limit = 10\n[quota]\nkey_pairs = 5\n[DEFAULT]\nstate_path = /srv/a\n"
    )
    s = load_settings(config_file=conf, environ={})
    assert (s.api.max_limit, s.quota.key_pairs, s.default.state_path) == (10, 5, "/srv/a")
    s = load_settings(
        config_file=conf,
        environ={"CLOUDSEED_API__MAX_LIMIT": "20", "CLOUDSEED_STATE_PATH": "/srv/b"},
    )
    assert (s.api.max_limit, s.quota.key_pairs, s.default.state_path) == (20, 5, "/srv/b")
    s = load_settings(
        config_file=conf,
        environ={"CLOUDSEED_API__MAX_LIMIT": "20"},
        overrides={("api", "max_limit"): 30, ("quota", "key_pairs"): None},
    )
    assert (s.api.max_limit, s.quota.key_pairs) == (30, 5)


def test_config_file_from_environment(tmp_path):
    conf = write(tmp_path, "[quota]\nkey_pairs = -1\n")
    assert load_settings(environ={"CLOUDSEED_CONFIG": str(conf)}).quota.key_pairs == -1


def test_unknown_options_are_reported_not_fatal(tmp_path):
    conf = write(
        tmp_path,
        "[api]\nmax_limit = 10\nuse_forwarded_for = true\n"
        "[glance]\nenable_rbd_download = true\n"
        "[keystone_authtoken]\nauth_url = http://k\n",
    )
    s = load_settings(
        config_file=conf, environ={"CLOUDSEED_BOGUS": "1", "CLOUDSEED_TEST_ANYTHING": "x"}
    )
    assert any("[api] use_forwarded_for" in w for w in s.warnings)
    assert any("[glance] enable_rbd_download" in w for w in s.warnings)
    assert any("CLOUDSEED_BOGUS" in w for w in s.warnings)
    assert not any("TEST_ANYTHING" in w for w in s.warnings)
    assert s.passthrough["keystone_authtoken"] == {"auth_url": "http://k"}


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("[api]\nmax_limit = lots\n", "invalid value 'lots' for [api] max_limit"),
        ("[api]\nauth_strategy = magic\n", "must be one of noauth2, keystone"),
        ("[quota]\nkey_pairs = -2\n", "must be at least -1"),
        ("[quota]\nrecheck_quota = maybe\n", "expected true or false"),
        ("not an ini file\n", "is not a valid INI file"),
        ("[glance]\napi_servers = api:8774\n", "invalid item 'api:8774' in [glance] api_servers"),
        ("[image_cache]\nsubdirectory_name = a/b\n", "[image_cache] subdirectory_name"),
    ],
)
def test_invalid_values_stop_with_a_clear_message(tmp_path, text, fragment):
    with pytest.raises(ConfigError) as info:
        load_settings(config_file=write(tmp_path, text), environ={})
    assert fragment in info.value.message


def test_invalid_environment_value_names_its_origin():
    with pytest.raises(ConfigError) as info:
        load_settings(environ={"CLOUDSEED_QUOTA__KEY_PAIRS": "ten"})
    assert "environment variable CLOUDSEED_QUOTA__KEY_PAIRS" in info.value.message


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_settings(config_file=tmp_path / "nope.conf", environ={})
    assert "cannot read config file" in info.value.message


def test_percent_signs_are_literal(tmp_path):
    conf = write(tmp_path, "[api_database]\nconnection = postgresql://u:p%40ss@h/db\n")
    assert load_settings(config_file=conf, environ={}).api_database.connection.endswith(
        "p%40ss@h/db"
    )


def test_every_option_is_documented():
    doc = (ROOT / "docs" / "configuration.md").read_text()
    missing = [
        f"[{o.section}] {o.name}"
        for o in all_options()
        if f"`{o.name}`" not in doc or f"`{o.env_var}`" not in doc
    ]
    assert missing == []


def test_the_options_section_is_what_the_registry_makes():
    """docs/configuration.md's options tables are generated (``make docs``): a hand edit inside
    them would be lost at the next regeneration, so the page must already be that output."""
    page = (ROOT / "docs" / "configuration.md").read_text()
    assert page == options_table.regenerated(page), "run `make docs`"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"CLOUDSEED_API__VENDORDATA_PROVIDERS": "StaticJSON,Dynamic"},
            "StaticJSON or DynamicJSON",
        ),
        ({"CLOUDSEED_API__VENDORDATA_DYNAMIC_TARGETS": "no-at-sign"}, "name@http"),
        ({"CLOUDSEED_API__VENDORDATA_DYNAMIC_TARGETS": "a@http://x,a@http://y"}, "is taken"),
        ({"CLOUDSEED_API__VENDORDATA_DYNAMIC_TARGETS": "static@http://x"}, "is taken"),
        ({"CLOUDSEED_METADATA__TRUSTED_PROXIES": "10.0.0.1,proxy.example"}, "not an address"),
        ({"CLOUDSEED_LIBVIRT__INJECT_HANDLERS": "guestfs,magic"}, "must be guestfs"),
    ],
)
def test_list_options_are_checked_item_by_item(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(environ=env)


def test_list_options_accept_valid_items() -> None:
    settings = load_settings(
        environ={
            "CLOUDSEED_API__VENDORDATA_DYNAMIC_TARGETS": "cloud-init@http://h/x?a=b@c, t2@https://h",
            "CLOUDSEED_METADATA__TRUSTED_PROXIES": "10.0.0.1, 192.168.0.0/16, ::1",
        }
    )
    assert split_list(settings.api.vendordata_dynamic_targets) == [
        "cloud-init@http://h/x?a=b@c",
        "t2@https://h",
    ]
    assert split_list(settings.metadata.trusted_proxies) == ["10.0.0.1", "192.168.0.0/16", "::1"]
