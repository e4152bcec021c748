"""The soak's deployment as separate processes sharing one config file: an API node and a
metadata node (each ``cloudseed serve --no-compute --workers 2``), two compute agents
(``cloudseed compute --host soak-N``, fake driver); killed with SIGKILL and started again at
will, and each process's memory, descriptors and threads read from /proc.

``serve`` has no flag to run one listener only, so each node runs both: the API node's
metadata listener and the metadata node's API listener are bound to free ports nobody uses
(docs/deployment.md runs ``--no-compute`` nodes behind a load balancer that sends each port's
traffic where it belongs; here the soak's clients do that).

Each serve node has two workers, the parent restarts a worker that dies
(src/cloudseed/serve.py). Chaos kills only the second worker of a node and the second agent:
the first worker of each node and the first agent live the whole run, so that their memory is
measured from warm-up to the end (a process that is killed every few minutes never gets old
enough to leak measurably).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import httpx

PROJECT_ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")
HOSTS = ("soak-1", "soak-2")
KILLABLE_AGENT = "soak-2"


def config_text(
    *, api_url: str, cell_url: str, secret: str, lease_seconds: int, delay_ms: int
) -> str:
    """cloudseed.conf for every node (nova.conf's layout, docs/configuration.md)."""
    return f"""\
[DEFAULT]
log_level = warning
report_interval = 2
max_concurrent_builds = 10

[api_database]
connection = {api_url}

[database]
connection = {cell_url}

[neutron]
service_metadata_proxy = true
metadata_proxy_shared_secret = {secret}

[quota]
instances = -1
cores = -1
ram = -1

[compute]
lease_seconds = {lease_seconds}
# The fake driver's host would offer the machine's few CPUs: room for thousands of m1.tiny.
vcpus = 4096
memory_mb = 4194304
disk_gb = 16384

[fake_driver]
delay_ms = {delay_ms}
"""


@dataclass
class Usage:
    """One process at one moment, from /proc."""

    rss_kib: int
    fds: int
    sockets: int
    threads: int


def usage(pid: int) -> Usage | None:
    """None: the process is gone (or dead and not yet reaped)."""
    try:
        rss = threads = 0
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("State:") and line.split()[1] in ("Z", "X"):
                return None  # killed, not yet reaped: nothing left to measure
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
        fds = sockets = 0
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            fds += 1
            with contextlib.suppress(OSError):
                sockets += os.readlink(fd).startswith("socket:")
        return Usage(rss, fds, sockets, threads)
    except (OSError, ValueError):
        return None


def _tcp_sockets() -> dict[str, tuple[int, int, str]]:
    """Every TCP socket of the machine: ``socket:[inode]`` -> (local port, remote port, state)."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, remote = fields[1].rsplit(":", 1)[1], fields[2].rsplit(":", 1)[1]
                found[f"socket:[{fields[9]}]"] = (int(local, 16), int(remote, 16), fields[3])
    return found


def descriptor_kinds(pid: int, listen_ports: set[int], db_port: int) -> Counter[str]:
    """A process's descriptors by what they are: ``listening``, ``client`` (a connection to one
    of ``listen_ports``), ``database`` (a connection to ``db_port``), ``other socket`` (unix
    sockets, the metadata relay's ...) and ``file`` (files, pipes, eventfds, epoll)."""
    kinds: Counter[str] = Counter()
    tcp = _tcp_sockets()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if not target.startswith("socket:"):
                    kinds["file"] += 1
                elif target not in tcp:
                    kinds["other socket"] += 1
                else:
                    local, remote, state = tcp[target]
                    if state == "0A":
                        kinds["listening"] += 1
                    elif remote == db_port:
                        kinds["database"] += 1
                    elif local in listen_ports:
                        kinds["client"] += 1
                    else:
                        kinds["other socket"] += 1
    return kinds


@dataclass(frozen=True)
class Sample:
    at: float  # time.time()
    role: str
    pid: int
    usage: Usage


@dataclass
class Sampler:
    """Every process of the deployment read from /proc every ``interval`` seconds."""

    deployment: Deployment
    interval: float
    samples: list[Sample] = field(default_factory=list)

    def take(self) -> None:
        now = time.time()
        for role, pid in self.deployment.pids().items():
            found = usage(pid)
            if found is not None:
                self.samples.append(Sample(now, role, pid, found))

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval):
            self.take()


def children(pid: int) -> list[int]:
    with contextlib.suppress(OSError):
        return sorted(int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split())
    return []


@dataclass
class ServeNode:
    """One ``cloudseed serve --no-compute --workers 2``."""

    name: str
    process: subprocess.Popen[bytes]
    api_port: int
    metadata_port: int
    witness: int = 0  # the worker never killed (the first one)

    def workers(self) -> list[int]:
        return children(self.process.pid)

    def victim(self) -> int | None:
        """A worker chaos may kill: any but the witness."""
        others = [pid for pid in self.workers() if pid != self.witness]
        return others[0] if others else None


@dataclass
class Deployment:
    root: Path
    api_db_url: str
    cell_db_url: str
    secret: str
    lease_seconds: int
    delay_ms: int
    nodes: dict[str, ServeNode] = field(default_factory=dict)
    agents: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def config(self) -> Path:
        return self.root / "cloudseed.conf"

    def write_config(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.config.write_text(
            config_text(
                api_url=self.api_db_url,
                cell_url=self.cell_db_url,
                secret=self.secret,
                lease_seconds=self.lease_seconds,
                delay_ms=self.delay_ms,
            )
        )

    def env(self) -> dict[str, str]:
        environ = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDSEED_")}
        environ["CLOUDSEED_CONFIG"] = str(self.config)
        return environ

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "cloudseed", *args]

    def run(self, *args: str) -> str:
        """A one-off ``cloudseed`` command (db sync, flavor add ...) on the deployment."""
        done = subprocess.run(
            self.command(*args, "--data-dir", str(self.root / "operator")),
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            raise RuntimeError(f"cloudseed {' '.join(args)}: {done.stderr[-2000:]}")
        return done.stdout

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        data_dir = self.root / name
        data_dir.mkdir(exist_ok=True)
        with (self.root / f"{name}.log").open("ab") as log:
            return subprocess.Popen(
                self.command(*args, "--data-dir", str(data_dir)),
                stdout=log,
                stderr=log,
                env=self.env(),
                cwd=PROJECT_ROOT,
            )

    def start_node(self, name: str, api_port: int, metadata_port: int) -> ServeNode:
        process = self._spawn(
            name,
            "serve",
            "--no-compute",
            "--workers",
            "2",
            "--api-listen",
            f"127.0.0.1:{api_port}",
            "--metadata-listen",
            f"127.0.0.1:{metadata_port}",
        )
        node = ServeNode(name, process, api_port, metadata_port)
        self.nodes[name] = node
        base = f"http://127.0.0.1:{api_port if name == 'api' else metadata_port}"
        self._wait_answering(f"{base}/healthz" if name == "api" else f"{base}/", process, name)

        def both() -> list[int] | None:
            workers = node.workers()
            return workers if len(workers) == 2 else None

        node.witness = _wait_for(both, 60, f"{name}'s two workers")[0]
        return node

    def start_agent(self, host: str) -> subprocess.Popen[bytes]:
        process = self._spawn(f"agent-{host}", "compute", "--host", host)
        with self.lock:
            self.agents[host] = process
        return process

    def kill_agent(self, host: str) -> int:
        with self.lock:
            process = self.agents[host]
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        return process.pid

    def kill_worker(self, node_name: str) -> int | None:
        """SIGKILL a worker of the node (not its witness); its parent starts another."""
        pid = self.nodes[node_name].victim()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return pid

    def wait_workers(self, node_name: str, timeout: float = 60) -> None:
        node = self.nodes[node_name]
        _wait_for(lambda: len(node.workers()) == 2, timeout, f"{node_name}'s two workers")

    def pids(self) -> dict[str, int]:
        """Every process of the deployment by role (the killable ones under their role: a new
        process after a kill keeps the name)."""
        found: dict[str, int] = {}
        for name, node in self.nodes.items():
            found[f"{name} parent"] = node.process.pid
            for pid in node.workers():
                found[f"{name} worker {1 if pid == node.witness else 2}"] = pid
        with self.lock:
            for host, process in self.agents.items():
                if process.poll() is None:
                    found[f"agent {host}"] = process.pid
        return found

    def exited_agents(self) -> dict[str, int]:
        """Agents that exited on their own (chaos waits for the ones it kills)."""
        with self.lock:
            return {
                host: code
                for host, process in self.agents.items()
                if (code := process.poll()) is not None
            }

    def nodes_alive(self) -> dict[str, int | None]:
        return {name: node.process.poll() for name, node in self.nodes.items()}

    def stop(self) -> None:
        """SIGTERM to everything (the clean stop), SIGKILL to what is left after 40 s."""
        processes = [n.process for n in self.nodes.values()] + list(self.agents.values())
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 40
        for process in processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def log_tail(self, name: str, lines: int = 60) -> str:
        path = self.root / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def _wait_answering(self, url: str, process: subprocess.Popen[bytes], name: str) -> None:
        def answering() -> bool:
            if process.poll() is not None:
                raise RuntimeError(
                    f"{name} exited with {process.returncode}:\n{self.log_tail(name)}"
                )
            with contextlib.suppress(httpx.TransportError):
                return httpx.get(url, timeout=2).status_code < 500
            return False

        _wait_for(answering, 90, f"{name} answering")


def _wait_for(check: Callable[[], T | None], timeout: float, what: str) -> T:
    """``check()``'s first truthy result, polled every 50 ms."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:g} s")
        time.sleep(0.05)


def new_secret() -> str:
    return secrets.token_hex(16)
