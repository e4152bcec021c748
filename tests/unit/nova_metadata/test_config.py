"""nova.conf as ``cloudseed nova-metadata`` reads it: Nova's option names, types and defaults,
several files (the later winning), ``$var`` interpolation, Nova's other options accepted
silently, and a one-line error (exit status 2) for anything it cannot use, before it starts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from cloudseed.cli import cli
from cloudseed.errors import ConfigError
from cloudseed.nova_metadata import config, options
from cloudseed.nova_metadata.databases import driver_url, format_cell_url

CHECKOUT = Path(__file__).resolve().parents[3]
MINIMAL = "[api_database]\nconnection = sqlite:////tmp/nova_api.sqlite\n"


def write(tmp_path: Path, text: str, name: str = "nova.conf") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_nova_defaults(tmp_path: Path) -> None:
    loaded = config.load([write(tmp_path, MINIMAL)])
    assert (loaded.listen_host, loaded.listen_port) == ("0.0.0.0", 8775)
    assert loaded.metadata_cache_expiration == 15
    assert loaded.local_metadata_per_cell is False
    assert loaded.database_url is None
    assert loaded.change_poll_interval == 0.5
    assert loaded.security_groups_ttl == 15.0
    settings = loaded.settings
    assert settings.api.dhcp_domain == "novalocal"
    assert settings.api.vendordata_providers == "StaticJSON"
    assert settings.neutron.service_metadata_proxy is False
    assert settings.neutron.metadata_proxy_shared_secret == ""
    assert settings.metadata.trusted_proxies == ""


def test_nova_options_carried_into_the_shared_settings(tmp_path: Path) -> None:
    loaded = config.load(
        [
            write(
                tmp_path,
                MINIMAL + "[DEFAULT]\nstate_path = /var/lib/nova\nmetadata_listen = 127.0.0.2\n"
                "metadata_listen_port = 9775\nmetadata_workers = 3\n"
                "[database]\nconnection = sqlite:///$state_path/nova.sqlite\n"
                "[api]\ndhcp_domain =\nvendordata_providers = StaticJSON,DynamicJSON\n"
                "vendordata_dynamic_targets = one@http://127.0.0.1:1/a\n"
                "metadata_cache_expiration = 0\nlocal_metadata_per_cell = true\n"
                "[neutron]\nservice_metadata_proxy = True\n"
                "metadata_proxy_shared_secret = s3cret\n"
                "[vendordata_dynamic_auth]\nauth_type = password\npassword = pw\n"
                "[oslo_middleware]\nenable_proxy_headers_parsing = true\n"
                "[cloudseed_metadata]\ntrusted_proxies = 192.0.2.0/24\ncache_size = 10\n",
            )
        ]
    )
    assert (loaded.listen_host, loaded.listen_port, loaded.workers) == ("127.0.0.2", 9775, 3)
    assert loaded.database_url == "sqlite:////var/lib/nova/nova.sqlite"  # $state_path
    assert loaded.local_metadata_per_cell is True
    assert loaded.security_groups_ttl == 0.0
    settings = loaded.settings
    assert settings.api.dhcp_domain == ""
    assert settings.api.vendordata_providers == "StaticJSON,DynamicJSON"
    assert settings.api.vendordata_dynamic_targets == "one@http://127.0.0.1:1/a"
    assert settings.neutron.service_metadata_proxy is True
    assert settings.neutron.metadata_proxy_shared_secret == "s3cret"
    assert "s3cret" not in repr(settings)
    assert settings.metadata.trusted_proxies == "192.0.2.0/24"
    assert settings.metadata.cache_size == 10
    assert settings.passthrough["vendordata_dynamic_auth"]["auth_type"] == "password"
    assert "pw" not in repr(settings.passthrough)


def test_later_files_win_and_the_command_line_wins_over_both(tmp_path: Path) -> None:
    first = write(tmp_path, MINIMAL + "[api]\ndhcp_domain = one\n", "a.conf")
    second = write(
        tmp_path, "[api]\ndhcp_domain = two\n[DEFAULT]\nmetadata_workers = 2\n", "b.conf"
    )
    loaded = config.load([first, second], listen=("::1", 1234), workers=5)
    assert loaded.settings.api.dhcp_domain == "two"
    assert (loaded.listen_host, loaded.listen_port, loaded.workers) == ("::1", 1234, 5)
    assert loaded.files == (first, second)


def test_nova_options_the_drop_in_does_not_use_are_accepted(tmp_path: Path) -> None:
    text = MINIMAL + (
        "[DEFAULT]\ndebug = true\ntransport_url = rabbit://u:p@h:5672/\nuse_forwarded_for = x\n"
        "[libvirt]\nvirt_type = kvm\n[keystone_authtoken]\nwww_authenticate_uri = x\n"
        "[api]\nauth_strategy = keystone\nmax_limit = nonsense\n"
    )
    config.load([write(tmp_path, text)])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[api]\nmetadata_cache_expiration = -1\n",
            r"invalid value for \[api\] metadata_cache_expiration in .*nova\.conf: "
            r"Should be greater than or equal to 0",
        ),
        (
            "[neutron]\nservice_metadata_proxy = maybe\n",
            r"invalid value for \[neutron\] service_metadata_proxy in .*: Unexpected boolean",
        ),
        (
            "[api]\nvendordata_providers = StaticJSON,Bogus\n",
            r"invalid value for \[api\] vendordata_providers .*found 'Bogus'",
        ),
        (
            "[DEFAULT]\nmetadata_listen_port = 99999\n",
            r"invalid value for \[DEFAULT\] metadata_listen_port",
        ),
        (
            "[cloudseed_metadata]\ncache_sise = 10\n",
            r"unknown option \[cloudseed_metadata\] cache_sise in .*nova\.conf",
        ),
        ("[api]\ndhcp_domain = $nowhere\n", r"cannot read \[api\] dhcp_domain"),
    ],
)
def test_unreadable_values_stop_the_start(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        config.load([write(tmp_path, MINIMAL + text)])
    assert "\n" not in caught.value.message


def test_files_that_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read config file .*missing\.conf"):
        config.load([str(tmp_path / "missing.conf")])
    broken = write(tmp_path, "[api\ndhcp_domain = x\n")
    with pytest.raises(ConfigError, match=r"config file .*nova\.conf is not valid"):
        config.load([broken])
    with pytest.raises(ConfigError, match=r"\[api_database\] connection is not set"):
        config.load([write(tmp_path, "[api]\ndhcp_domain = x\n", "b.conf")])


def test_the_command_says_it_in_one_line_and_exits_2(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + "[api]\nmetadata_cache_expiration = soon\n")
    result = CliRunner().invoke(cli, ["nova-metadata", "--config-file", path])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert "invalid value for [api] metadata_cache_expiration" in result.output
    missing = CliRunner().invoke(cli, ["nova-metadata"])
    assert missing.exit_code == 2
    assert "--config-file" in missing.output


def test_cell_templates_are_filled_as_nova_fills_them() -> None:
    default = "mysql+pymysql://nova:s3cret@db.example:3307/nova?charset=utf8#frag"
    assert (
        format_cell_url("{scheme}://{username}:{password}@{hostname}:{port}/cell1?{query}", default)
        == "mysql+pymysql://nova:s3cret@db.example:3307/cell1?charset=utf8"
    )
    assert format_cell_url("{scheme}://{hostname}/{path}#{fragment}", default) == (
        "mysql+pymysql://db.example/nova#frag"
    )
    # A part the default lacks is None, as in Nova; no default, or no template: as written.
    assert (
        format_cell_url("{scheme}://{hostname}:{port}/c", "sqlite:///x") == "sqlite://None:None/c"
    )
    assert format_cell_url("{scheme}://h/c", None) == "{scheme}://h/c"
    assert format_cell_url("sqlite:///c.db", default) == "sqlite:///c.db"


def test_drivers_of_nova_urls_are_the_ones_here() -> None:
    assert driver_url("postgresql://n:p@h/nova").drivername == "postgresql+psycopg"
    assert driver_url("postgresql+psycopg2://n:p@h/nova").drivername == "postgresql+psycopg"
    mysql = driver_url("mysql://n:p@h/nova?charset=utf8&plugin=dbcounter")
    assert mysql.drivername == "mysql+pymysql"
    assert dict(mysql.query) == {"charset": "utf8"}
    assert driver_url("mysql+pymysql://n:p@h/nova").query["charset"] == "utf8mb4"
    with pytest.raises(ConfigError, match="unsupported database 'oracle'") as caught:
        driver_url("oracle://n:secretpw@h/nova")
    assert "secretpw" not in caught.value.message


def test_every_option_of_ours_is_documented() -> None:
    page = (CHECKOUT / "docs" / "nova-dropin.md").read_text()
    documented = set(re.findall(r"^\| `(\w+)` \|", page, flags=re.MULTILINE))
    assert documented == {name for name, _help in options.our_options()}


def test_signed_identity_is_off_without_a_connection(tmp_path: Path) -> None:
    loaded = config.load([write(tmp_path, MINIMAL)])
    assert loaded.identity_database_url is None
    assert loaded.settings.identity.issuer == ""


def test_signed_identity_options_become_the_identity_settings(tmp_path: Path) -> None:
    loaded = config.load(
        [
            write(
                tmp_path,
                MINIMAL + "[cloudseed_metadata]\n"
                "connection = postgresql://cs:pw@db.example/cloudseed\n"
                "identity_issuer = https://meta.example:8775\nidentity_region = north\n"
                "identity_token_ttl_seconds = 300\nidentity_key_grace_seconds = 3600\n"
                "identity_key_cache_seconds = 30\nidentity_key_encryption_secret = hush\n",
            )
        ],
        listen=("0.0.0.0", 9999),
    )
    assert loaded.identity_database_url == "postgresql://cs:pw@db.example/cloudseed"
    assert "pw@" not in repr(loaded)
    identity = loaded.settings.identity
    assert (identity.issuer, identity.region) == ("https://meta.example:8775", "north")
    assert (identity.token_ttl_seconds, identity.key_grace_seconds) == (300, 3600)
    assert identity.key_cache_seconds == 30
    assert identity.key_encryption_secret == "hush"
    assert "hush" not in repr(loaded.settings)


def test_the_default_issuer_is_where_the_listener_is_reached(tmp_path: Path) -> None:
    conf = write(tmp_path, MINIMAL + "[cloudseed_metadata]\nconnection = sqlite:////tmp/cs\n")
    assert config.load([conf], listen=("192.0.2.5", 8775)).settings.identity.issuer == (
        "http://192.0.2.5:8775"
    )
    assert config.load([conf], listen=("::1", 80)).settings.identity.issuer == "http://[::1]:80"
    wildcard = config.load([conf]).settings.identity.issuer
    assert wildcard.startswith("http://") and wildcard.endswith(":8775")
    assert "0.0.0.0" not in wildcard


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (
            "identity_token_ttl_seconds = 600\nidentity_key_grace_seconds = 600\n",
            "invalid value 600 for [cloudseed_metadata] identity_key_grace_seconds: must be at "
            "least identity_token_ttl_seconds + 2 * identity_key_cache_seconds (620)",
        ),
        ("connection = sqlite:////tmp/nova_api.sqlite\n", "must be a database of its own"),
        ("identity_token_ttl_seconds = 5\n", "identity_token_ttl_seconds"),
    ],
)
def test_bad_identity_options_stop_the_start(tmp_path: Path, section: str, message: str) -> None:
    conf = write(tmp_path, MINIMAL + "[cloudseed_metadata]\n" + section)
    with pytest.raises(ConfigError, match=re.escape(message)):
        config.load([conf])


def test_the_subcommands_need_the_connection(tmp_path: Path) -> None:
    conf = write(tmp_path, MINIMAL)
    for args in (["db", "sync"], ["identity", "list"], ["identity", "jwks"]):
        result = CliRunner().invoke(cli, ["nova-metadata", "--config-file", conf, *args])
        assert result.exit_code == 2, result.output
        assert "[cloudseed_metadata] connection is not set" in result.output


@pytest.mark.parametrize(
    ("written", "rendered"),
    [
        (None, True),  # Nova's default: $pybasedir/nova/virt/interfaces.template
        ("/opt/nova/lib/python3.12/site-packages/nova/virt/interfaces.template", True),
        ("", False),  # Nova: no template, no network_config
        ("/etc/nova/my-interfaces.template", False),  # the operator's own: not rendered
    ],
)
def test_which_injected_network_template_is_rendered(
    tmp_path: Path, written: str | None, rendered: bool
) -> None:
    option = "" if written is None else f"[DEFAULT]\ninjected_network_template = {written}\n"
    loaded = config.load([write(tmp_path, MINIMAL + option)])
    assert loaded.network_template is rendered
