"""Secrets (the proxy's shared secret, the token key, database and Keystone passwords, admin
passwords) are used, but never shown: not in a repr, not in a log line, not in an error message.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from cloudseed.cli import cli
from cloudseed.compute.interfaces import GuestSpec
from cloudseed.configdrive.service import BuiltDrive
from cloudseed.db.engines import Database, make_engine
from cloudseed.errors import ConfigError
from cloudseed.injection import InjectionOptions, InjectionRequest, inject
from cloudseed.settings import Secret, load_settings
from cloudseed.signing import sign
from tests.support import databases
from tests.support.guest_images import ext4_image, guest_tree

PROXY_SECRET = "proxy-secret-4e1f"
TOKEN_SECRET = "token-secret-9a0c"
DB_PASSWORD = "db-password-77b2"
KEYSTONE_PASSWORD = "keystone-password-31d5"
SERVICE_PASSWORD = "service-password-c8e0"
MEMCACHE_KEY = "memcache-key-0f3b"
ADMIN_PASSWORD = "admin-password-5d6a"
ALL = (
    PROXY_SECRET,
    TOKEN_SECRET,
    DB_PASSWORD,
    KEYSTONE_PASSWORD,
    SERVICE_PASSWORD,
    MEMCACHE_KEY,
    ADMIN_PASSWORD,
)


def write_config(path: Path, *, db_url: str | None = None) -> Path:
    db_url = db_url or f"postgresql://cloudseed:{DB_PASSWORD}@127.0.0.1:1/cloudseed"
    path.write_text(
        f"""
[api_database]
connection = {db_url}
[database]
connection = {db_url}
[neutron]
service_metadata_proxy = true
metadata_proxy_shared_secret = {PROXY_SECRET}
[metadata]
token_secret = {TOKEN_SECRET}
[keystone_authtoken]
auth_url = http://keystone.example:5000
username = nova
password = {KEYSTONE_PASSWORD}
memcache_secret_key = {MEMCACHE_KEY}
[vendordata_dynamic_auth]
auth_type = password
password = {SERVICE_PASSWORD}
"""
    )
    return path


def assert_hidden(text: str) -> None:
    for secret in ALL:
        assert secret not in text


def test_settings_repr_masks_every_secret_but_the_values_work(tmp_path):
    settings = load_settings(config_file=write_config(tmp_path / "c.conf"), environ={})
    shown = repr(settings)
    assert_hidden(shown)
    assert "Secret('**********')" in shown
    assert "http://keystone.example:5000" in shown  # what is not secret stays readable
    # The values themselves are untouched strings for everyone who uses them.
    assert settings.neutron.metadata_proxy_shared_secret == PROXY_SECRET
    assert isinstance(settings.neutron.metadata_proxy_shared_secret, Secret)
    assert sign(settings.neutron.metadata_proxy_shared_secret, "u") == sign(PROXY_SECRET, "u")
    assert settings.passthrough["keystone_authtoken"]["password"] == KEYSTONE_PASSWORD
    assert f"{settings.metadata.token_secret}" == TOKEN_SECRET
    assert_hidden(repr(settings.passthrough))


def test_secrets_from_the_environment_are_masked_too():
    settings = load_settings(
        environ={"CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET": PROXY_SECRET}
    )
    assert_hidden(repr(settings))


def test_repr_of_guest_injection_request_and_built_drive():
    guest = GuestSpec(
        uuid="u",
        name="n",
        hostname="h",
        image_ref="i",
        flavor=None,
        key_data=None,
        user_data=None,
        config_drive=False,
        admin_password=ADMIN_PASSWORD,
    )
    request = InjectionRequest(admin_password=ADMIN_PASSWORD)
    drive = BuiltDrive(path="/d", format="iso9660", admin_pass=ADMIN_PASSWORD, files=())
    for thing in (guest, request, drive):
        assert ADMIN_PASSWORD not in repr(thing)
        assert ADMIN_PASSWORD not in str(thing)


class TestErrorMessages:
    def test_unparsable_database_url(self):
        with pytest.raises(ConfigError) as caught:
            make_engine(f"postgresql://cloudseed:{DB_PASSWORD}@[::1/x")
        assert DB_PASSWORD not in caught.value.message

    @pytest.mark.parametrize(
        "url",
        [
            f"oracle://cloudseed:{DB_PASSWORD}@db.example/x",
            f"mysql+nosuchdriver://cloudseed:{DB_PASSWORD}@db.example/x",
        ],
    )
    def test_unusable_database_url(self, url):
        with pytest.raises(ConfigError) as caught:
            make_engine(url)
        assert DB_PASSWORD not in caught.value.message
        assert "cloudseed:***@db.example" in caught.value.message

    def test_database_repr(self):
        db = Database.connect("api", f"postgresql://cloudseed:{DB_PASSWORD}@127.0.0.1:1/x")
        try:
            assert DB_PASSWORD not in repr(db)
        finally:
            db.dispose()

    def test_cli_with_an_unreachable_database(self, tmp_path):
        conf = write_config(tmp_path / "c.conf")
        result = CliRunner().invoke(cli, ["keypair", "list", "--user", "u", "--config", str(conf)])
        assert result.exit_code == 1
        assert "cannot reach a database" in result.output
        assert_hidden(result.output)


def test_no_secret_in_the_logs(tmp_path, caplog):
    """One run through everything that handles a secret, with every logger at DEBUG."""
    caplog.set_level(logging.DEBUG)
    postgres = databases.ADMIN_URLS["postgresql"]
    with_password = postgres.replace("postgres@", f"postgres:{DB_PASSWORD}@", 1)
    settings = load_settings(
        config_file=write_config(tmp_path / "c.conf", db_url=with_password), environ={}
    )
    logging.getLogger("cloudseed").debug("settings: %r", settings)
    try:
        db = Database.connect("api", settings.api_database_url)
        try:
            with db.read() as session:
                assert session.scalar(text("SELECT 1")) == 1
        finally:
            db.dispose()
    except Exception as exc:  # no PostgreSQL here: the rest still runs
        if databases.required():
            raise
        logging.getLogger("test").info("PostgreSQL not used: %s", type(exc).__name__)

    if shutil.which("debugfs", path="/usr/sbin:/usr/bin:/sbin:/bin") and shutil.which(
        "openssl", path="/usr/bin:/bin"
    ):
        image = ext4_image(guest_tree(tmp_path / "tree"), tmp_path / "disk.raw")
        request = InjectionRequest(admin_password=ADMIN_PASSWORD)
        logging.getLogger("cloudseed").debug("request: %r", request)
        report = inject(
            image,
            "raw",
            request,
            options=InjectionOptions(partition=0, inject_password=True, handlers=("debugfs",)),
        )
        assert report.written
    assert caplog.records
    assert_hidden(caplog.text)
