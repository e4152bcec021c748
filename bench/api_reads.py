"""Compute API read paths under wrk: key pair list / show, server show; key pair import latency.

Starts a real ``cloudseed serve --workers N`` (noauth2, SQLite, fake compute driver) on a fresh
state directory, creates ``--keypairs`` key pairs (ed25519, imported over HTTP) and one ACTIVE
server, then measures with ``wrk`` (keep-alive, ``--connections`` connections, ``--seconds``
each):

- ``GET /v2.1/os-keypairs`` at microversion 2.10 (every key pair in one body);
- ``GET /v2.1/os-keypairs/{name}`` at 2.10;
- ``GET /v2.1/servers/{id}`` at 2.1 and at ``latest``;
- ``GET /v2.1/servers?limit=100`` and ``GET /v2.1/servers/detail?limit=100`` at 2.10, once
  ``--servers`` more servers (multi-create, with user data and metadata, as
  bench/side_by_side.py seeds them) are ACTIVE;

and ``--imports`` sequential key pair imports, then as many deletes of them (one client, one
connection: median, p99 and the server's CPU per request). ``--sequential-only`` measures just
those. These are cloudseed alone; bench/side_by_side.py puts Nova beside it behind Keystone.

Usage (from the repository root, with the project's venv)::

    .venv/bin/python bench/api_reads.py [--workers 2] [--connections 8] [--seconds 10]
        [--sequential-only] [--write docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from report import cpu_model, write_section
from sqlalchemy.orm import Session
from storm_host import free_port
from storm_seeding import SERVER_METADATA, USER_DATA

from cloudseed.db.engines import Database
from cloudseed.flavors import service as flavors
from cloudseed.images import service as images
from cloudseed.networks import service as networks
from cloudseed.schema import sync as schema_sync
from cloudseed.settings import load_settings

# noauth2's token; with --keystone, main() replaces it with a real one before any request.
TOKEN = "bench:bench-project"


def ed25519_line(comment: str) -> str:
    public = (
        ed25519.Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    )
    return f"{public.decode('ascii')} {comment}"


def keystone_token(auth_url: str, password: str) -> str:
    """A project-scoped token for the bootstrap ``admin`` user (tests/support/keystone.py and
    ../shared/peers/keystone.sh make one)."""
    user = {"name": "admin", "domain": {"id": "default"}, "password": password}
    body = {
        "auth": {
            "identity": {"methods": ["password"], "password": {"user": user}},
            "scope": {"project": {"name": "admin", "domain": {"id": "default"}}},
        }
    }
    r = httpx.post(f"{auth_url}/auth/tokens", json=body, timeout=30)
    r.raise_for_status()
    return r.headers["X-Subject-Token"]


def keystone_section(auth_url: str, password: str) -> str:
    return (
        "[api]\nauth_strategy = keystone\n\n"
        f"[keystone_authtoken]\nwww_authenticate_uri = {auth_url}\nauth_url = {auth_url}\n"
        f"auth_type = password\nusername = admin\npassword = {password}\n"
        "project_name = admin\nuser_domain_id = default\nproject_domain_id = default\n\n"
    )


def headers(version: str) -> dict[str, str]:
    return {"X-Auth-Token": TOKEN, "OpenStack-API-Version": f"compute {version}"}


def prepare(tmp: Path, extra_config: str = "") -> tuple[Path, str]:
    """A config file and databases with a flavor, an image and a network; (config, image id)."""
    environ = {
        "CLOUDSEED_API_DATABASE__CONNECTION": f"sqlite:///{tmp}/api.sqlite",
        "CLOUDSEED_DATABASE__CONNECTION": f"sqlite:///{tmp}/cell1.sqlite",
        "CLOUDSEED_STATE_PATH": str(tmp),
    }
    settings = load_settings(environ=environ)
    schema_sync.sync(settings)
    raw = tmp / "disk.raw"
    raw.write_bytes(b"\0" * 4096)
    db = Database.connect("api", settings.api_database_url)
    try:

        def work(session: Session) -> str:
            flavors.add_flavor(session, name="m1.tiny", flavorid="1", vcpus=1, ram=512, disk=1)
            image = images.add_image(session, name="cirros", path=raw, disk_format="raw")
            # A /16: room for --servers servers' addresses.
            networks.add_network(session, name="private", cidr="10.0.0.0/16", gateway="10.0.0.1")
            return image.uuid

        image_id = db.run(work, write=True)
    finally:
        db.dispose()
    config = tmp / "cloudseed.ini"
    config.write_text(
        f"[DEFAULT]\nstate_path = {tmp}\nlog_level = warning\n\n"
        f"[api_database]\nconnection = sqlite:///{tmp}/api.sqlite\n\n"
        f"[database]\nconnection = sqlite:///{tmp}/cell1.sqlite\n\n"
        "[quota]\nkey_pairs = -1\ninstances = -1\ncores = -1\nram = -1\n\n" + extra_config,
        encoding="utf-8",
    )
    return config, image_id


@contextlib.contextmanager
def serving(config: Path, workers: int, log: Path) -> Iterator[tuple[str, int]]:
    """(base URL, pid) of a running ``cloudseed serve``; SIGTERM at the end."""
    port = free_port()
    command = [
        str(Path(sys.executable).parent / "cloudseed"),
        "--config",
        str(config),
        "serve",
        "--api-listen",
        f"127.0.0.1:{port}",
        "--metadata-listen",
        f"127.0.0.1:{free_port()}",
        "--workers",
        str(workers),
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                sys.exit(f"server exited:\n{log.read_text(errors='replace')}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                sys.exit(f"server not healthy in 30 s:\n{log.read_text(errors='replace')}")
            time.sleep(0.05)
        yield base, process.pid
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def populate(client: httpx.Client, count: int, image_id: str) -> tuple[str, str]:
    """``count`` key pairs and one ACTIVE server; (a key pair name, the server id)."""
    for i in range(count):
        body = {"keypair": {"name": f"key-{i:04d}", "public_key": ed25519_line(f"k{i}@bench")}}
        r = client.post("/v2.1/os-keypairs", json=body, headers=headers("2.10"))
        r.raise_for_status()
    server = {"name": "vm", "imageRef": image_id, "flavorRef": "1", "key_name": "key-0000"}
    r = client.post("/v2.1/servers", json={"server": server}, headers=headers("2.1"))
    r.raise_for_status()
    server_id = str(r.json()["server"]["id"])
    deadline = time.monotonic() + 30
    while True:
        shown = client.get(f"/v2.1/servers/{server_id}", headers=headers("2.1")).json()
        if shown["server"]["status"] == "ACTIVE":
            return "key-0000", server_id
        if time.monotonic() > deadline:
            sys.exit(f"server {server_id} is {shown['server']['status']} after 30 s")
        time.sleep(0.05)


# What bench/side_by_side.py's servers carry (storm_seeding's cloud-config and metadata).
LIST_USER_DATA = base64.b64encode(USER_DATA).decode()


def add_servers(client: httpx.Client, count: int, image_id: str, key_name: str) -> None:
    """``count`` more servers in multi-creates of 100, each with the key pair, user data and
    metadata; returns once none is building."""
    made = 0
    while made < count:
        size = min(100, count - made)
        server = {
            "name": "listed",
            "imageRef": image_id,
            "flavorRef": "1",
            "key_name": key_name,
            "user_data": LIST_USER_DATA,
            "metadata": SERVER_METADATA,
            "min_count": size,
            "max_count": size,
            "return_reservation_id": True,
        }
        r = client.post("/v2.1/servers", json={"server": server}, headers=headers("2.10"))
        r.raise_for_status()
        made += size
    deadline = time.monotonic() + 300
    building = {"status": "BUILD", "limit": 1}
    while client.get("/v2.1/servers", params=building, headers=headers("2.10")).json()["servers"]:
        if time.monotonic() > deadline:
            sys.exit(f"servers still building after 300 s (of {count})")
        time.sleep(0.2)


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _ms(text: str) -> float:
    number, unit = re.fullmatch(r"([0-9.]+)(us|ms|s)", text).groups()  # type: ignore[union-attr]
    return float(number) * _UNITS[unit]


def cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` and its descendants (the serve process and its workers)."""
    total = 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    pending = [pid]
    while pending:
        current = pending.pop()
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
            for task in Path(f"/proc/{current}/task").iterdir():
                pending += [int(c) for c in (task / "children").read_text().split()]
    return total


def run_wrk(url: str, version: str, connections: int, seconds: int) -> dict[str, float]:
    command = [
        "wrk",
        "-t2",
        f"-c{connections}",
        f"-d{seconds}s",
        "--latency",
        "-H",
        f"X-Auth-Token: {TOKEN}",
        "-H",
        f"OpenStack-API-Version: compute {version}",
        url,
    ]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non_2xx:
        sys.exit(f"wrk saw {non_2xx[1]} error answers from {url}:\n{out}")
    rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", out)[1])  # type: ignore[index]
    count = int(re.search(r"(\d+) requests in", out)[1])  # type: ignore[index]
    p50 = _ms(re.search(r"\s50%\s+(\S+)", out)[1])  # type: ignore[index]
    p99 = _ms(re.search(r"\s99%\s+(\S+)", out)[1])  # type: ignore[index]
    return {"rps": rps, "p50": p50, "p99": p99, "count": count}


def sequential(
    client: httpx.Client, pid: int, requests: list[tuple[str, str, dict[str, Any] | None]]
) -> tuple[list[float], float]:
    """Each (method, path, body) in turn, on one connection; (sorted milliseconds, the
    server's CPU milliseconds per request)."""
    latencies = []
    cpu_before = cpu_seconds(pid)
    for method, path, body in requests:
        started = time.perf_counter()
        r = client.request(method, path, json=body, headers=headers("2.10"))
        latencies.append((time.perf_counter() - started) * 1000)
        r.raise_for_status()
    cpu_ms = (cpu_seconds(pid) - cpu_before) * 1000 / len(requests)
    return sorted(latencies), cpu_ms


def sequential_rows(client: httpx.Client, pid: int, count: int) -> list[tuple[str, ...]]:
    """``count`` imports of new ed25519 keys, then the deletes of the same key pairs."""
    lines = [ed25519_line(f"imp{i}@bench") for i in range(count)]
    names = [f"imp-{i:05d}" for i in range(count)]
    imports = [
        ("POST", "/v2.1/os-keypairs", {"keypair": {"name": name, "public_key": line}})
        for name, line in zip(names, lines, strict=True)
    ]
    deletes = [("DELETE", f"/v2.1/os-keypairs/{name}", None) for name in names]
    rows: list[tuple[str, ...]] = []
    for what, requests in (("import", imports), ("delete", deletes)):
        latencies, cpu_ms = sequential(client, pid, requests)
        median = latencies[len(latencies) // 2]
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        rows.append(
            (
                f"key pair {what}, sequential ({count})",
                "",
                f"{median:.2f} ms",
                f"{p99:.2f} ms",
                f"{cpu_ms:.2f} ms",
            )
        )
        print(rows[-1], flush=True)
    return rows


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--keypairs", type=int, default=100)
    parser.add_argument("--imports", type=int, default=300)
    parser.add_argument(
        "--servers",
        type=int,
        default=500,
        help="servers in the project for the server list rows (0: no list rows)",
    )
    parser.add_argument(
        "--keystone",
        metavar="AUTH_URL",
        help="authenticate through this Keystone (e.g. http://127.0.0.1:5000/v3) as its admin",
    )
    parser.add_argument(
        "--keystone-password",
        default=os.environ.get("KEYSTONE_ADMIN_PASSWORD", "peer-admin-secret"),
        help="the Keystone admin's password (default: ../shared/peers/keystone.sh's)",
    )
    parser.add_argument(
        "--sequential-only",
        action="store_true",
        help="only the sequential imports and deletes (no wrk rows; nothing is written)",
    )
    parser.add_argument("--hold", action="store_true", help="keep serving after set-up (profiling)")
    parser.add_argument("--write", type=Path, help="Markdown file to write the section into")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed")
    rows: list[tuple[str, ...]] = []
    with tempfile.TemporaryDirectory(prefix="cloudseed-bench-reads-") as tmp_name:
        tmp = Path(tmp_name)
        extra = ""
        if args.keystone:
            global TOKEN
            TOKEN = keystone_token(args.keystone, args.keystone_password)
            extra = keystone_section(args.keystone, args.keystone_password)
        config, image_id = prepare(tmp, extra)
        with (
            serving(config, args.workers, tmp / "server.log") as (base, pid),
            httpx.Client(base_url=base, timeout=30) as client,
        ):
            keypair, server_id = populate(client, args.keypairs, image_id)
            if args.servers and not args.sequential_only:
                add_servers(client, args.servers, image_id, keypair)
            if args.hold:
                print(f"serving at {base} (pid {pid}); key pair {keypair}, server {server_id}")
                with contextlib.suppress(KeyboardInterrupt):
                    signal.pause()
                return 0
            targets = [
                (f"key pair list ({args.keypairs}, 2.10)", "/v2.1/os-keypairs", "2.10"),
                ("key pair show (2.10)", f"/v2.1/os-keypairs/{keypair}", "2.10"),
                ("server show (2.1)", f"/v2.1/servers/{server_id}", "2.1"),
                ("server show (latest)", f"/v2.1/servers/{server_id}", "latest"),
            ]
            if args.servers and not args.sequential_only:
                listed = f"{args.servers + 1} servers, 2.10"
                targets += [
                    (f"server list (limit=100, {listed})", "/v2.1/servers?limit=100", "2.10"),
                    (
                        f"server list detail (limit=100, {listed})",
                        "/v2.1/servers/detail?limit=100",
                        "2.10",
                    ),
                ]
            for what, path, version in [] if args.sequential_only else targets:
                cpu_before = cpu_seconds(pid)
                result = run_wrk(base + path, version, args.connections, args.seconds)
                cpu_ms = (cpu_seconds(pid) - cpu_before) * 1000 / result["count"]
                rows.append(
                    (
                        what,
                        f"{result['rps']:,.0f} req/s",
                        f"{result['p50']:.2f} ms",
                        f"{result['p99']:.2f} ms",
                        f"{cpu_ms:.2f} ms",
                    )
                )
                print(rows[-1], flush=True)
            rows += sequential_rows(client, pid, args.imports)
    if args.sequential_only:
        return 0
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    table = [
        "| Measurement | Throughput | p50 | p99 | server CPU per request |",
        "|---|---:|---:|---:|---:|",
    ]
    table += ["| " + " | ".join(row) + " |" for row in rows]
    section = "\n".join(
        [
            "## Compute API read paths (cloudseed alone, "
            f"{'Keystone' if args.keystone else 'noauth2'}, SQLite)",
            "",
            f"`.venv/bin/python bench/api_reads.py --workers {args.workers} "
            + (f"--keystone {args.keystone} " if args.keystone else "")
            + f"--connections {args.connections} --seconds {args.seconds}` "
            f"(`make bench-api-reads`): wrk, {args.connections} connections, "
            f"{args.seconds} s per row, `cloudseed serve --workers {args.workers}`. "
            f"Machine: {cpu_model()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
            f"load average after the run {' '.join(load)}.",
            "",
            *table,
        ]
    )
    print(section)
    if args.write:
        write_section(
            args.write,
            f"<!-- bench:api-reads{'-keystone' if args.keystone else ''}:start -->",
            f"<!-- bench:api-reads{'-keystone' if args.keystone else ''}:end -->",
            section,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
