"""``cloudseed serve`` as a newcomer starts it: a port that is taken or out of range is one
line naming the listener and its address (exit status 1, no traceback), and a serve that
starts logs uvicorn's start and stop lines once, though it runs one uvicorn server per
listener. Real processes on SQLite."""

from __future__ import annotations

import signal
import socket
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import command as cloudseed
from tests.support.cli import synced
from tests.support.ports import free_port
from tests.support.waiting import wait_until

LIFECYCLE = (
    "Started server process",
    "Waiting for application startup.",
    "Application startup complete.",
    "Shutting down",
    "Application shutdown complete.",
    "Finished server process",
)


@pytest.fixture()
def data_dir(tmp_path: Path) -> Path:
    return synced(tmp_path)


def test_a_port_in_use_is_one_line_naming_the_listener(data_dir: Path) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        done = subprocess.run(
            cloudseed(
                data_dir,
                "serve",
                "--api-listen",
                f"127.0.0.1:{port}",
                "--metadata-listen",
                f"127.0.0.1:{free_port()}",
            ),
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        taken.close()
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"Error: the compute API cannot listen on 127.0.0.1:{port}: Address already in use"
    )


def test_a_port_out_of_range_is_one_line(data_dir: Path) -> None:
    done = subprocess.run(
        cloudseed(data_dir, "serve", "--metadata-listen", "127.0.0.1:99999"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "metadata_listen_port" in done.stderr and "must be at most 65535" in done.stderr


def test_start_and_stop_are_logged_once(data_dir: Path) -> None:
    log = data_dir / "serve.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            cloudseed(
                data_dir,
                "serve",
                "--api-listen",
                "127.0.0.1:0",
                "--metadata-listen",
                "127.0.0.1:0",
            ),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_until(
                lambda: "started (driver fake)" in log.read_text(),
                timeout=60,
                what="serve started",
            )
        finally:
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=60) == 0
    text = log.read_text()
    for line in LIFECYCLE:
        assert text.count(line) == 1, (line, text)
