"""``cloudseed server ssh SERVER`` (issue 20) against a real QEMU guest: a server created
through the compute API with the metadata item cloudseed:ssh_forward=true, built by a compute
agent running the qemu driver (the dummy guest of tests/support/dummy_guest.py), and the CLI on
the same databases printing the command that reaches its forward; the line stays the same
across a hard reboot, and a server without a forward gets a one-line error."""

from __future__ import annotations

import dataclasses
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from sqlalchemy import delete
from sqlalchemy.orm import Session

from cloudseed.agent.worker import Agent
from cloudseed.cells.service import CellDatabases
from cloudseed.cli import cli
from cloudseed.compute.qemu import QemuDriver
from cloudseed.db.engines import Database
from cloudseed.flavors import service as flavors
from cloudseed.hosts.models import ComputeNode, Service
from cloudseed.images import service as images
from cloudseed.images.cache import ImageCache
from cloudseed.images.download import ImageDownloader
from cloudseed.settings import Settings
from tests.support.cloud import mv
from tests.support.dummy_guest import write_kernel
from tests.support.ports import free_port_range
from tests.support.qemu import ext4_image, settings_for

pytestmark = pytest.mark.skipif(
    shutil.which("qemu-system-x86_64") is None or shutil.which("qemu-img") is None,
    reason="needs qemu-system-x86_64 and qemu-img (Debian: qemu-system-x86, qemu-utils)",
)
ADMIN = {"X-Auth-Token": "admin:proj"}
HOST = "ssh-host"


@dataclasses.dataclass
class Setup:
    agent: Agent
    image_id: str
    ports: range
    cli_env: dict[str, str]


@pytest.fixture()
def setup(
    api: httpx.Client,
    api_url: str,
    api_db: Database,
    cell_db: Database,
    migrated_settings: Settings,
    tmp_path: Path,
) -> Iterator[Setup]:
    (tmp_path / "base").mkdir()
    disk = ext4_image(tmp_path / "base" / "disk.raw")
    kernel = write_kernel(tmp_path / "base" / "kernel.bin")

    def work(session: Session) -> str:
        flavors.add_flavor(session, name="ssh.tiny", flavorid="ssh1", vcpus=1, ram=64, disk=1)
        image = images.add_bootable(
            session,
            name="dummy",
            path=disk,
            disk_format="raw",
            properties={"os_admin_user": "debian"},
            kernel=kernel,
        )
        return image.uuid

    image_id = api_db.run(work, write=True)
    ports = free_port_range()
    driver = QemuDriver(
        settings_for(
            tmp_path / "state", CLOUDSEED_QEMU__SSH_FORWARD_PORTS=f"{ports[0]}-{ports[-1]}"
        )
    )
    cells = CellDatabases(api_db)
    cache = ImageCache(tmp_path / "state" / "_base", ImageDownloader(servers=[f"{api_url}/image"]))
    agent = Agent(migrated_settings, host=HOST, cells=cells, driver=driver, image_cache=cache)
    agent.register()
    url = migrated_settings.api_database_url
    env = {
        "CLOUDSEED_API_DATABASE__CONNECTION": url,
        "CLOUDSEED_DATABASE__CONNECTION": migrated_settings.cell_database_url,
        "CLOUDSEED_STATE_PATH": str(tmp_path / "cli-state"),
    }
    try:
        yield Setup(agent=agent, image_id=image_id, ports=ports, cli_env=env)
    finally:
        driver.close()
        cache.close()
        cells.dispose()

        # services and compute_nodes outlive a test (KEPT_TABLES): a host left here would be
        # listed, and scheduled to, by every later test of this worker.
        def forget_host(session: Session) -> None:
            session.execute(delete(ComputeNode).where(ComputeNode.host == HOST))
            session.execute(delete(Service).where(Service.host == HOST))

        cell_db.run(forget_host, write=True)


def create(api: httpx.Client, setup: Setup, name: str, metadata: dict[str, str]) -> str:
    body = {
        "name": name,
        "imageRef": setup.image_id,
        "flavorRef": "ssh1",
        "networks": "none",
        "host": HOST,
        "metadata": metadata,
    }
    r = api.post("/v2.1/servers", json={"server": body}, headers={**ADMIN, **mv("2.74")})
    assert r.status_code == 202, r.text
    server_id: str = r.json()["server"]["id"]
    return server_id


def action(api: httpx.Client, setup: Setup, server_id: str, body: dict[str, object]) -> None:
    r = api.post(f"/v2.1/servers/{server_id}/action", json=body, headers=ADMIN)
    assert r.status_code == 202, r.text
    assert setup.agent.run_once() == 1


def status(api: httpx.Client, server_id: str) -> str:
    r = api.get(f"/v2.1/servers/{server_id}", headers=ADMIN)
    value: str = r.json()["server"]["status"]
    return value


def server_ssh(setup: Setup, ref: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["server", "ssh", ref], env=setup.cli_env)
    return result.exit_code, result.output


def accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        return False
    return True


def test_server_ssh_prints_the_command_for_the_forward(api: httpx.Client, setup: Setup) -> None:
    opted = create(api, setup, "web-1", {"cloudseed:ssh_forward": "true"})
    plain = create(api, setup, "db-1", {})
    assert setup.agent.run_once() == 2
    assert status(api, opted) == status(api, plain) == "ACTIVE"
    port = setup.ports[0]
    expected = f"ssh -p {port} debian@127.0.0.1\n"
    assert server_ssh(setup, opted) == (0, expected)
    assert server_ssh(setup, "web-1") == (0, expected)  # by its unique name
    assert accepts(port)

    action(api, setup, opted, {"reboot": {"type": "HARD"}})
    assert server_ssh(setup, opted) == (0, expected) and accepts(port)

    code, out = server_ssh(setup, plain)
    assert code == 1 and len(out.splitlines()) == 1, out
    assert f"Server {plain} has no SSH forward: it did not opt in" in out

    action(api, setup, opted, {"os-stop": None})
    code, out = server_ssh(setup, opted)
    assert code == 1 and "it is not running (vm_state stopped)" in out, out
    assert not accepts(port)
    action(api, setup, opted, {"os-start": None})
    assert server_ssh(setup, opted) == (0, expected)

    code, out = server_ssh(setup, "no-such-server")
    assert code == 1 and "could not be found" in out
    twin = create(api, setup, "db-1", {})
    setup.agent.run_once()
    code, out = server_ssh(setup, "db-1")
    assert code == 1 and "More than one server is named 'db-1'" in out and twin in out, out
    for server_id in (opted, plain, twin):
        assert api.delete(f"/v2.1/servers/{server_id}", headers=ADMIN).status_code == 204
    setup.agent.run_once()
    assert not accepts(port)
