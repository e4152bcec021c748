"""The real `cloudseed serve` process busy with the largest create a request may ask for
(issue 13: `max_count: 1000000000` ran for 30 s, grew memory ~18 MB/s and survived SIGTERM)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from tests.functional.test_cli_and_db import free_port, run


def _serve(tmp_path: Path, **options: str) -> tuple[subprocess.Popen[bytes], str, Path]:
    d = ["--data-dir", str(tmp_path)]
    assert run(*d, "db", "sync")[0] == 0
    raw = tmp_path / "disk.raw"
    raw.write_bytes(b"\0" * 1024)
    assert run(*d, "image", "add", "cirros", "--file", str(raw), "--disk-format", "raw")[0] == 0
    flavor = ("flavor", "add", "m1.tiny", "--vcpus", "1", "--ram", "512", "--disk", "1")
    assert run(*d, *flavor)[0] == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDSEED_")}
    env.update(options)
    port = free_port()
    log_path = tmp_path / "serve.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cloudseed", *d, "serve", "--api-listen", f"127.0.0.1:{port}"],
            stdout=log,
            stderr=log,
            env=env,
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return proc, base, log_path
        except httpx.TransportError:
            pass
        assert proc.poll() is None, log_path.read_text()
        assert time.monotonic() < deadline, log_path.read_text()
        time.sleep(0.1)


def _create(base: str, **fields: Any) -> httpx.Response:
    with httpx.Client(base_url=base, headers={"X-Auth-Token": "alice:proj"}, timeout=60) as c:
        image = c.get("/image/v2/images").json()["images"][0]["id"]
        flavor = c.get("/v2.1/flavors").json()["flavors"][0]["id"]
        body = {"name": "vm", "imageRef": image, "flavorRef": flavor, "networks": "none", **fields}
        return c.post(
            "/v2.1/servers",
            json={"server": body},
            headers={"OpenStack-API-Version": "compute 2.90"},
        )


def test_a_billion_is_refused_at_once(tmp_path: Path) -> None:
    proc, base, log_path = _serve(tmp_path)
    try:
        started = time.monotonic()
        r = _create(base, max_count=1000000000)
        assert time.monotonic() - started < 2
        assert r.status_code == 400, r.text
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0, log_path.read_text()


def test_sigterm_during_the_largest_create(tmp_path: Path) -> None:
    """With the quota unlimited, max_count 500 (the per-request bound) is the most work one
    request can ask for. SIGTERM in the middle of it lets that request and the builds it queued
    finish (their number is what the bound bounds), then the process stops: no instance is left
    in BUILD with nothing working on it."""
    proc, base, log_path = _serve(
        tmp_path,
        CLOUDSEED_QUOTA__INSTANCES="-1",
        CLOUDSEED_QUOTA__CORES="-1",
        CLOUDSEED_QUOTA__RAM="-1",
    )
    answers: list[httpx.Response | Exception] = []

    def create() -> None:
        try:
            answers.append(_create(base, max_count=500))
        except Exception as exc:  # the connection may be closed by the stopping server
            answers.append(exc)

    thread = threading.Thread(target=create)
    try:
        thread.start()
        time.sleep(0.5)  # the request is being served
    finally:
        proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        try:
            code = proc.wait(timeout=40)
        finally:
            if proc.poll() is None:
                proc.kill()
    stopped = time.monotonic()
    thread.join(timeout=30)
    assert code == 0, log_path.read_text()
    # The request was being served (it is answered, or cut off by the stop), not refused.
    assert answers and not (isinstance(answers[0], httpx.Response) and answers[0].is_error)
    # Within uvicorn's graceful timeout, with every build the request queued finished.
    assert stopped - started < 30, log_path.read_text()
    with sqlite3.connect(tmp_path / "cloudseed_cell1.sqlite") as db:
        states = dict(db.execute("SELECT vm_state, count(*) FROM instances GROUP BY vm_state"))
        busy = db.execute("SELECT count(*) FROM instances WHERE task_state IS NOT NULL").fetchone()
    assert busy == (0,) and set(states) <= {"active"}, states
    if isinstance(answers[0], httpx.Response):
        assert states == {"active": 500}, states
