"""What large user data costs a worker (issue 34): ``cloudseed serve --workers 1`` with
``[api] max_user_data_bytes`` at its ceiling, one server created with user data of each size
given (binary, the base64 text as given), then its guest's user data read through both trees;
the worker's VmRSS before, after the create, after the reads, and its peak (VmHWM).

One fresh state and process per size, so one size's memory never hides in another's; the
worker is the serve process's one child (or the serve process itself). The guest reads from
its own address on 127.0.0.0/24 (the service identifies it by source address).

    .venv/bin/python bench/large_user_data.py [--sizes 1048576,12386304] [--reads 20]
        [--write docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from report import cpu_model, write_section
from storm_host import free_port, load_average
from storm_server import stop, wait_until_answering
from storm_workers import rss_kib

START = "<!-- bench:large-user-data:start -->"
END = "<!-- bench:large-user-data:end -->"
CEILING = 16 * 1024 * 1024 - 256 * 1024
PATHS = ("/openstack/latest/user_data", "/latest/user-data")


def peak_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmHWM for {pid}")


def cloudseed(data_dir: Path, *args: str) -> str:
    argv = [sys.executable, "-m", "cloudseed", "--data-dir", str(data_dir), *args]
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=120).stdout


def worker_of(serve: subprocess.Popen[bytes]) -> int:
    children = Path(f"/proc/{serve.pid}/task/{serve.pid}/children").read_text().split()
    return int(children[0]) if children else serve.pid


def measure(size: int, reads: int, tmp: Path) -> dict[str, float]:
    data_dir = tmp / f"state-{size}"
    cloudseed(data_dir, "db", "sync")
    disk = tmp / "disk.raw"
    disk.write_bytes(b"\0" * 4096)
    cloudseed(data_dir, "image", "add", "img", "--file", str(disk), "--disk-format", "raw")
    flavor = cloudseed(data_dir, "flavor", "add", "tiny", "--vcpus", "1", "--ram", "64",
                       "--disk", "1", "-f", "value", "-c", "id").strip()  # fmt: skip
    network = cloudseed(
        data_dir, "network", "add", "loop", "--cidr", "127.0.0.0/24", "-f", "value", "-c", "id"
    ).strip()
    api_port, md_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDSEED_")}
    env["CLOUDSEED_API__MAX_USER_DATA_BYTES"] = str(CEILING)
    log_path = tmp / f"serve-{size}.log"
    with log_path.open("w") as log:
        serve = subprocess.Popen(
            [sys.executable, "-m", "cloudseed", "--data-dir", str(data_dir), "serve",
             "--api-listen", f"127.0.0.1:{api_port}",
             "--metadata-listen", f"127.0.0.1:{md_port}"],
            stdout=log, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    try:
        api_url = f"http://127.0.0.1:{api_port}"
        wait_until_answering(api_url + "/", serve, log_path)
        worker = worker_of(serve)
        image = httpx.get(api_url + "/v2.1/images", headers={"X-Auth-Token": "u:p"}).json()
        user_data = os.urandom(size)
        text = base64.b64encode(user_data).decode()
        assert len(text) <= CEILING, f"{size} bytes are {len(text)} characters of base64"
        with httpx.Client(base_url=api_url, headers={"X-Auth-Token": "u:p"}, timeout=120) as api:
            # The worker's imports and first request, before the baseline.
            api.get("/v2.1/servers")
            before = rss_kib(worker)
            created: list[float] = []
            for name in ("first", "second"):  # a second: what the first left is reused
                started = time.monotonic()
                r = api.post(
                    "/v2.1/servers",
                    headers={"OpenStack-API-Version": "compute 2.37"},
                    json={"server": {"name": name, "imageRef": image["images"][0]["id"],
                                     "flavorRef": flavor, "networks": [{"uuid": network}],
                                     "user_data": text}},
                )  # fmt: skip
                assert r.status_code == 202, r.text[:300]
                create_s = time.monotonic() - started
                server_id = r.json()["server"]["id"]
                while True:
                    server = api.get(f"/v2.1/servers/{server_id}").json()["server"]
                    if server["status"] == "ACTIVE":
                        break
                    time.sleep(0.05)
                created.append(rss_kib(worker))
            address = server["addresses"]["loop"][0]["addr"]
        after_create, after_second = created
        transport = httpx.HTTPTransport(local_address=address)
        started = time.monotonic()
        with httpx.Client(
            base_url=f"http://127.0.0.1:{md_port}", transport=transport, timeout=120
        ) as guest:
            for i in range(reads):
                served = guest.get(PATHS[i % 2])
                assert served.content == user_data, served.status_code
        read_s = (time.monotonic() - started) / reads
        after_reads = rss_kib(worker)
        return {
            "before": before,
            "after_create": after_create,
            "after_second": after_second,
            "after_reads": after_reads,
            "peak": peak_kib(worker),
            "create_s": create_s,
            "read_ms": read_s * 1000,
        }
    finally:
        stop(serve)


def report(args: argparse.Namespace, rows: dict[int, dict[str, float]]) -> str:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "## Large user data: a worker's memory (issue 34)",
        "",
        f"- Date: {now}; {os.cpu_count()} CPUs ({cpu_model()}), Python "
        f"{platform.python_version()}; load average {load_average()}",
        f"- Command: `.venv/bin/python bench/large_user_data.py --sizes "
        f"{args.sizes} --reads {args.reads}`",
        "- `cloudseed serve --workers 1` (fake driver, SQLite, no config drive), "
        f"`[api] max_user_data_bytes = {CEILING:,}`; two servers created one after the other "
        f"with the same random (binary) user data, then {args.reads} reads of it by the "
        "second's guest, alternating the OpenStack and EC2 trees",
        "",
        "| user data | base64 | RSS before | after a create | after a second | after reads "
        "| peak (VmHWM) | create | one read |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size, row in rows.items():
        chars = (size + 2) // 3 * 4
        lines.append(
            f"| {size / 2**20:.2f} MiB | {chars / 2**20:.2f} MiB | {row['before']:,.0f} KiB "
            f"| {row['after_create']:,.0f} KiB (+{row['after_create'] - row['before']:,.0f}) "
            f"| {row['after_second']:,.0f} KiB (+{row['after_second'] - row['before']:,.0f}) "
            f"| {row['after_reads']:,.0f} KiB (+{row['after_reads'] - row['before']:,.0f}) "
            f"| {row['peak']:,.0f} KiB (+{row['peak'] - row['before']:,.0f}) "
            f"| {row['create_s']:.2f} s | {row['read_ms']:.0f} ms |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default=f"{2**20},{CEILING // 4 * 3}")
    parser.add_argument("--reads", type=int, default=20)
    parser.add_argument("--write", type=Path)
    args = parser.parse_args()
    rows = {}
    with tempfile.TemporaryDirectory(prefix="cloudseed-large-user-data-") as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            rows[size] = measure(size, args.reads, Path(tmp))
    section = report(args, rows)
    print(section)
    if args.write is not None:
        write_section(args.write, START, END, section)


if __name__ == "__main__":
    main()
