"""A running ``cloudseed serve`` behind the simulated Neutron metadata proxy: started on free
ports with the storm's settings, its worker processes (from /proc), the errors its log holds."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import storm_identity
from storm_host import free_port, venv_tool


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    api: str
    metadata_port: int
    data_dir: Path
    log_path: Path  # what it printed (a serve of the compute API alone has a log of its own)

    def worker_pids(self) -> list[int]:
        """The serve parent's children: the worker processes."""
        pid = self.process.pid
        children = Path(f"/proc/{pid}/task/{pid}/children")
        with contextlib.suppress(OSError):
            return sorted(int(p) for p in children.read_text().split())
        return sorted(p for p in _all_pids() if _parent_of(p) == pid)


def _all_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _parent_of(pid: int) -> int | None:
    with contextlib.suppress(OSError, IndexError, ValueError):
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return None


def wait_until_answering(url: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise RuntimeError(
                f"server exited with {process.returncode}:\n{log_path.read_text(errors='replace')}"
            )
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url, timeout=1).status_code == 200:
                return
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"{url} did not answer in 60 s:\n{log_path.read_text(errors='replace')}"
            )
        time.sleep(0.05)


def stop(process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """SIGTERM (the service's clean shutdown), then SIGKILL after ``timeout`` seconds."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def code_from(src: Path | None) -> Iterator[None]:
    """``cloudseed`` commands started inside run ``src``'s code (another checkout's src/, the
    "before" of a comparison); None: this run's own (the PYTHONPATH it was given, else what the
    venv imports)."""
    if src is None:
        yield
        return
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(src)
    try:
        yield
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved


def at_niceness(nice: int) -> Callable[[], None] | None:
    """A Popen ``preexec_fn`` that starts the child at CPU niceness ``nice`` (None for 0)."""
    if not nice:
        return None

    def lower_priority() -> None:
        os.nice(nice)

    return lower_priority


@contextlib.contextmanager
def running_server(
    data_dir: Path,
    workers: int,
    *,
    compute: bool = True,
    load_ahead_seconds: int | None = None,
    apis: str = "osapi_compute,metadata",
    nice: int = 0,
) -> Iterator[Server]:
    """``cloudseed serve``; ``compute=False``: without the compute agent (``--no-compute``),
    for runs that only read, where queued operations would compete for the CPUs;
    ``load_ahead_seconds``: ``[metadata] load_ahead_seconds`` (None: its default); ``apis``:
    ``--enabled-apis`` (the other API's port is reserved and not served); ``nice``: its CPU
    niceness (the operator's ``Nice=``)."""
    api_port, metadata_port = free_port(), free_port()
    env = {
        **os.environ,
        **(
            {"CLOUDSEED_METADATA__LOAD_AHEAD_SECONDS": str(load_ahead_seconds)}
            if load_ahead_seconds is not None
            else {}
        ),
        "CLOUDSEED_NEUTRON__SERVICE_METADATA_PROXY": "true",
        "CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET": storm_identity.SECRET,
        "CLOUDSEED_LOG_LEVEL": "warning",
        "CLOUDSEED_FAKE_DRIVER__DELAY_MS": "0",
        # 10,000 guests in one project: no instance quota (batches stay under
        # [api] max_count_per_request).
        "CLOUDSEED_QUOTA__INSTANCES": "-1",
        "CLOUDSEED_QUOTA__CORES": "-1",
        "CLOUDSEED_QUOTA__RAM": "-1",
        # ... on one fake host (1,000 vCPUs, 800,000 MB): at Nova's default ratios (4.0 CPU,
        # 1.0 RAM) it holds 1,561 guests of 512 MB, and later batches are "No valid host".
        "CLOUDSEED_INITIAL_CPU_ALLOCATION_RATIO": "16",
        "CLOUDSEED_INITIAL_RAM_ALLOCATION_RATIO": "16",
    }
    command = [
        venv_tool("cloudseed", "run with the project's venv python"),
        "--data-dir",
        str(data_dir),
        "serve",
        "--api-listen",
        f"127.0.0.1:{api_port}",
        "--metadata-listen",
        f"127.0.0.1:{metadata_port}",
        "--workers",
        str(workers),
        "--enabled-apis",
        apis,
        *([] if compute else ["--no-compute"]),
    ]
    log_path = data_dir / ("server.log" if "metadata" in apis else "api-server.log")
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=at_niceness(nice),
        )
    server = Server(process, f"http://127.0.0.1:{api_port}", metadata_port, data_dir, log_path)
    try:
        if "osapi_compute" in apis:
            wait_until_answering(f"{server.api}/healthz", process, log_path)
        if "metadata" in apis:
            # "/" is the one metadata path answered without knowing the caller.
            wait_until_answering(f"http://127.0.0.1:{metadata_port}/", process, log_path)
        while workers > 1 and len(server.worker_pids()) < workers:  # 1: serve itself serves
            time.sleep(0.05)
        yield server
    finally:
        stop(process)
        log_text = log_path.read_text(errors="replace")
        if process.returncode != 0:
            print(
                f"--- server log (exit {process.returncode}) ---\n{log_text[-20000:]}",
                file=sys.stderr,
            )
        elif "Traceback" in log_text:
            print(
                f"  the server logged {log_text.count('Traceback')} tracebacks: "
                f"{'; '.join(errors_in_log(server))}",
                file=sys.stderr,
            )


@contextlib.contextmanager
def standalone_agent(
    data_dir: Path, *, host: str | None = "storm-agent", nice: int = 0
) -> Iterator[subprocess.Popen[bytes]]:
    """``cloudseed compute`` beside a ``serve --no-compute`` on the same state: of ``host``
    (None: the one serve's embedded agent takes, so that a later serve's agent can delete what
    it built), at CPU niceness ``nice`` (the operator's ``Nice=`` in the agent's unit)."""
    env = {
        **os.environ,
        "CLOUDSEED_LOG_LEVEL": "warning",
        "CLOUDSEED_FAKE_DRIVER__DELAY_MS": "0",
        "CLOUDSEED_INITIAL_CPU_ALLOCATION_RATIO": "16",
        "CLOUDSEED_INITIAL_RAM_ALLOCATION_RATIO": "16",
    }
    command = [venv_tool("cloudseed", "the project's venv"), "--data-dir", str(data_dir)]
    command += ["compute", *(["--host", host] if host else [])]
    log = (data_dir / "agent.log").open("wb")
    process = subprocess.Popen(
        command,
        stdout=log,
        stderr=log,
        env=env,
        preexec_fn=at_niceness(nice),
    )
    try:
        yield process
    finally:
        process.send_signal(signal.SIGCONT)
        stop(process)
        log.close()


def pause(agent: subprocess.Popen[bytes], data: Path) -> None:
    """SIGSTOP the agent outside its write transactions: stopped inside one it would hold
    SQLite's write lock, and every create would wait for it (and fail: "database is locked")."""
    databases = sorted(data.rglob("*.sqlite"))
    for _ in range(200):
        agent.send_signal(signal.SIGSTOP)
        if all(_writable(path) for path in databases):
            return
        agent.send_signal(signal.SIGCONT)
        time.sleep(0.05)
    raise RuntimeError("the agent always held a write lock")


def _writable(path: Path) -> bool:
    connection = sqlite3.connect(path, timeout=0)
    try:
        connection.execute("BEGIN IMMEDIATE")
        connection.rollback()
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        connection.close()


@contextlib.contextmanager
def paused(agent: subprocess.Popen[bytes], data: Path) -> Iterator[None]:
    """The agent stopped (``pause``) for the block, then let go on."""
    pause(agent, data)
    try:
        yield
    finally:
        agent.send_signal(signal.SIGCONT)


def errors_in_log(server: Server) -> list[str]:
    """The distinct exception messages in the server's log (what refused a request)."""
    text = server.log_path.read_text(errors="replace")
    found = re.findall(r"^\w+(?:\.\w+)*(?:Error|Exception): (.+)$", text, re.MULTILINE)
    # "(sqlite3.IntegrityError) X" wraps "X": one message, not two.
    return list(dict.fromkeys(re.sub(r"^\(\S+\) ", "", m).strip() for m in found))
