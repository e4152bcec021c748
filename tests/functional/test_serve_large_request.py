"""The real `cloudseed serve` process busy with the largest create a request may ask for
(issue 13: `max_count: 1000000000` ran for 30 s, grew memory ~18 MB/s and survived SIGTERM)."""

from __future__ import annotations

import contextlib
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

from tests.support.cli import run
from tests.support.ports import free_port
from tests.support.waiting import wait_until


def _serve(
    tmp_path: Path, *, restart: bool = False, **options: str
) -> tuple[subprocess.Popen[bytes], str, Path]:
    d = ["--data-dir", str(tmp_path)]
    if not restart:
        assert run(*d, "db", "sync")[0] == 0
        raw = tmp_path / "disk.raw"
        raw.write_bytes(b"\0" * 1024)
        add = ("image", "add", "cirros", "--file", str(raw), "--disk-format", "raw")
        assert run(*d, *add)[0] == 0
        flavor = ("flavor", "add", "m1.tiny", "--vcpus", "1", "--ram", "512", "--disk", "1")
        assert run(*d, *flavor)[0] == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDSEED_")}
    env.update(options)
    port = free_port()
    log_path = tmp_path / "serve.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "cloudseed", *d, "serve"),
                *("--api-listen", f"127.0.0.1:{port}"),
                # Port 0: the default 8775 may be held by anything else on the machine.
                *("--metadata-listen", "127.0.0.1:0"),
            ],
            stdout=log,
            stderr=log,
            env=env,
        )
    base = f"http://127.0.0.1:{port}"

    def answering() -> bool:
        assert proc.poll() is None, log_path.read_text()
        try:
            return httpx.get(f"{base}/healthz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(answering, timeout=30, interval=0.1, max_interval=0.1, what="serve answering")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{log_path.read_text()}") from None
    return proc, base, log_path


def _create(base: str, *, sent: threading.Event | None = None, **fields: Any) -> httpx.Response:
    """POST a create; ``sent`` is set once the whole request is on its way to the server."""

    def trace(event: str, _info: dict[str, Any]) -> None:
        if sent is not None and event == "http11.send_request_body.complete":
            sent.set()

    with httpx.Client(base_url=base, headers={"X-Auth-Token": "alice:proj"}, timeout=60) as c:
        image = c.get("/image/v2/images").json()["images"][0]["id"]
        flavor = c.get("/v2.1/flavors").json()["flavors"][0]["id"]
        body = {"name": "vm", "imageRef": image, "flavorRef": flavor, "networks": "none", **fields}
        return c.post(
            "/v2.1/servers",
            json={"server": body},
            headers={"OpenStack-API-Version": "compute 2.90"},
            extensions={"trace": trace},
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
    request can ask for. SIGTERM in the middle of it lets that request finish, then the process
    stops within the graceful timeout. The builds it queued are rows: those not done when the
    process stopped are finished by the next start (no instance is left in BUILD with nothing
    to work on it)."""
    proc, base, log_path = _serve(
        tmp_path,
        CLOUDSEED_QUOTA__INSTANCES="-1",
        CLOUDSEED_QUOTA__CORES="-1",
        CLOUDSEED_QUOTA__RAM="-1",
    )
    answers: list[httpx.Response | Exception] = []
    sent = threading.Event()

    def create() -> None:
        try:
            answers.append(_create(base, sent=sent, max_count=500))
        except Exception as exc:  # the connection may be closed by the stopping server
            answers.append(exc)

    thread = threading.Thread(target=create)
    try:
        thread.start()
        # The request is on the server's socket (an idle server reads it at once): the
        # server is serving it when SIGTERM comes, not refusing a new one.
        assert sent.wait(timeout=30), "the create was never sent"
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
    # Within the graceful timeouts (uvicorn's 30 s, the agent's 30 s for running builds).
    assert stopped - started < 40, log_path.read_text()

    def states() -> tuple[dict[str, int], int, int]:
        with sqlite3.connect(tmp_path / "cloudseed_cell1.sqlite") as db:
            by_state = dict(
                db.execute("SELECT vm_state, count(*) FROM instances GROUP BY vm_state")
            )
            busy = db.execute("SELECT count(*) FROM instances WHERE task_state IS NOT NULL")
            queued = db.execute("SELECT count(*) FROM operations WHERE state != 'done'")
            return by_state, busy.fetchone()[0], queued.fetchone()[0]

    by_state, busy, queued = states()
    # Every instance still building has its operation queued: nothing was lost.
    assert by_state.get("building", 0) == busy == queued, (by_state, busy, queued)
    proc, base, log_path = _serve(tmp_path, restart=True)
    try:
        current = states()

        def settled() -> bool:
            nonlocal current
            current = states()
            return not current[1]

        # Not asserted here: the check below says what was left, with the states.
        with contextlib.suppress(AssertionError):
            wait_until(settled, timeout=120, interval=0.5, max_interval=0.5)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    by_state, busy, queued = current
    assert (busy, queued) == (0, 0) and set(by_state) <= {"active"}, current
    if isinstance(answers[0], httpx.Response):
        assert by_state == {"active": 500}, by_state
