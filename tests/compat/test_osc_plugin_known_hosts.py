"""``openstack server known-hosts`` (cloudseed-osc's own command) with the real
python-openstackclient from PyPI, against a running cloudseed and against a cloud without host
keys. The venv is tests/support/osc_plugin.py's, as for tests/compat/test_osc_plugin.py; SQLite
only, as there.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest
from sqlalchemy.orm import Session

from cloudseed.cells.service import CellDatabases
from cloudseed.db.engines import Database
from cloudseed.hostkeys import service
from cloudseed.hostkeys.key_lines import parse_host_key
from cloudseed.hostkeys.phone_home import parse_report
from tests.support import keys, osc, osc_plugin
from tests.support.cloud import Cloud, create_server, wait_for
from tests.support.osc_cli import TOKEN, Cli
from tests.support.osc_plugin import OSC_VERSION, no_traceback, sqlite_only

pytestmark = pytest.mark.compat


@pytest.fixture(scope="session")
def openstack() -> Path:
    """OSC with cloudseed-osc installed (overrides conftest.py's stock OSC)."""
    return osc_plugin.openstack_or_skip()


def report_keys(api_db: Database, server_id: str) -> list[str]:
    """Store a phone_home report for ``server_id`` as the metadata service would; the keys."""
    found = [keys.rsa_public(), keys.ecdsa_public(), keys.ed25519_public("root@vm1")]
    body = urlencode(
        {
            "pub_key_rsa": found[0],
            "pub_key_ecdsa": found[1],
            "pub_key_ed25519": found[2],
            "instance_id": server_id,
        }
    ).encode()
    report = parse_report(body, None, caller=server_id)
    cells = CellDatabases(api_db)
    try:

        def work(session: Session) -> None:
            assert service.record_phone_home(session, server_id, report) == "accepted"

        cells.for_instance(server_id).run(work, write=True)
    finally:
        cells.dispose()
    return [parse_host_key(line).key for line in found]


@sqlite_only
def test_server_known_hosts(
    cli: Cli,
    api: httpx.Client,
    api_db: Database,
    cloud: Cloud,
    tmp_path: Path,
) -> None:
    usage = cli("help", "server", "known-hosts").stdout
    assert "openstack server known-hosts [-h] [--host <host>] <server>" in usage
    assert "cloudseed-osc plugin" in usage
    server_id = create_server(api, cloud, version=OSC_VERSION, name="vm1")["id"]
    server = wait_for(api, server_id, "ACTIVE", version=OSC_VERSION)
    (port,) = server["addresses"]["private"]
    address = port["addr"]

    none_yet = cli("server", "known-hosts", "vm1", ok=False)
    assert "No host keys are recorded for server" in none_yet.stderr
    no_traceback(none_yet)

    expected = report_keys(api_db, server_id)
    out = cli("server", "known-hosts", "vm1", "--host", "[127.0.0.1]:10022").stdout
    assert out.splitlines() == [f"{address},[127.0.0.1]:10022 {key}" for key in expected]
    if shutil.which("ssh-keygen") is not None:
        known = tmp_path / "known_hosts"
        known.write_text(out)
        for host in (address, "[127.0.0.1]:10022"):
            found = subprocess.run(
                ["ssh-keygen", "-F", host, "-f", str(known)], capture_output=True, check=False
            )
            assert found.returncode == 0, host
    missing = cli("server", "known-hosts", "nope", ok=False)
    assert "No Server found for nope" in missing.stderr
    no_traceback(missing)


def test_a_cloud_without_host_keys(
    openstack: Path,
    identity: osc.IdentityStub,
    tmp_path: Path,
) -> None:
    with osc_plugin.older_compute(advertised="2.100", accepted="2.100") as compute:
        config = tmp_path / "osc"
        config.mkdir()
        env = osc.cloud_env(config, f"{compute.url}/v2.1", TOKEN, identity.url)
        cli = Cli(openstack, env, tmp_path)
        refused = cli("server", "known-hosts", osc_plugin.SERVER_ID, ok=False)
    assert "this cloud does not publish host keys" in refused.stderr, refused.stderr
    no_traceback(refused)
