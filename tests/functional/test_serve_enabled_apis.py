"""``[DEFAULT] enabled_apis`` (``serve --enabled-apis``, Nova's option): a serve runs only the
APIs named, so an operator can run the metadata service in processes of its own beside a
serve of the compute API and its agent. Real processes on SQLite, real sockets."""

from __future__ import annotations

import signal
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from cloudseed.signing import sign
from tests.support.cli import command as cloudseed
from tests.support.cli import synced
from tests.support.cluster import create, registered, running_cluster, status_is, wait
from tests.support.ports import free_port
from tests.support.waiting import wait_until

AGENT_STARTED = "started (driver fake)"


@pytest.fixture()
def data_dir(tmp_path: Path) -> Path:
    return synced(tmp_path)


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def serving(data_dir: Path, apis: str, api_port: int, md_port: int) -> Iterator[Path]:
    """``cloudseed serve --enabled-apis apis`` until the block ends; yields its log."""
    log = data_dir / f"serve-{apis}.log"
    command = cloudseed(
        data_dir,
        "serve",
        "--enabled-apis",
        apis,
        "--api-listen",
        f"127.0.0.1:{api_port}",
        "--metadata-listen",
        f"127.0.0.1:{md_port}",
    )
    with log.open("w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until(
            lambda: "Application startup complete" in log.read_text(),
            timeout=60,
            what="serve started",
        )
        yield log
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0, log.read_text()


def test_the_metadata_service_alone_runs_no_api_and_no_agent(data_dir: Path) -> None:
    api_port, md_port = free_port(), free_port()
    with serving(data_dir, "metadata", api_port, md_port) as log:
        assert httpx.get(f"http://127.0.0.1:{md_port}/", timeout=10).status_code == 200
        assert not listening(api_port)
        text = log.read_text()
    assert "metadata service listening" in text
    assert "compute API listening" not in text
    assert AGENT_STARTED not in text  # the agent runs beside the compute API only


def test_the_compute_api_alone_runs_its_agent_and_no_metadata(data_dir: Path) -> None:
    api_port, md_port = free_port(), free_port()
    with serving(data_dir, "osapi_compute", api_port, md_port) as log:
        assert httpx.get(f"http://127.0.0.1:{api_port}/healthz", timeout=10).status_code == 200
        assert not listening(md_port)
        wait_until(lambda: AGENT_STARTED in log.read_text(), timeout=60, what="the agent")
    assert "metadata service listening" not in log.read_text()


def test_a_metadata_serve_apart_serves_what_the_api_node_made(tmp_path: Path) -> None:
    """The split an operator makes: a server created through the API node and built by an
    agent is read by its guest from a serve of the metadata service alone, which shares
    nothing with them but the database."""
    secret = "proxy-secret"
    with running_cluster(
        "sqlite",
        tmp_path,
        CLOUDSEED_NEUTRON__SERVICE_METADATA_PROXY="true",
        CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET=secret,
    ) as cluster:
        cluster.start_agent("h1")
        wait(lambda: registered(cluster, "h1"), 60, cluster, "h1 registered")
        server_id = create(cluster, "h1")
        wait(status_is(cluster, server_id, "ACTIVE"), 60, cluster, "the server ACTIVE")
        md_port = free_port()
        cluster.start(
            "metadata",
            "serve",
            "--enabled-apis",
            "metadata",
            "--metadata-listen",
            f"127.0.0.1:{md_port}",
        )
        guest = {
            "X-Instance-ID": server_id,
            "X-Tenant-ID": "proj",
            "X-Instance-ID-Signature": sign(secret, server_id),
        }
        url = f"http://127.0.0.1:{md_port}/openstack/latest/meta_data.json"

        def answered() -> httpx.Response | None:
            try:
                return httpx.get(url, headers=guest, timeout=5)
            except httpx.TransportError:
                return None

        answer = wait(answered, 60, cluster, "the metadata serve answering")
        assert answer.status_code == 200, answer.text
        assert answer.json()["uuid"] == server_id
        log = (tmp_path / "metadata.log").read_text()
        assert AGENT_STARTED not in log and "compute API listening" not in log


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("metadata,ec2", "invalid item 'ec2' in [DEFAULT] enabled_apis"),
        ("", "[DEFAULT] enabled_apis is empty"),
    ],
)
def test_a_wrong_list_is_one_line(data_dir: Path, value: str, says: str) -> None:
    done = subprocess.run(
        cloudseed(data_dir, "serve", "--enabled-apis", value),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert says in done.stderr
