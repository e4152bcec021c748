"""``openstack server wait --ready`` (readiness, 2.110) and ``openstack server set
--metadata-option`` (2.109), cloudseed-osc's, with the real python-openstackclient from PyPI
against a running cloudseed. The venv is tests/support/osc_plugin.py's, as for
tests/compat/test_osc_plugin.py; SQLite only, as there. The commands run in one interpreter
(tests/support/osc_batch.py): one start-up of the CLI for all of them.

The guests' boots are recorded as the metadata service records cloud-init's events
(``servers/readiness/store.py``); the HTTP side of that is tests/functional/test_boot_reports.py's.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session

from cloudseed.cells.service import CellDatabases
from cloudseed.db.base import utcnow
from cloudseed.db.engines import Database
from cloudseed.servers.readiness import store
from cloudseed.servers.readiness.events import parse_event
from tests.support import osc_plugin
from tests.support.cloud import Cloud, create_server, mv, wait_for
from tests.support.osc import RecordingProxy
from tests.support.osc_cli import Cli
from tests.support.osc_plugin import OSC_VERSION, sqlite_only

pytestmark = pytest.mark.compat

BATCH = Path(__file__).parents[1] / "support" / "osc_batch.py"


@pytest.fixture(scope="session")
def openstack() -> Path:
    """OSC with cloudseed-osc installed (overrides conftest.py's stock OSC)."""
    return osc_plugin.openstack_or_skip()


def report(api_db: Database, server_id: str, *results: tuple[str, str]) -> None:
    """cloud-init's finish events ``(name, result)`` of ``server_id``, taken in order."""
    t = time.time()
    cells = CellDatabases(api_db)
    try:

        def work(session: Session) -> None:
            for i, (name, result) in enumerate(results):
                body: dict[str, object] = {"name": name, "event_type": "finish"}
                body |= {"origin": "cloudinit", "timestamp": t + i, "result": result}
                event = parse_event(json.dumps(body).encode())
                assert store.record_event(session, server_id, event, utcnow()) == "accepted"

        cells.for_instance(server_id).run(work, write=True)
    finally:
        cells.dispose()


def batch(cli: Cli, tmp_path: Path, *commands: list[str]) -> list[dict[str, Any]]:
    listed = tmp_path / "commands.json"
    listed.write_text(json.dumps(list(commands)))
    results: list[dict[str, Any]] = json.loads(cli.python(BATCH, str(listed)).stdout)
    for result in results:
        assert "Traceback" not in result["stdout"] + result["stderr"], result
    return results


@sqlite_only
def test_server_wait_ready_and_metadata_options(
    cli: Cli,
    proxy: RecordingProxy,
    api: httpx.Client,
    api_db: Database,
    cloud: Cloud,
    tmp_path: Path,
) -> None:
    ids = {}
    for name in ("vm-done", "vm-failed", "vm-pending"):
        ids[name] = create_server(api, cloud, version=OSC_VERSION, name=name)["id"]
        wait_for(api, ids[name], "ACTIVE")
    report(api_db, ids["vm-done"], ("modules-config", "SUCCESS"), ("modules-final", "SUCCESS"))
    report(api_db, ids["vm-failed"], ("modules-config/config-runcmd", "FAIL"))
    set_options = ["server", "set", "--metadata-option", "http_tokens=required"]
    results = batch(
        cli,
        tmp_path,
        ["help", "server", "wait"],
        ["server", "wait", "--ready", "vm-done"],
        ["server", "wait", "--ready", "vm-failed"],
        ["server", "wait", "--ready", "--timeout", "0.5", "--interval", "0.1", "vm-pending"],
        ["server", "wait", "vm-done"],
        [*set_options, "--metadata-option", "http_put_response_hop_limit=2", "vm-done"],
        ["server", "set", "--metadata-option", "bogus=1", "vm-done"],
        ["server", "set", "--metadata-option", "http_tokens=sometimes", "vm-done"],
        ["help", "server", "set"],
    )
    usage, done, failed, pending, unsaid, options, bogus, refused, set_help = results
    assert "--ready" in usage["stdout"] and "--timeout <seconds>" in usage["stdout"]
    assert (done["code"], done["stdout"]) == (0, f"Server {ids['vm-done']} is ready.\n")
    assert failed["code"] == 1 and "module 'runcmd' failed" in failed["stderr"]
    assert pending["code"] == 1 and "its boot is pending" in pending["stderr"]
    assert unsaid["code"] == 1 and "--ready" in unsaid["stderr"]
    assert options["code"] == 0, options
    assert bogus["code"] == 1 and "KEY one of http_endpoint" in bogus["stderr"]
    assert refused["code"] == 1 and "HTTP 400" in refused["stderr"]
    assert "--metadata-option <key=value>" in set_help["stdout"]
    puts = [e for e in proxy.requests if e.method == "PUT"]
    wanted = {"http_tokens": "required", "http_put_response_hop_limit": 2}
    assert [(json.loads(e.body), e.microversion, e.status) for e in puts] == [
        ({"server": {"metadata_options": wanted}}, "2.109", 200),
        ({"server": {"metadata_options": {"http_tokens": "sometimes"}}}, "2.109", 400),
    ]
    server = api.get(f"/v2.1/servers/{ids['vm-done']}", headers=mv("2.110")).json()["server"]
    assert server["metadata_options"]["http_tokens"] == "required"
    assert server["metadata_options"]["http_put_response_hop_limit"] == 2
    assert server["bootstrap_status"]["status"] == "done"
