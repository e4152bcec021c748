"""The host key console fallback of the compute agent (``hostkeys/watch.py``) and ``cloudseed
known-hosts``, on every database backend, with the helpers of tests/support/host_keys.py:
a console is whatever text the test hands the watch, as the driver's ``console_output`` would.
"""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from sqlalchemy import func, select

from cloudseed.cells.service import CellDatabases
from cloudseed.cli import cli
from cloudseed.db.engines import Database
from cloudseed.hostkeys.models import HostKeyReport
from cloudseed.hostkeys.watch import ConsoleWatch
from cloudseed.servers import records
from cloudseed.servers.models import Instance
from cloudseed.servers.system_metadata import SSH_FORWARD
from cloudseed.settings import Settings
from tests.support.cloud import Cloud
from tests.support.guests import boot
from tests.support.host_keys import canonical, cloud_init_form, host_key_set, post, rows, shown

pytestmark = [pytest.mark.databases, pytest.mark.loopback_guests]


# -- the console fallback ----------------------------------------------------------------------


def console_text(found: dict[str, str]) -> str:
    lines = "".join(f"{line.strip()}\r\n" for line in found.values())
    return (
        "[   12.345678] random: crng init done\r\n"
        f"-----BEGIN SSH HOST KEY KEYS-----\r\n{lines}-----END SSH HOST KEY KEYS-----\r\n"
        "[   13.000000] cloud-init[512]: Cloud-init v. 22.4.2 finished\r\n"
    )


def test_the_console_fallback(
    request: pytest.FixtureRequest,
    api: httpx.Client,
    cloud: Cloud,
    metadata_url: str,
    api_db: Database,
    cell_db: Database,
) -> None:
    fresh, rebuilt, phoned = boot(api, cloud), boot(api, cloud), boot(api, cloud)
    with cell_db.read() as session:
        host = session.scalar(select(Instance.host).where(Instance.uuid == fresh.id))
    assert host is not None
    consoles: dict[str, str] = {fresh.id: "", rebuilt.id: "", phoned.id: ""}
    cells = CellDatabases(api_db)
    request.addfinalizer(cells.dispose)
    watch = ConsoleWatch(cells, host=host, console_output=consoles.__getitem__)
    old, new, mine, fresh_keys = host_key_set(), host_key_set(), host_key_set(), host_key_set()
    # The rebuilt server's log still shows its previous disk's block at the first look.
    consoles[rebuilt.id] = console_text(old)
    with phoned.client(metadata_url) as md:
        assert post(md, cloud_init_form(phoned.id, mine)).status_code == 200
    consoles[phoned.id] = console_text(old)
    assert watch.run_once() == 0
    assert rows(cell_db, fresh.id) == []  # nothing seen, nothing written
    assert rows(cell_db, rebuilt.id) == [("console", "baseline")]
    assert watch.run_once() == 0  # the same old block again: still nothing
    # The guests print their blocks.
    consoles[fresh.id] = console_text(fresh_keys)
    consoles[rebuilt.id] += "boot again\r\n" + console_text(new)
    assert watch.run_once() == 2
    assert watch.run_once() == 0  # reported: no longer watched
    for guest, found in ((fresh, fresh_keys), (rebuilt, new), (phoned, mine)):
        entries = shown(api, guest.id)
        assert [e["key"] for e in entries] == canonical(found)
    assert {e["source"] for e in shown(api, fresh.id)} == {"console"}
    assert {e["source"] for e in shown(api, phoned.id)} == {"phone_home"}
    assert rows(cell_db, phoned.id) == [("phone_home", "accepted")]
    # A phone_home report after the console's takes precedence.
    with fresh.client(metadata_url) as md:
        assert post(md, cloud_init_form(fresh.id, mine)).text == "accepted\n"
    assert [e["key"] for e in shown(api, fresh.id)] == canonical(mine)
    assert {e["source"] for e in shown(api, fresh.id)} == {"phone_home"}


def test_a_console_watch_starting_late_takes_nothing_rather_than_something_wrong(
    request: pytest.FixtureRequest,
    api: httpx.Client,
    cloud: Cloud,
    api_db: Database,
    cell_db: Database,
) -> None:
    guest = boot(api, cloud)
    with cell_db.read() as session:
        host = session.scalar(select(Instance.host).where(Instance.uuid == guest.id))
    assert host is not None
    text = {"now": console_text(host_key_set())}
    cells = CellDatabases(api_db)
    request.addfinalizer(cells.dispose)
    late = ConsoleWatch(cells, host=host, console_output=lambda _uuid: text["now"])
    assert late.run_once() == 0  # the block is already there: it may be the old disk's
    assert late.run_once() == 0
    assert shown(api, guest.id) == []
    # Launched too long ago: not looked at.
    old = ConsoleWatch(cells, host=host, console_output=lambda _u: "", window=dt.timedelta(0))
    text["now"] += console_text(host_key_set())
    assert old.run_once() == 0
    with cell_db.read() as session:
        assert session.scalar(select(func.count(HostKeyReport.id))) == 1


# -- cloudseed known-hosts ------------------------------------------------------------------


def test_known_hosts_cli_lines_work_with_ssh_keygen(
    api: httpx.Client,
    cloud: Cloud,
    metadata_url: str,
    migrated_settings: Settings,
    cell_db: Database,
    tmp_path: Path,
) -> None:
    guest = boot(api, cloud)
    env = {
        "CLOUDSEED_API_DATABASE__CONNECTION": migrated_settings.api_database_url,
        "CLOUDSEED_DATABASE__CONNECTION": migrated_settings.cell_database_url,
        "CLOUDSEED_STATE_PATH": str(tmp_path / "cli-state"),
    }
    runner = CliRunner()
    result = runner.invoke(cli, ["known-hosts", guest.id], env=env)
    assert result.exit_code == 1 and "No host keys are recorded" in result.output
    found = host_key_set()
    with guest.client(metadata_url) as md:
        assert post(md, cloud_init_form(guest.id, found)).status_code == 200
    cell_db.run(
        lambda session: records.set_system_metadata(
            session, guest.id, SSH_FORWARD, "127.0.0.1:10022"
        ),
        write=True,
    )
    result = runner.invoke(cli, ["known-hosts", "vm", "--host", "vm.example"], env=env)
    assert result.exit_code == 0, result.output
    names = f"{guest.address},[127.0.0.1]:10022,vm.example"
    assert result.output.splitlines() == [f"{names} {key}" for key in canonical(found)]
    assert runner.invoke(cli, ["known-hosts", "nope"], env=env).exit_code == 1
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is not installed (Debian: openssh-client)")
    known = tmp_path / "known_hosts"
    known.write_text(result.output)
    for host in (guest.address, "[127.0.0.1]:10022", "vm.example"):
        lookup = subprocess.run(
            ["ssh-keygen", "-F", host, "-f", str(known)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert lookup.returncode == 0, (host, lookup.stdout, lookup.stderr)
        matches = [line for line in lookup.stdout.splitlines() if not line.startswith("#")]
        assert sorted(line.split(" ", 1)[1] for line in matches) == sorted(canonical(found))
    assert (
        subprocess.run(
            ["ssh-keygen", "-F", "127.0.0.1", "-f", str(known)], capture_output=True, check=False
        ).returncode
        == 1
    )  # port 22 of the forward's address is another host
