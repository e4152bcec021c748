"""Metadata service boot storm: N guests running cloud-init's crawl at once, against cloudseed
and, side by side, against nginx serving the same bytes as static files.

One run, on one machine, load generator included:

1. set-up: a fresh SQLite state directory (``cloudseed db sync``), a flavor, an image, a /16
   network and a key pair; ``cloudseed serve --workers 2`` behind a simulated Neutron metadata
   proxy (``[neutron] service_metadata_proxy``: every request names its instance in signed
   ``X-Instance-ID`` headers); ``--instances`` servers created through the compute API
   (multi-create, each with a key, ~300 bytes of cloud-config user data and server metadata),
   timed until all are ACTIVE;
2. the crawl: cloud-init's OpenStack datasource request sequence (reference ``cloud-init.md``
   1.2: ``/openstack`` twice, the five documents of the version it picks, then the EC2 tree
   ``/latest/meta-data/`` crawled recursively by cloud-init's own rules), found by crawling
   one guest with httpx;
3. the storm, with ``wrk`` and ``bench/metadata_storm_wrk.lua``: first one pass over every
   (instance, path) with empty caches (the real boot storm: each worker loads each instance
   from the database on its first request), then a timed pass with everything cached;
   memory (the workers' VmRSS) before and after every instance is cached;
4. nginx (``worker_processes 2``, unprivileged, foreground) serving every guest's documents,
   fetched once from cloudseed, as static files, under the same wrk settings: the ceiling;
5. change visibility: user data changed through the API (2.105), then polled on connections
   known (from /proc) to belong to each worker, until every worker serves the new value;
6. a py-spy profile of one worker during another warm pass, summarised by own time.

Usage (from the repository root, with the project's venv; needs Debian's ``wrk`` and
``nginx-light`` or ``nginx``, and ``py-spy`` from PyPI in the venv)::

    .venv/bin/python bench/metadata_storm.py [--instances 10000] [--duration 20]
        [--connections 256] [--threads 2] [--workers 2] [--write docs/benchmarks.md]

``--write`` replaces the section between ``<!-- bench:metadata-storm:start -->`` and
``<!-- bench:metadata-storm:end -->`` of the Markdown file, adding it when absent.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import dataclasses
import datetime as dt
import hashlib
import hmac
import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from report import cpu_model, write_section

BENCH_DIR = Path(__file__).resolve().parent
WRK_SCRIPT = BENCH_DIR / "metadata_storm_wrk.lua"
MARKERS = ("<!-- bench:metadata-storm:start -->", "<!-- bench:metadata-storm:end -->")
INTRO = """# Benchmarks

Measured numbers for cloudseed; each section says the command that reproduces it (run from the
repository root after `make test-venv`). Numbers from different machines are not comparable.
"""
PROJECT = "bench"
AUTH = {"X-Auth-Token": f"bench:{PROJECT}"}
SECRET = "storm-" + uuid.uuid4().hex
NO_COMPUTE = {True: " --no-compute", False: ""}  # the measured server's flag
# cloud-init's openstack.OS_VERSIONS (22.4 and HEAD): it reads the newest of these that
# /openstack lists, whatever newer versions the server also lists.
CLOUD_INIT_OS_VERSIONS = (
    "2012-08-10",
    "2013-04-04",
    "2013-10-17",
    "2015-10-15",
    "2016-06-30",
    "2016-10-06",
    "2017-02-22",
    "2018-08-27",
)
# A realistic first-boot cloud-config, about 300 bytes.
USER_DATA = b"""#cloud-config
hostname: web
package_update: true
packages: [nginx, jq, chrony]
users:
  - name: deploy
    groups: [sudo]
    shell: /bin/bash
    sudo: "ALL=(ALL) NOPASSWD:ALL"
write_files:
  - path: /etc/motd
    content: "Provisioned by cloudseed\\n"
runcmd:
  - [systemctl, enable, --now, nginx]
  - [sh, -c, "echo booted > /var/tmp/ready"]
"""
SERVER_METADATA = {"role": "web", "env": "bench", "owner": "storm"}
# Servers created beyond --instances, crawled before the memory baseline is taken: that pass
# sets up what serving 256 connections costs whatever the number of guests (buffers, pools,
# caches of compiled SQL), so the growth measured after it is the guests' alone.
PRIMING_INSTANCES = 200
# What cloud-init's OpenStack and EC2 datasources usually fetch in one boot (reference
# cloud-init.md: the OpenStack documents, then the EC2 tree's listing, key and user data; the
# list the Nova peer benchmark, ../shared/peers/nova_metadata_bench.py, uses too): the one-guest
# and side-by-side benchmarks cycle through it.
CLOUD_INIT_PATHS = [
    "/openstack",
    "/openstack/latest/meta_data.json",
    "/openstack/latest/user_data",
    "/openstack/latest/network_data.json",
    "/openstack/latest/vendor_data2.json",
    "/latest/meta-data/",
    "/latest/meta-data/public-keys/0/openssh-key",
    "/latest/user-data",
]
TARGETS = {
    "rps": 10_000,
    "p99_ms": 10.0,
    "kib_per_instance": 5.0,
    "visible_ms": 100.0,
    "nginx_ratio": 0.30,
}


# --- small helpers --------------------------------------------------------------------------------


def percentile(samples: list[float], pct: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


def step(message: str) -> Callable[[], float]:
    """Print what starts; the returned function prints and returns the seconds it took."""
    started = time.perf_counter()
    print(f"{message} ...", flush=True)

    def done() -> float:
        elapsed = time.perf_counter() - started
        print(f"  ({elapsed:.1f} s, load average {load_average()})", flush=True)
        return elapsed

    return done


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def sign(instance_id: str) -> str:
    """What the Neutron metadata proxy sends as X-Instance-ID-Signature."""
    return hmac.new(SECRET.encode(), instance_id.encode(), hashlib.sha256).hexdigest()


def proxy_headers(instance_id: str) -> dict[str, str]:
    return {
        "X-Instance-ID": instance_id,
        "X-Tenant-ID": PROJECT,
        "X-Instance-ID-Signature": sign(instance_id),
    }


def require_tool(name: str, debian_package: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if found is None:
        sys.exit(f"{name} is missing: apt-get install {debian_package}")
    return found


def venv_tool(name: str, hint: str) -> str:
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        sys.exit(f"{name} is missing: {hint}")
    return found


# --- the cloudseed server -------------------------------------------------------------------------


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    api: str
    metadata_port: int
    data_dir: Path

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


def cloudseed(data_dir: Path, *args: str) -> str:
    """Run one ``cloudseed`` administrative command; return its output."""
    command = [
        venv_tool("cloudseed", "run with the project's venv python"),
        "--data-dir",
        str(data_dir),
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(command)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout.strip()


@dataclass(frozen=True)
class Registries:
    image: str
    flavor: str
    network: str


ID = ("-f", "value", "-c", "id")  # what `cloudseed ... add` prints: the new id alone


def register(data_dir: Path) -> Registries:
    """A fresh database, and what servers are created from: a /16, so that 10,000 instances
    get distinct addresses."""
    cloudseed(data_dir, "db", "sync")
    disk = data_dir / "disk.raw"
    disk.write_bytes(b"\0" * 1024 * 1024)
    image = cloudseed(
        data_dir, "image", "add", "storm-image", "--file", str(disk), "--disk-format", "raw", *ID
    )
    flavor = cloudseed(
        data_dir, "flavor", "add", "storm.small", "--vcpus", "1", "--ram", "512", "--disk", "1", *ID
    )
    network = cloudseed(
        data_dir,
        "network",
        "add",
        "storm-net",
        "--cidr",
        "10.64.0.0/16",
        "--gateway",
        "10.64.0.1",
        "--dns",
        "10.64.0.2",
        *ID,
    )
    return Registries(image=image, flavor=flavor, network=network)


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


@contextlib.contextmanager
def running_server(data_dir: Path, workers: int, *, compute: bool = True) -> Iterator[Server]:
    """``cloudseed serve``; ``compute=False``: without the compute agent (``--no-compute``),
    for runs that only read, where queued operations would compete for the CPUs."""
    api_port, metadata_port = free_port(), free_port()
    env = {
        **os.environ,
        "CLOUDSEED_NEUTRON__SERVICE_METADATA_PROXY": "true",
        "CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET": SECRET,
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
        *([] if compute else ["--no-compute"]),
    ]
    log_path = data_dir / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    server = Server(process, f"http://127.0.0.1:{api_port}", metadata_port, data_dir)
    try:
        wait_until_answering(f"{server.api}/healthz", process, log_path)
        # "/" is the one metadata path answered without knowing the caller.
        wait_until_answering(f"http://127.0.0.1:{metadata_port}/", process, log_path)
        while len(server.worker_pids()) < workers:
            time.sleep(0.05)
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
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


def errors_in_log(server: Server) -> list[str]:
    """The distinct exception messages in the server's log (what refused a request)."""
    text = (server.data_dir / "server.log").read_text(errors="replace")
    found = re.findall(r"^\w+(?:\.\w+)*(?:Error|Exception): (.+)$", text, re.MULTILINE)
    # "(sqlite3.IntegrityError) X" wraps "X": one message, not two.
    return list(dict.fromkeys(re.sub(r"^\(\S+\) ", "", m).strip() for m in found))


# --- seeding --------------------------------------------------------------------------------------


def import_key_pair(api: httpx.Client) -> str:
    public = (
        ed25519.Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )
    response = api.post(
        "/v2.1/os-keypairs",
        headers={"OpenStack-API-Version": "compute 2.10"},
        json={"keypair": {"name": "storm-key", "public_key": f"{public} deploy@storm"}},
    )
    response.raise_for_status()
    return "storm-key"


CREATE_ATTEMPTS = 5


async def _create_batches(
    base: str, registries: Registries, key_name: str, total: int, batch: int, concurrency: int
) -> tuple[list[float], list[str]]:
    """POST multi-creates of ``batch`` servers from ``concurrency`` clients; return each
    batch's seconds, and the refusals that a retry of the same batch got past.

    A refused multi-create creates nothing, so the batch is simply posted again. (Seen: 500
    from a MAC address drawn twice; 24 random bits make that likely among 10,000 ports.)
    """
    refusals: list[str] = []
    batch_seconds: list[float] = []
    sizes = iter([min(batch, total - start) for start in range(0, total, batch)])
    body_template = {
        "name": "storm",
        "imageRef": registries.image,
        "flavorRef": registries.flavor,
        "networks": [{"uuid": registries.network}],
        "key_name": key_name,
        "user_data": base64.b64encode(USER_DATA).decode(),
        "metadata": SERVER_METADATA,
        "return_reservation_id": True,
    }

    async def client_loop(client: httpx.AsyncClient) -> None:
        for size in sizes:  # one shared iterator: each batch is created once
            body = {"server": {**body_template, "min_count": size, "max_count": size}}
            for _attempt in range(CREATE_ATTEMPTS):
                posted = time.perf_counter()
                response = await client.post("/v2.1/servers", json=body)
                if response.status_code == 202:
                    batch_seconds.append(time.perf_counter() - posted)
                    if len(batch_seconds) % 10 == 0:
                        print(
                            f"  {len(batch_seconds)} batches, the last in "
                            f"{batch_seconds[-1]:.1f} s",
                            flush=True,
                        )
                    break
                refusals.append(f"{response.status_code} {response.text[:200]}")
                print(f"  create refused, posting the batch again: {refusals[-1]}", flush=True)
            else:
                raise RuntimeError(f"create: {response.status_code} {response.text[:500]}")

    headers = {**AUTH, "OpenStack-API-Version": "compute 2.37"}
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                httpx.AsyncClient(base_url=base, headers=headers, timeout=600)
            )
            for _ in range(concurrency)
        ]
        await asyncio.gather(*(client_loop(c) for c in clients))
    return batch_seconds, refusals


def count_servers(api: httpx.Client, status: str) -> int:
    """How many servers have ``status`` (stops counting at one page)."""
    response = api.get("/v2.1/servers", params={"status": status, "limit": 1000})
    response.raise_for_status()
    return len(response.json()["servers"])


def wait_until_active(api: httpx.Client, total: int) -> None:
    deadline = time.monotonic() + 600
    while count_servers(api, "BUILD"):
        if time.monotonic() > deadline:
            raise RuntimeError("servers still building after 600 s")
        time.sleep(0.5)
    errors = count_servers(api, "ERROR")
    if errors:
        raise RuntimeError(f"{errors} servers went to ERROR")
    active = len(all_server_ids(api))
    if active != total:
        raise RuntimeError(f"{active} servers exist, expected {total}")


def all_server_ids(api: httpx.Client) -> list[str]:
    """Every server id, following ``servers_links``."""
    ids: list[str] = []
    params: dict[str, str] = {"limit": "1000"}
    while True:
        response = api.get("/v2.1/servers", params=params)
        response.raise_for_status()
        body = response.json()
        ids += [s["id"] for s in body["servers"]]
        if not body.get("servers_links") or not body["servers"]:
            return ids
        params = {"limit": "1000", "marker": ids[-1]}


@dataclass
class Seeding:
    instances: list[str]
    create_seconds: float
    active_seconds: float  # from the first POST until every server is ACTIVE
    batch_seconds: list[float]  # each multi-create's answer time, in order
    refusals: list[str]  # multi-creates refused, then retried
    causes: list[str] = field(default_factory=list)  # the server log's reasons for them


def seed(
    server: Server, registries: Registries, total: int, batch: int, concurrency: int
) -> Seeding:
    with httpx.Client(base_url=server.api, headers=AUTH, timeout=120) as api:
        key_name = import_key_pair(api)
        started = time.perf_counter()
        batch_seconds, refusals = asyncio.run(
            _create_batches(server.api, registries, key_name, total, batch, concurrency)
        )
        created = time.perf_counter() - started
        wait_until_active(api, total)
        active = time.perf_counter() - started
        return Seeding(sorted(all_server_ids(api)), created, active, batch_seconds, refusals)


# --- cloud-init's crawl ---------------------------------------------------------------------------


def newest_known_version(listing: str) -> str:
    """cloud-init's BaseReader._find_working_version()."""
    offered = {line.strip() for line in listing.splitlines() if line.strip()}
    known = [v for v in CLOUD_INIT_OS_VERSIONS if v in offered]
    return known[-1] if known else "latest"


def ec2_crawl(client: httpx.Client, directory: str) -> list[str]:
    """The requests of cloud-init's MetadataMaterializer below ``directory`` (a listing just
    fetched), in its order: sub-directories first (depth first), then the leaves."""
    listing = client.get(directory)
    listing.raise_for_status()
    children: list[str] = []
    leaves: list[str] = []
    for line in listing.text.splitlines():
        line = line.strip()
        name = line.rstrip("/")
        if not line or not name or name == "security-credentials":
            continue
        if line.endswith("/"):
            if name not in children:
                children.append(name)
            continue
        resource = name
        ident, sep, _key_name = line.partition("=")
        if sep and ident.isdigit():  # "0=mykey": the key is at 0/openssh-key
            resource = f"{int(ident)}/openssh-key"
        leaves.append(resource)
    requests: list[str] = []
    for child in children:
        requests.append(f"{directory}{child}/")
        requests += ec2_crawl(client, f"{directory}{child}/")
    requests += [f"{directory}{leaf}" for leaf in leaves]
    return requests


def cloud_init_paths(metadata_base: str, instance_id: str) -> list[str]:
    """The paths one guest's cloud-init (OpenStack datasource) requests, in order."""
    with httpx.Client(
        base_url=metadata_base, headers=proxy_headers(instance_id), timeout=30
    ) as client:
        listing = client.get("/openstack")
        listing.raise_for_status()
        version = newest_known_version(listing.text)
        base = f"/openstack/{version}"
        paths = [
            "/openstack",
            "/openstack",
            f"{base}/meta_data.json",
            f"{base}/user_data",
            f"{base}/vendor_data.json",
            f"{base}/vendor_data2.json",
            f"{base}/network_data.json",
        ]
        meta = client.get(f"{base}/meta_data.json").json()
        content = [f["content_path"] for f in meta.get("files", [])]
        content += [meta["network_config"]["content_path"]] if "network_config" in meta else []
        paths += [f"/openstack/{c.lstrip('/')}" for c in content]
        paths.append("/latest/meta-data/")
        paths += ec2_crawl(client, "/latest/meta-data/")
    return paths


def crawl_bytes(metadata_base: str, instance_id: str, paths: list[str]) -> int:
    """Bytes of response bodies in one guest's crawl."""
    with httpx.Client(
        base_url=metadata_base, headers=proxy_headers(instance_id), timeout=30
    ) as client:
        return sum(len(client.get(path).content) for path in paths)


def flat_name(path: str) -> str:
    """A path as one file name for nginx: ``/openstack`` is a document and a directory at
    once, which a file tree cannot be."""
    return path.strip("/").replace("/", "~") + ("~" if path.endswith("/") else "")


# --- a thin HTTP/1.1 client -----------------------------------------------------------------------


class RawConnection:
    """One kept-alive HTTP/1.1 connection and nothing else: fetching every document of every
    guest is hundreds of thousands of requests, where httpx's own cost would dominate."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str
    ) -> None:
        self.reader, self.writer, self.host = reader, writer, host

    @classmethod
    async def open(cls, port: int) -> RawConnection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer, f"127.0.0.1:{port}")

    @property
    def local_port(self) -> int:
        return int(self.writer.get_extra_info("sockname")[1])

    async def get(self, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
        lines = [
            f"GET {path} HTTP/1.1",
            f"Host: {self.host}",
            *(f"{k}: {v}" for k, v in headers.items()),
            "",
            "",
        ]
        self.writer.write("\r\n".join(lines).encode("latin-1"))
        head = await self.reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        length = None
        for line in header_lines:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        if length is None:
            raise RuntimeError(f"GET {path}: no content-length in {head!r}")
        return int(status_line.split()[1]), await self.reader.readexactly(length)

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()


@dataclass
class StaticTree:
    root: Path
    statuses: Counter[int]


async def _fetch_documents(
    port: int, instances: list[str], paths: list[str], root: Path, connections: int
) -> StaticTree:
    statuses: Counter[int] = Counter()
    pending = iter(instances)
    unique = list(dict.fromkeys(paths))

    async def fetch_guests() -> None:
        conn = await RawConnection.open(port)
        try:
            for instance_id in pending:  # shared iterator: each guest is fetched once
                directory = root / instance_id
                directory.mkdir()
                headers = proxy_headers(instance_id)
                for path in unique:
                    status, body = await conn.get(path, headers)
                    statuses[status] += 1
                    (directory / flat_name(path)).write_bytes(body)
        finally:
            await conn.close()

    await asyncio.gather(*(fetch_guests() for _ in range(connections)))
    return StaticTree(root, statuses)


def fetch_documents(port: int, instances: list[str], paths: list[str], root: Path) -> StaticTree:
    """Every guest's documents, as cloudseed serves them, written to ``root/<id>/<flat>``."""
    root.mkdir(parents=True)
    return asyncio.run(_fetch_documents(port, instances, paths, root, connections=16))


# --- wrk ------------------------------------------------------------------------------------------


@dataclass
class WrkResult:
    what: str
    requests: int
    seconds: float
    statuses: dict[int, int]
    socket_errors: dict[str, int]
    latency_us: dict[str, float]

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    @property
    def non_200(self) -> int:
        return sum(n for status, n in self.statuses.items() if status != 200)

    @property
    def errors(self) -> int:
        return self.non_200 + sum(self.socket_errors.values())

    def describe(self) -> str:
        ms = {k: v / 1000 for k, v in self.latency_us.items()}
        return (
            f"{self.what}: {self.requests:,} requests in {self.seconds:.1f} s = "
            f"{self.rps:,.0f} req/s; p50 {ms['p50']:.2f} ms, p99 {ms['p99']:.2f} ms, "
            f"max {ms['max']:.1f} ms; statuses {dict(sorted(self.statuses.items()))}; "
            f"socket errors {self.socket_errors}"
        )


def parse_wrk(what: str, output: str) -> WrkResult:
    line = next((x for x in output.splitlines() if x.startswith("STORM-RESULT ")), None)
    if line is None:
        raise RuntimeError(f"wrk printed no result:\n{output}")
    fields = dict(item.split("=", 1) for item in line.split()[1:])
    statuses = {
        int(s): int(n)
        for s, n in (pair.split(":") for pair in fields["statuses"].split(",") if pair)
    }
    return WrkResult(
        what=what,
        requests=int(fields["requests"]),
        seconds=int(fields["duration_us"]) / 1e6,
        statuses=statuses,
        socket_errors={k: int(fields[k]) for k in ("connect", "read", "write", "timeout")},
        latency_us={
            k.removesuffix("_us"): float(fields[k])
            for k in ("p50_us", "p75_us", "p90_us", "p99_us", "p999_us", "max_us", "mean_us")
        },
    )


@dataclass(frozen=True)
class StormFiles:
    instances: Path  # "<uuid> <project> <signature>" per line
    paths: Path  # "<path> <flat name>" per line


def write_storm_files(
    directory: Path, instances: list[str], paths: list[str], *, project: str | None = None
) -> StormFiles:
    """wrk's input (bench/metadata_storm_wrk.lua): one line per guest (its proxy headers; the
    project is PROJECT unless given), one per path (with its flat name for nginx)."""
    directory.mkdir()
    files = StormFiles(directory / "instances.txt", directory / "paths.txt")
    owner = PROJECT if project is None else project
    files.instances.write_text("".join(f"{i} {owner} {sign(i)}\n" for i in instances))
    files.paths.write_text("".join(f"{p} {flat_name(p)}\n" for p in paths))
    return files


def wrk_command(
    args: argparse.Namespace,
    url: str,
    target: str,
    files: StormFiles,
    seconds: float,
    one_cycle: bool,
) -> list[str]:
    return [
        require_tool("wrk", "wrk"),
        f"-t{args.threads}",
        f"-c{args.connections}",
        f"-d{math.ceil(seconds)}s",
        "--timeout",
        "10s",
        "--latency",
        "-s",
        str(WRK_SCRIPT),
        url,
        "--",
        target,
        str(files.instances),
        str(files.paths),
        "1" if one_cycle else "0",
        str(args.threads),
        str(args.connections),
    ]


def pacing_env(delay_ms: int) -> dict[str, str]:
    """wrk's delay() (read by the Lua script from the environment: wrk asks whether the script
    has one before any thread gets its arguments): each connection waits this long after an
    answer before its next request."""
    return {**os.environ, "STORM_DELAY_MS": str(delay_ms)}


def run_wrk(
    what: str, command: list[str], delay_ms: int = 0, probe: Callable[[], None] | None = None
) -> WrkResult:
    """Run wrk to its end; ``probe`` is called 3 s in, while every connection is open."""
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=pacing_env(delay_ms)
    )
    if probe is not None:
        time.sleep(3)
        probe()
    stdout, stderr = process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"wrk failed ({process.returncode}):\n{stdout}{stderr}")
    result = parse_wrk(what, stdout)
    print(f"  {result.describe()}", flush=True)
    return result


def _wrk_until_one_cycle(command: list[str], threads: int) -> tuple[str, bool]:
    """Run wrk until every thread has had one answer per (instance, path) of its share, then
    stop it with SIGINT (it then reports the time actually taken), unless wrk's own -d ends it
    first: its output, and whether every thread finished its cycle."""
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=pacing_env(0)
    )
    assert process.stdout is not None
    output: list[str] = []
    finished = 0
    for line in process.stdout:
        output.append(line)
        if line.startswith("CYCLE-DONE"):
            finished += 1
            if finished == threads:
                process.send_signal(signal.SIGINT)
    stderr = process.stderr.read() if process.stderr else ""
    if process.wait() != 0:
        raise RuntimeError(f"wrk failed ({process.returncode}):\n{''.join(output)}{stderr}")
    return "".join(output), finished == threads


def run_wrk_one_cycle(what: str, command: list[str], threads: int) -> WrkResult:
    """One answer per (instance, path) of every thread's share, or RuntimeError when wrk's
    time ran out first."""
    output, whole = _wrk_until_one_cycle(command, threads)
    if not whole:
        raise RuntimeError("wrk's time ran out before every instance was crawled once:\n" + output)
    result = parse_wrk(what, output)
    print(f"  {result.describe()}", flush=True)
    return result


def run_wrk_one_cycle_at_most(
    what: str, command: list[str], threads: int
) -> tuple[WrkResult, bool]:
    """Like run_wrk_one_cycle, but wrk's own -d may end the pass first: the result, and whether
    every instance was crawled once."""
    output, whole = _wrk_until_one_cycle(command, threads)
    result = parse_wrk(what, output)
    print(f"  {result.describe()}", flush=True)
    return result, whole


# --- nginx ----------------------------------------------------------------------------------------

NGINX_CONF = """\
worker_processes {workers};
daemon off;
master_process on;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    default_type application/octet-stream;
    sendfile on;
    tcp_nodelay on;
    keepalive_requests 100000000;
    keepalive_timeout 120s;
    client_body_temp_path {prefix}/client_body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    server {{
        listen 127.0.0.1:{port} reuseport;
        root {root};
        location / {{ }}
    }}
}}
"""


def nobody() -> tuple[int, int] | None:
    """Uid and gid to drop to when running as root (nginx is run unprivileged)."""
    if os.geteuid() != 0:
        return None
    import grp
    import pwd

    user = pwd.getpwnam("nobody")
    with contextlib.suppress(KeyError):
        return user.pw_uid, grp.getgrnam("nogroup").gr_gid
    return user.pw_uid, user.pw_gid


@contextlib.contextmanager
def running_nginx(root: Path, prefix: Path, workers: int) -> Iterator[str]:
    nginx = require_tool("nginx", "nginx-light")
    port = free_port()
    prefix.mkdir()
    config = prefix / "nginx.conf"
    config.write_text(NGINX_CONF.format(workers=workers, prefix=prefix, port=port, root=root))
    drop = nobody()
    if drop is not None:
        os.chown(prefix, *drop)  # its pid file, error log and temp directories
        os.chmod(prefix.parent, 0o755)  # the run's temp directory: let it reach the documents
    process = subprocess.Popen(
        [nginx, "-p", str(prefix), "-e", str(prefix / "error.log"), "-c", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        user=drop[0] if drop else None,
        group=drop[1] if drop else None,
        extra_groups=[] if drop else None,
    )
    try:
        _wait_for_port(port, process, prefix / "error.log")
        yield f"http://127.0.0.1:{port}"
    finally:
        process.send_signal(signal.SIGQUIT)  # graceful stop
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 20
    while True:
        if process.poll() is not None:
            raise RuntimeError(
                f"nginx exited with {process.returncode}: "
                f"{log.read_text(errors='replace') if log.exists() else ''}"
            )
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        if time.monotonic() > deadline:
            raise RuntimeError("nginx did not listen in 20 s")
        time.sleep(0.05)


def nginx_version() -> str:
    done = subprocess.run(
        [require_tool("nginx", "nginx-light"), "-v"], capture_output=True, text=True, check=False
    )
    return done.stderr.strip().removeprefix("nginx version: ")


# --- memory ---------------------------------------------------------------------------------------


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def workers_rss(server: Server) -> dict[int, int]:
    return {pid: rss_kib(pid) for pid in server.worker_pids()}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu_share(server: Server, seconds: float) -> dict[int, float]:
    """Each worker's CPU use with no request coming in (what following the change feed
    costs), as a share of one core."""
    pids = server.worker_pids()
    before = {pid: cpu_seconds(pid) for pid in pids}
    time.sleep(seconds)
    return {pid: (cpu_seconds(pid) - before[pid]) / seconds for pid in pids}


# --- change visibility ----------------------------------------------------------------------------


def socket_inode(server_port: int, client_port: int) -> int | None:
    """The inode of the server side of the loopback connection from ``client_port``."""
    local, remote = f"0100007F:{server_port:04X}", f"0100007F:{client_port:04X}"
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == local and fields[2] == remote:
            return int(fields[9])
    return None


def owner_of_socket(inode: int, pids: list[int]) -> int | None:
    """Which of ``pids`` holds the socket: the worker that accepted the connection."""
    wanted = f"socket:[{inode}]"
    for pid in pids:
        fd_dir = Path(f"/proc/{pid}/fd")
        for fd in fd_dir.iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(fd) == wanted:
                    return pid
    return None


async def connections_per_worker(
    server: Server, instance_id: str, path: str, per_worker: int
) -> dict[int, list[RawConnection]]:
    """Fresh connections, opened until each worker has accepted ``per_worker`` of them; which
    worker holds which is read from /proc, not assumed."""
    pids = server.worker_pids()
    owned: dict[int, list[RawConnection]] = {pid: [] for pid in pids}
    spare: list[RawConnection] = []
    headers = proxy_headers(instance_id)
    for _ in range(per_worker * len(pids) * 8):
        if all(len(c) >= per_worker for c in owned.values()):
            break
        conn = await RawConnection.open(server.metadata_port)
        status, _ = await conn.get(path, headers)  # accepted and answered
        if status != 200:
            raise RuntimeError(f"GET {path}: {status}")
        inode = socket_inode(server.metadata_port, conn.local_port)
        pid = owner_of_socket(inode, pids) if inode is not None else None
        if pid is None or len(owned[pid]) >= per_worker:
            spare.append(conn)
        else:
            owned[pid].append(conn)
    for conn in spare:
        await conn.close()
    missing = [pid for pid, c in owned.items() if len(c) < per_worker]
    if missing:
        raise RuntimeError(f"workers {missing} accepted too few connections")
    return owned


def connections_by_worker(server: Server) -> dict[int, int]:
    """Established connections to the metadata port that each worker holds."""
    local = f":{server.metadata_port:04X}"
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1].endswith(local) and fields[3] == "01":
            inodes.add(f"socket:[{fields[9]}]")
    counts = {}
    for pid in server.worker_pids():
        links = []
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                links.append(os.readlink(fd))
        counts[pid] = sum(1 for link in links if link in inodes)
    return counts


async def _fill_every_worker(server: Server, instances: list[str], paths: list[str]) -> None:
    owned = await connections_per_worker(server, instances[0], paths[0], per_worker=4)

    async def fill(conns: list[RawConnection]) -> None:
        pending = iter(instances)  # shared by this worker's connections

        async def walk(conn: RawConnection) -> None:
            for instance_id in pending:
                for path in paths:
                    status, _ = await conn.get(path, proxy_headers(instance_id))
                    if status != 200:
                        raise RuntimeError(f"GET {path} for {instance_id}: {status}")

        await asyncio.gather(*(walk(c) for c in conns))

    try:
        await asyncio.gather(*(fill(conns) for conns in owned.values()))
    finally:
        for conns in owned.values():
            for conn in conns:
                await conn.close()


def fill_every_worker(server: Server, instances: list[str], paths: list[str]) -> None:
    """Ask every worker, on connections known to be its own, for each guest's documents that
    are rendered on first use. wrk's connections are not spread evenly over the workers (the
    kernel hands each new connection to whichever worker accepts first), so after the cold
    pass a worker can lack the guests whose every request happened to reach the other one."""
    asyncio.run(_fill_every_worker(server, instances, paths))


@dataclass
class ChangeTrial:
    put_ms: float
    visible_ms: dict[int, float]  # worker pid -> ms after the PUT's answer


async def _one_change(
    api: httpx.AsyncClient,
    instance_id: str,
    path: str,
    owned: dict[int, list[RawConnection]],
    trial: int,
) -> ChangeTrial:
    new = USER_DATA + f"# change {trial} {uuid.uuid4()}\n".encode()
    headers = proxy_headers(instance_id)
    started = time.perf_counter()
    response = await api.put(
        f"/v2.1/servers/{instance_id}",
        json={"server": {"user_data": base64.b64encode(new).decode()}},
    )
    answered = time.perf_counter()
    if response.status_code != 200:
        raise RuntimeError(f"PUT user_data: {response.status_code} {response.text[:300]}")
    seen: dict[int, float] = {}

    async def poll(pid: int, conn: RawConnection) -> None:
        while time.perf_counter() - answered < 5:
            status, body = await conn.get(path, headers)
            if status == 200 and body == new:
                # A worker has changed when its last connection sees the new value.
                seen[pid] = max(seen.get(pid, 0.0), (time.perf_counter() - answered) * 1000)
                return
        seen[pid] = math.inf

    await asyncio.gather(*(poll(pid, c) for pid, conns in owned.items() for c in conns))
    return ChangeTrial((answered - started) * 1000, seen)


async def _change_visibility(server: Server, instance_id: str, trials: int) -> list[ChangeTrial]:
    path = "/openstack/latest/user_data"
    owned = await connections_per_worker(server, instance_id, path, per_worker=4)
    headers = {**AUTH, "OpenStack-API-Version": "compute 2.105"}
    results = []
    try:
        async with httpx.AsyncClient(base_url=server.api, headers=headers, timeout=30) as api:
            for trial in range(trials):
                results.append(await _one_change(api, instance_id, path, owned, trial))
                await asyncio.sleep(0.2)  # lets the feed pollers drift to a new phase
    finally:
        for conns in owned.values():
            for conn in conns:
                await conn.close()
    return results


def measure_change_visibility(server: Server, instance_id: str, trials: int) -> list[ChangeTrial]:
    return asyncio.run(_change_visibility(server, instance_id, trials))


# --- profile --------------------------------------------------------------------------------------


@dataclass
class Profile:
    samples: int
    threads: list[tuple[str, int]]  # thread name, samples
    own: list[tuple[str, int]]  # frame, samples in which it was the innermost frame
    inclusive: list[tuple[str, int]]  # frame, samples with it anywhere on the stack


# Frames every stack of a thread passes through (the process's entry, the event loop's own
# run methods, a pool thread's bootstrap): as "inclusive" they would top the list, saying
# nothing. Their own time, if any, still counts. (py-spy names files relative to sys.path.)
ENTRY_FRAMES = re.compile(
    r"^<module> |\((click|multiprocessing)/|\(cloudseed/(serve|cli/\w+)\.py\)"
    r"|\(asyncio/runners\.py\)|^BaseEventLoop\.(run_until_complete|run_forever|_run_once) "
    r"|^Handle\._run |\(threading\.py\)|^_worker \(concurrent/futures/thread\.py\)"
)


def short_frame(frame: str) -> str:
    """``name (path)`` with the path cut to what identifies it."""
    frame = re.sub(r"\(/.*?/site-packages/", "(", frame)
    frame = re.sub(r"\(/.*?/lib/python3\.\d+/", "(stdlib ", frame)
    return re.sub(r"\(/.*?/src/", "(", frame)


def thread_name(root: str) -> str:
    """``thread (123): asyncio_0`` -> ``asyncio_N``: pool threads by kind, not one by one."""
    name = root.partition(": ")[2] or root
    return re.sub(r"_\d+$", "_N", re.sub(r"-\d+", "-N", name))


def summarize_profile(raw: str, top: int) -> Profile:
    """py-spy's raw (collapsed) output, recorded with --threads: one line per distinct stack,
    ``thread (tid): name;outermost;...;innermost count``."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        root, *frames = stack.split(";")
        frames = [short_frame(f) for f in frames] or ["(no Python frame)"]
        total += count
        threads[thread_name(root)] += count
        own[frames[-1]] += count
        for frame in set(frames):
            if not ENTRY_FRAMES.search(frame):
                inclusive[frame] += count
    return Profile(total, threads.most_common(), own.most_common(top), inclusive.most_common(top))


def profile_worker(args: argparse.Namespace, pid: int, command: list[str], out: Path) -> Profile:
    """py-spy on one worker while wrk runs a warm pass (not measured)."""
    py_spy = venv_tool("py-spy", "pip install py-spy into the venv")
    storm = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=pacing_env(0)
    )
    try:
        time.sleep(2)  # past wrk's connection set-up
        done = subprocess.run(
            [
                py_spy,
                "record",
                "--pid",
                str(pid),
                "--duration",
                str(args.profile_seconds),
                "--rate",
                "250",
                "--format",
                "raw",
                "--nolineno",
                "--threads",
                "--nonblocking",
                "--output",
                str(out),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"py-spy failed:\n{done.stdout}{done.stderr}")
    finally:
        storm.communicate()
    return summarize_profile(out.read_text(), top=12)


# --- report ---------------------------------------------------------------------------------------


@dataclass
class Report:
    args: argparse.Namespace
    seeding: Seeding | None = None
    paths: list[str] = field(default_factory=list)
    crawl_bytes: int = 0
    cold: WrkResult | None = None
    warm: list[WrkResult] = field(default_factory=list)
    paced: WrkResult | None = None
    nginx: list[WrkResult] = field(default_factory=list)
    rss_before: dict[int, int] = field(default_factory=dict)
    rss_after: dict[int, int] = field(default_factory=dict)
    static: StaticTree | None = None
    changes: list[ChangeTrial] = field(default_factory=list)
    idle_cpu: dict[int, float] = field(default_factory=dict)
    fill_seconds: float = 0.0
    split: list[dict[int, int]] = field(default_factory=list)  # wrk's connections per worker
    profile: Profile | None = None
    loads: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def best(results: list[WrkResult]) -> WrkResult:
    return max(results, key=lambda r: r.rps)


def kib_per_instance(report: Report) -> float:
    """RSS growth per instance held in one worker's cache (every worker holds every instance:
    each guest's requests spread over connections of both), for the worker that grew most: a
    worker that dropped part of its cache on the way would make an average look better."""
    return (
        max(report.rss_after[pid] - report.rss_before[pid] for pid in report.rss_after)
        / report.args.instances
    )


def visibility_ms(report: Report) -> list[float]:
    """Per trial: when the slowest worker served the new value."""
    return [max(t.visible_ms.values()) for t in report.changes]


def targets_table(report: Report) -> tuple[str, list[str]]:
    warm, cold = best(report.warm), report.cold
    assert cold is not None
    storm_errors = cold.errors + sum(r.errors for r in [*report.warm, report.paced] if r)
    ratio = warm.rps / best(report.nginx).rps if report.nginx else None
    visible = max(visibility_ms(report))
    kib = kib_per_instance(report)
    rows = [
        (
            "requests/s over the cloud-init mix, all workers (warm)",
            f"≥ {TARGETS['rps']:,}",
            f"{warm.rps:,.0f}",
            warm.rps >= TARGETS["rps"],
        ),
        # Two readings of "p99 at 256 connections". At the target load (10,000 requests/s
        # offered through 256 connections, the paced pass) it is a latency target. Saturated
        # (closed loop: each connection sends its next request when the last is answered) the
        # mean latency is connections / throughput (Little's law), so it asks for more than
        # 25,600 requests/s, which nginx itself does not reach with a p99 under 10 ms here.
        *(
            [
                (
                    f"p99 latency at {report.args.connections} connections, "
                    f"{report.args.paced_rate:,} requests/s offered",
                    f"< {TARGETS['p99_ms']:.0f} ms",
                    f"{report.paced.latency_us['p99'] / 1000:.2f} ms "
                    f"({report.paced.rps:,.0f} requests/s served)",
                    report.paced.latency_us["p99"] / 1000 < TARGETS["p99_ms"],
                )
            ]
            if report.paced
            else []
        ),
        (
            f"p99 latency at {report.args.connections} connections, saturated (closed loop)"
            + (
                f"; nginx: {best(report.nginx).latency_us['p99'] / 1000:.1f} ms"
                if report.nginx
                else ""
            ),
            f"< {TARGETS['p99_ms']:.0f} ms",
            f"{warm.latency_us['p99'] / 1000:.2f} ms",
            warm.latency_us["p99"] / 1000 < TARGETS["p99_ms"],
        ),
        (
            f"errors over the {report.args.instances:,}-instance storm (cold + warm passes)",
            "0",
            f"{storm_errors:,}",
            storm_errors == 0,
        ),
        (
            "memory per cached instance (RSS growth of the worker that grew most)",
            f"< {TARGETS['kib_per_instance']:.0f} KB",
            f"{kib:.2f} KiB",
            kib < TARGETS["kib_per_instance"],
        ),
        (
            "change visible in every worker",
            f"≤ {TARGETS['visible_ms']:.0f} ms",
            f"{visible:.1f} ms (max of {len(report.changes)})",
            visible <= TARGETS["visible_ms"],
        ),
    ]
    if ratio is not None:
        rows.append(
            (
                "cloudseed / nginx requests/s",
                f"≥ {TARGETS['nginx_ratio']:.0%}",
                f"{ratio:.1%}",
                ratio >= TARGETS["nginx_ratio"],
            )
        )
    lines = ["| Target | Goal | Measured | Met |", "|---|---:|---:|---|"]
    lines += [
        f"| {what} | {goal} | {got} | {'met' if ok else '**not met**'} |"
        for what, goal, got, ok in rows
    ]
    missed = [what for what, _, _, ok in rows if not ok]
    return "\n".join(lines), missed


def passes_table(report: Report) -> str:
    lines = [
        "| Pass | Requests | Time | Requests/s | p50 | p99 | p99.9 | max | "
        "Statuses | Socket errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    assert report.cold is not None
    for r in [report.cold, *report.warm, *report.nginx, *([report.paced] if report.paced else [])]:
        ms = {k: v / 1000 for k, v in r.latency_us.items()}
        statuses = ", ".join(f"{s}: {n:,}" for s, n in sorted(r.statuses.items()))
        lines.append(
            f"| {r.what} | {r.requests:,} | {r.seconds:.1f} s | {r.rps:,.0f} | "
            f"{ms['p50']:.2f} ms | {ms['p99']:.2f} ms | {ms['p999']:.2f} ms | "
            f"{ms['max']:.1f} ms | {statuses} | {sum(r.socket_errors.values())} |"
        )
    return "\n".join(lines)


def memory_lines(report: Report) -> list[str]:
    before, after = report.rss_before, report.rss_after
    per_worker = ", ".join(
        f"{before[p] / 1024:.1f} → {after[p] / 1024:.1f} MiB" for p in sorted(after)
    )
    grown = sum(after.values()) - sum(before.values())
    return [
        "- Workers' RSS (VmRSS) before the cold pass (after the priming crawl of "
        f"{PRIMING_INSTANCES} other guests) and after it, every instance cached in every "
        f"worker: {per_worker}. After the cold pass, each worker was also asked for every "
        "guest's meta_data.json and network_data.json on connections of its own "
        f"({report.fill_seconds:.1f} s), since wrk's connections are not spread evenly: "
        f"during the warm passes the workers held {split_text(report)} of wrk's "
        f"{report.args.connections} connections",
        f"- Growth: {grown / 1024:.1f} MiB for {report.args.instances:,} instances in "
        f"{len(after)} workers = {grown / report.args.instances * 1000 / 1024:.2f} MiB per "
        f"1,000 instances (all workers together); {kib_per_instance(report):.2f} KiB per "
        "instance in the worker that grew most",
    ]


def split_text(report: Report) -> str:
    if not report.split:
        return "(not measured yet)"
    return "; ".join(" / ".join(str(n) for n in counts.values()) for counts in report.split)


def idle_line(report: Report) -> str:
    shares = ", ".join(f"{share:.1%}" for share in report.idle_cpu.values())
    return (
        f"- Idle (no requests for 10 s, every instance cached): the workers use {shares} of "
        "a core each, following the change feed"
    )


def change_lines(report: Report) -> list[str]:
    visible = visibility_ms(report)
    puts = [t.put_ms for t in report.changes]
    pids = sorted(report.changes[0].visible_ms)
    per_worker = "; ".join(
        f"worker {i + 1}: p50 {statistics.median(t.visible_ms[p] for t in report.changes):.1f}"
        f" ms, max {max(t.visible_ms[p] for t in report.changes):.1f} ms"
        for i, p in enumerate(pids)
    )
    return [
        f"- {len(report.changes)} user data changes (PUT at 2.105), each polled on 4 "
        f"connections per worker (each connection's worker read from /proc) from the PUT's "
        f"answer on: slowest worker p50 {statistics.median(visible):.1f} ms, max "
        f"{max(visible):.1f} ms; {per_worker}; the PUT itself p50 "
        f"{statistics.median(puts):.1f} ms"
    ]


def profile_lines(report: Report) -> list[str]:
    profile = report.profile
    if profile is None:
        return ["Not profiled (`--profile-seconds 0`)."]
    share = ", ".join(f"{name} {n / profile.samples:.0%}" for name, n in profile.threads)
    lines = [
        f"py-spy, {report.args.profile_seconds} s of one worker at 250 samples/s during a "
        f"warm pass: {profile.samples:,} samples of running Python (time waiting in the "
        f"event loop's poll or on a lock is not sampled); by thread: {share}.",
        "",
        "| Own time | Frame (innermost) |",
        "|---:|---|",
    ]
    lines += [f"| {n / profile.samples:.1%} | `{frame}` |" for frame, n in profile.own]
    lines += [
        "",
        "| Inclusive | Frame (anywhere on the stack, entry and event loop frames left out) |",
        "|---:|---|",
    ]
    lines += [f"| {n / profile.samples:.1%} | `{frame}` |" for frame, n in profile.inclusive]
    return lines


def code_version() -> str:
    """The commit measured, and whether the source differed from it."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", *args], capture_output=True, text=True, check=False, cwd=BENCH_DIR.parent
        )
        return done.stdout.strip()

    version = git("rev-parse", "--short", "HEAD") or "unknown"
    if git("status", "--porcelain", "--", "src"):
        version += " with uncommitted changes in src/"
    if os.environ.get("PYTHONPATH"):
        version += f" (cloudseed imported through PYTHONPATH={os.environ['PYTHONPATH']})"
    return version


def command_line() -> str:
    script = os.path.relpath(sys.argv[0])
    exe = os.path.relpath(sys.executable)
    return shlex.join(
        [
            exe if not exe.startswith("..") else sys.executable,
            script if not script.startswith("..") else sys.argv[0],
            *sys.argv[1:],
        ]
    )


def section_text(report: Report) -> str:
    args, seeding = report.args, report.seeding
    assert seeding is not None
    targets, missed = targets_table(report)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    verdict = (
        "All targets met."
        if not missed
        else "Not met: " + "; ".join(missed) + ". See the profile below."
    )
    verdict += latency_note(report)
    return "\n".join(
        [
            "## Metadata service boot storm",
            "",
            f"- Date: {now}",
            f"- Machine: {os.cpu_count()} CPUs ({cpu_model()}), {platform.system()} "
            f"{platform.release()}, Python {platform.python_version()}; shared with other work: "
            f"load average (1, 5, 15 min) {', '.join(report.loads)} at the start of each pass",
            f"- Command: `{command_line()}`",
            f"- Code: {code_version()}",
            f"- Server: `cloudseed serve --workers {args.workers}{NO_COMPUTE[args.no_compute]}` "
            "on SQLite, behind a simulated "
            "Neutron metadata proxy (`[neutron] service_metadata_proxy = true`: every request "
            "carries `X-Instance-ID`, `X-Tenant-ID` and its HMAC signature), log level warning; "
            "started afresh after the seeding, so its workers hold nothing else",
            f"- Guests: {args.instances:,} servers (and {PRIMING_INSTANCES} more, crawled once "
            "before the memory baseline) created through the compute API (multi-create, "
            f"{args.batch} a request, {args.create_concurrency} requests at a time), each with a "
            f"key pair, {len(USER_DATA)} bytes of cloud-config user data and "
            f"{len(SERVER_METADATA)} metadata items: created in {seeding.create_seconds:.1f} s, "
            f"all ACTIVE after {seeding.active_seconds:.1f} s "
            f"({len(seeding.instances) / seeding.active_seconds:,.0f} servers/s; "
            f"a multi-create took "
            f"{seeding.batch_seconds[0]:.1f} s first and {seeding.batch_seconds[-1]:.1f} s last)"
            + refusal_note(seeding),
            f"- The crawl: {len(report.paths)} requests per guest, {report.crawl_bytes:,}"
            " bytes of bodies: cloud-init's OpenStack datasource sequence (`/openstack` twice, "
            f"`{report.paths[2].rsplit('/', 1)[0]}/` meta_data.json, user_data, vendor_data.json, "
            "vendor_data2.json, network_data.json) and its EC2 crawl of `/latest/meta-data/` "
            "(every listing and leaf, in cloud-init's order)",
            f"- Load: `wrk -t{args.threads} -c{args.connections} --latency` on the same machine "
            "with `bench/metadata_storm_wrk.lua`: each wrk thread walks its half of the guests "
            f"{args.connections // args.threads} at a time, one crawl step for each, so each "
            "guest's requests come in order and spread over both workers. Cold pass: exactly one "
            f"request per (guest, path), caches empty; warm passes: {args.duration} s each",
            nginx_note(args),
            "",
            targets,
            "",
            verdict,
            "",
            passes_table(report),
            "",
            *memory_lines(report),
            *change_lines(report),
            idle_line(report),
            "",
            "### Where a worker's time goes",
            "",
            *profile_lines(report),
            "",
        ]
    )


def latency_note(report: Report) -> str:
    """What the p99 at saturation means, and the latency at a set load."""
    connections = report.args.connections
    note = (
        f"\n\nAt saturation the load is closed-loop: {connections} connections, each "
        "sending its next request when the last is answered, so the mean latency is "
        f"{connections} / throughput (Little's law) and a p99 under 10 ms needs well over "
        f"{connections * 100:,} requests/s"
    )
    if report.nginx:
        nginx = best(report.nginx)
        note += (
            f" (nginx: {nginx.rps:,.0f} requests/s, p99 {nginx.latency_us['p99'] / 1000:.1f} ms)"
        )
    note += "."
    paced = report.paced
    if paced is not None:
        ms = {k: v / 1000 for k, v in paced.latency_us.items()}
        note += (
            f" At a set load instead, {paced.rps:,.0f} requests/s through the same "
            f"{connections} connections (the paced pass), cloudseed answers with p50 "
            f"{ms['p50']:.2f} ms, p99 {ms['p99']:.2f} ms, max {ms['max']:.1f} ms."
        )
    return note


def nginx_note(args: argparse.Namespace) -> str:
    if args.no_nginx:
        return "- nginx: not measured in this run (`--no-nginx`)"
    return (
        f"- nginx {nginx_version()}: `worker_processes {args.workers}`, unprivileged, "
        "`access_log off`, default file handling (open, sendfile, close per request), "
        "serving each guest's documents (fetched once from cloudseed) as static files "
        "`/<instance id>/<path with / as ~>`, same requests and headers, same wrk settings"
    )


def refusal_note(seeding: Seeding) -> str:
    if not seeding.refusals:
        return ""
    kinds = Counter(r.split(" ", 1)[0] for r in seeding.refusals)
    causes = "; ".join(seeding.causes) or "see the server log"
    return (
        f"; {len(seeding.refusals)} multi-creates were refused "
        f"({', '.join(f'{status}: {n}' for status, n in kinds.items())}; {causes}) and "
        "posted again"
    )


# --- main -----------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=10_000, help="simulated guests")
    parser.add_argument("--duration", type=int, default=20, help="seconds per warm pass")
    parser.add_argument("--connections", type=int, default=256, help="wrk -c")
    parser.add_argument("--threads", type=int, default=2, help="wrk -t")
    parser.add_argument("--workers", type=int, default=2, help="cloudseed (and nginx) workers")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="warm passes against each of cloudseed and nginx, alternating; "
        "the best of each is compared",
    )
    parser.add_argument("--batch", type=int, default=200, help="servers per multi-create")
    parser.add_argument(
        "--create-concurrency", type=int, default=2, help="multi-create requests in flight"
    )
    parser.add_argument(
        "--paced-rate",
        type=int,
        default=10_000,
        help="requests/s offered in an extra, paced warm pass (0: skip); "
        "the p99 target is judged there (the requests/s target's load)",
    )
    parser.add_argument("--change-trials", type=int, default=20)
    parser.add_argument("--profile-seconds", type=int, default=10, help="0: no profile")
    parser.add_argument(
        "--state",
        metavar="DIR",
        type=Path,
        help="keep the seeded databases here, and reuse them when they hold "
        "--instances servers (seeding 10,000 takes minutes)",
    )
    parser.add_argument(
        "--no-nginx",
        action="store_true",
        help="skip the nginx comparison (quicker runs while tuning)",
    )
    parser.add_argument(
        "--no-compute",
        action="store_true",
        help="the measured server without the embedded compute agent (serve --no-compute, "
        "the agent elsewhere); the seeding always runs one",
    )
    parser.add_argument(
        "--write",
        metavar="PATH",
        type=Path,
        help="replace the metadata storm section of this Markdown file",
    )
    args = parser.parse_args(argv)
    if args.instances < args.threads or args.connections < args.threads:
        parser.error("--instances and --connections must be at least --threads")
    if (
        min(
            args.duration,
            args.workers,
            args.rounds,
            args.batch,
            args.create_concurrency,
            args.change_trials,
        )
        < 1
    ):
        parser.error("counts and durations must be positive")
    return args


SEED_RECORD = "storm-seed.json"


def seeded_state(args: argparse.Namespace, tmp: Path) -> tuple[Path, Seeding]:
    """A state directory holding ``--instances`` ACTIVE servers: ``--state`` when it already
    has them (recorded in SEED_RECORD), otherwise seeded now (there, or in ``tmp``)."""
    data_dir = args.state if args.state is not None else tmp / "state"
    record = data_dir / SEED_RECORD
    if record.exists():
        saved = Seeding(**json.loads(record.read_text()))
        if len(saved.instances) != args.instances + PRIMING_INSTANCES:
            sys.exit(
                f"{data_dir} holds {len(saved.instances)} instances, not "
                f"{args.instances} + {PRIMING_INSTANCES}: use another --state directory"
            )
        print(f"reusing {len(saved.instances):,} servers seeded earlier in {data_dir}")
        return data_dir, saved
    data_dir.mkdir(parents=True, exist_ok=True)
    if any(data_dir.iterdir()):
        sys.exit(f"{data_dir} is not empty and was not seeded by this benchmark")
    done = step("fresh SQLite databases; flavor, image, /16 network")
    registries = register(data_dir)
    done()
    with running_server(data_dir, args.workers) as server:
        total = args.instances + PRIMING_INSTANCES
        done = step(f"creating {total:,} servers through the compute API")
        seeding = seed(server, registries, total, args.batch, args.create_concurrency)
        seeding.causes = errors_in_log(server)
        done()
    record.write_text(json.dumps(dataclasses.asdict(seeding)))
    return data_dir, seeding


def run(args: argparse.Namespace, tmp: Path, report: Report) -> None:
    data_dir, report.seeding = seeded_state(args, tmp)
    instances = report.seeding.instances[: args.instances]
    priming = report.seeding.instances[args.instances :]
    # A new server for the storm: its workers have done nothing else (so their memory is the
    # metadata service's alone), as after a restart in the middle of a boot storm.
    with running_server(data_dir, args.workers, compute=not args.no_compute) as server:
        metadata = f"http://127.0.0.1:{server.metadata_port}"
        done = step("crawling one guest as cloud-init does")
        report.paths = cloud_init_paths(metadata, instances[0])
        report.crawl_bytes = crawl_bytes(metadata, instances[0], report.paths)
        print("  " + " ".join(report.paths))
        files = write_storm_files(tmp / "storm", instances, report.paths)
        done()

        done = step(f"priming: {len(priming)} other guests' crawls, for the memory baseline")
        run_wrk_one_cycle(
            "priming",
            wrk_command(
                args,
                metadata,
                "cloudseed",
                write_storm_files(tmp / "priming", priming, report.paths),
                900,
                one_cycle=True,
            ),
            args.threads,
        )
        done()
        report.rss_before = workers_rss(server)
        report.loads.append(load_average())
        done = step("cold pass: every guest's crawl once, nothing cached")
        report.cold = run_wrk_one_cycle(
            "cloudseed, cold caches (boot storm)",
            wrk_command(args, metadata, "cloudseed", files, 900, one_cycle=True),
            args.threads,
        )
        done()
        done = step("every guest into every worker (the ones the cold pass missed)")
        fill_started = time.perf_counter()
        fill_every_worker(
            server,
            instances,
            [p for p in report.paths if p.endswith(("meta_data.json", "network_data.json"))],
        )
        report.fill_seconds = time.perf_counter() - fill_started
        done()
        report.rss_after = workers_rss(server)
        print("  " + "; ".join(memory_lines(report)))

        with contextlib.ExitStack() as stack:
            nginx = None
            if not args.no_nginx:
                done = step("fetching every guest's documents for nginx")
                report.static = fetch_documents(
                    server.metadata_port, instances, report.paths, tmp / "www" / "docs"
                )
                done()
                if set(report.static.statuses) != {200}:
                    report.failures.append(f"documents: statuses {dict(report.static.statuses)}")
                nginx = stack.enter_context(
                    running_nginx(report.static.root, tmp / "nginx", args.workers)
                )
            for round_ in range(args.rounds):
                label = f" (round {round_ + 1})" if args.rounds > 1 else ""
                report.loads.append(load_average())
                done = step(f"warm pass against cloudseed{label}, {args.duration} s")
                report.warm.append(
                    run_wrk(
                        f"cloudseed, warm{label}",
                        wrk_command(args, metadata, "cloudseed", files, args.duration, False),
                        probe=lambda: report.split.append(connections_by_worker(server)),
                    )
                )
                done()
                if nginx is None:
                    continue
                report.loads.append(load_average())
                done = step(f"same pass against nginx{label}, {args.duration} s")
                report.nginx.append(
                    run_wrk(
                        f"nginx, static files{label}",
                        wrk_command(args, nginx, "nginx", files, args.duration, False),
                    )
                )
                done()

        if args.paced_rate:
            # wrk's delay is whole milliseconds and each answer's own latency (about 1.5 ms
            # here) adds to it: without that, 10,000 asked for were about 9,300 offered.
            delay_ms = max(1, round(args.connections / args.paced_rate * 1000 - 1.5))
            report.loads.append(load_average())
            done = step(
                f"paced pass against cloudseed: each connection waits {delay_ms} ms "
                f"between requests (about {args.paced_rate:,} req/s offered)"
            )
            report.paced = run_wrk(
                f"cloudseed, warm, paced ({delay_ms} ms between a connection's requests)",
                wrk_command(args, metadata, "cloudseed", files, args.duration, False),
                delay_ms=delay_ms,
            )
            done()

        done = step("idle: the workers' CPU use with no requests, 10 s")
        time.sleep(2)  # the last pass's connections close
        report.idle_cpu = idle_cpu_share(server, 10)
        print(f"  {idle_line(report)}")
        done()

        done = step(f"change visibility: {args.change_trials} user data changes")
        report.changes = measure_change_visibility(
            server, instances[len(instances) // 2], args.change_trials
        )
        print("  " + "; ".join(change_lines(report)))
        done()

        if args.profile_seconds:
            done = step(f"profiling one worker for {args.profile_seconds} s in a warm pass")
            report.profile = profile_worker(
                args,
                server.worker_pids()[0],
                wrk_command(args, metadata, "cloudseed", files, args.profile_seconds + 4, False),
                tmp / "profile.txt",
            )
            print("\n".join("  " + line for line in profile_lines(report)))
            done()

    for r in [report.cold, *report.warm, *report.nginx, report.paced]:
        if r is not None and r.errors:
            report.failures.append(
                f"{r.what}: {r.non_200} non-200 answers "
                f"{r.statuses}, socket errors {r.socket_errors}"
            )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    require_tool("wrk", "wrk")
    require_tool("nginx", "nginx-light")
    if args.profile_seconds:
        venv_tool("py-spy", "pip install py-spy into the venv")
    report = Report(args)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cloudseed-storm-") as tmp_name:
        run(args, Path(tmp_name), report)
    print(f"\ntotal {time.perf_counter() - started:.0f} s\n")
    section = section_text(report)
    print(section)
    if args.write is not None:
        write_section(args.write, *MARKERS, section, INTRO)
        print(f"wrote the metadata storm section of {args.write}")
    if report.failures:
        print("FAILED:\n" + "\n".join(f"- {f}" for f in report.failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
