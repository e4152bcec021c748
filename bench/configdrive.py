"""Config drives built per second: cloudseed in-process (ISO 9660 through pycdlib, VFAT through
its own writer) against Nova's way (the tree written out as temporary files, then a
``genisoimage`` subprocess), over the same tree, side by side in one run.

    .venv/bin/python bench/configdrive.py [--seconds 3] [--write docs/benchmarks.md]

Two trees: a typical instance (every OpenStack version, the EC2 tree, a key, 4 KiB of user
data, static vendordata, two personality files) and the same with 1,000 files. Each
measurement repeats builds into a scratch directory for ``--seconds`` and reports builds per
second and the median time of one build. No database and no server are involved: the drive
builder's own work is what is measured (the instance record is a fixed GuestFacts).

``--write`` replaces the section between ``<!-- bench:configdrive:start -->`` and
``<!-- bench:configdrive:end -->`` of the Markdown file, leaving the rest as it is.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from report import cpu_model, write_section

from cloudseed.configdrive import contents, iso9660, vfat
from cloudseed.configdrive.service import write_drive
from cloudseed.metadata.facts import GuestFacts, KeyFacts, PortFacts

START, END = "<!-- bench:configdrive:start -->", "<!-- bench:configdrive:end -->"
QUIET_LOCK = Path("/tmp/cloudseed-quiet.lock")


def facts() -> GuestFacts:
    key = "ssh-ed25519 " + base64.b64encode(os.urandom(51)).decode() + " bench"
    return GuestFacts(
        uuid="6f2c1f55-2b1e-4a43-9b8e-3b3c8f0d9a10",
        ec2_number=42,
        project_id="proj",
        user_id="alice",
        name="bench",
        hostname="bench",
        launch_index=0,
        availability_zone="nova",
        image_ref="0a1b2c3d-0000-4000-8000-000000000000",
        flavor_name="m1.small",
        reservation_id="r-00000001",
        key_name="bench",
        key_data=key,
        keys=(KeyFacts("bench", "ssh", key),),
        meta=(("role", "web"),),
        user_data=base64.b64encode(b"#cloud-config\n" + b"# padding\n" * 408).decode(),
        boot_roles="member",
        password="",
        config_drive=True,
        ports=(
            PortFacts(
                port_id="11111111-2222-3333-4444-555555555555",
                network_id="net",
                mac="fa:16:3e:00:00:01",
                mtu=1450,
                cidr="10.0.0.0/24",
                gateway="10.0.0.1",
                dns=("10.0.0.2",),
                addresses=("10.0.0.5",),
            ),
        ),
    )


def tree(files: int) -> dict[str, bytes]:
    data = contents.DriveData(
        dhcp_domain="novalocal",
        vendor_data_json=b'{"cloud-init":"#cloud-config\\n"}',
        vendor_data2_json=b'{"static":{"cloud-init":"#cloud-config\\n"}}',
        admin_pass="Bench1234567",
        files=tuple(
            (f"/etc/bench/{i}.conf", f"setting = {i}\n".encode() * 8) for i in range(files)
        ),
    )
    return contents.drive_tree(facts(), data)


def in_process(fmt: str, *, durable: bool) -> Callable[[Mapping[str, bytes], Path], None]:
    writer = {"iso9660": iso9660.write, "vfat": vfat.write}[fmt]

    def build(files: Mapping[str, bytes], out: Path) -> None:
        if durable:
            write_drive(files, out, fmt)  # temp file, fsync, rename: what a build does
        else:
            with out.open("wb") as fh:
                writer(files, fh)

    return build


def nova_way(files: Mapping[str, bytes], out: Path) -> None:
    """What Nova's ConfigDriveBuilder does for iso9660: files under a temporary directory,
    then genisoimage with Nova's arguments."""
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        for path, content in files.items():
            target = Path(tmp, path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        subprocess.run(
            [
                "genisoimage",
                "-o",
                str(out),
                "-ldots",
                "-allow-lowercase",
                "-allow-multidot",
                "-l",
                "-publisher",
                "bench",
                "-quiet",
                "-J",
                "-r",
                "-V",
                "config-2",
                tmp,
            ],
            check=True,
            timeout=120,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"},
        )


def measure(
    build: Callable[[Mapping[str, bytes], Path], None],
    files: Mapping[str, bytes],
    scratch: Path,
    seconds: float,
) -> tuple[float, float, int, int]:
    """(builds per second, median seconds per build, builds, image bytes)."""
    out = scratch / "disk.config"
    build(files, out)  # warm-up: imports, page cache
    times: list[float] = []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds or len(times) < 3:
        t0 = time.perf_counter()
        build(files, out)
        times.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - start
    return len(times) / elapsed, statistics.median(times), len(times), out.stat().st_size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seconds",
        type=float,
        default=3.0,
        help="how long each measurement repeats builds (default 3)",
    )
    parser.add_argument(
        "--write",
        type=Path,
        metavar="PATH",
        help="replace the config drive section of this Markdown file",
    )
    args = parser.parse_args(argv)
    while QUIET_LOCK.exists():  # someone is measuring something else
        print(f"waiting: {QUIET_LOCK} exists", file=sys.stderr)
        time.sleep(10)
    ways: list[tuple[str, Callable[[Mapping[str, bytes], Path], None]]] = [
        (
            "cloudseed iso9660, in-process, as built (temp file, fsync, rename)",
            in_process("iso9660", durable=True),
        ),
        ("cloudseed iso9660, in-process, no fsync", in_process("iso9660", durable=False)),
        (
            "cloudseed vfat, in-process, as built (temp file, fsync, rename)",
            in_process("vfat", durable=True),
        ),
        ("cloudseed vfat, in-process, no fsync", in_process("vfat", durable=False)),
    ]
    if shutil.which("genisoimage"):
        ways.append(("Nova's way: temp tree + genisoimage (no fsync)", nova_way))
    else:
        print(
            "genisoimage missing: Nova's way not measured (tools/debian-packages.sh)",
            file=sys.stderr,
        )
    rows = []
    with tempfile.TemporaryDirectory(prefix="cloudseed-bench-") as tmp:
        for label, count in (("typical", 2), ("1,000 files", 1000)):
            files = tree(count)
            size = sum(len(v) for v in files.values())
            t0 = time.perf_counter()
            for _ in range(20):
                tree(count)
            render_ms = (time.perf_counter() - t0) / 20 * 1000
            rows.append(
                f"| {label}: render the tree (contents.py) | — | {render_ms:.2f} ms "
                f"| {len(files)} files, {size / 1024:,.0f} KiB |"
            )
            for name, build in ways:
                print(f"{label}: {name} ...", file=sys.stderr)
                rate, median, builds, image = measure(build, files, Path(tmp), args.seconds)
                rows.append(
                    f"| {label}: {name} | {rate:,.1f} | {median * 1000:,.1f} ms | "
                    f"{builds} builds, image {image / 1024 / 1024:,.2f} MiB |"
                )
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = shlex.join(
        [
            os.path.relpath(sys.executable),
            os.path.relpath(sys.argv[0]),
            *(argv if argv is not None else sys.argv[1:]),
        ]
    )
    section = "\n".join(
        [
            "## Config drives built per second",
            "",
            f"- Date: {now}",
            f"- Machine: {os.cpu_count()} CPUs ({cpu_model()}), {platform.system()} "
            f"{platform.release()}, Python {platform.python_version()}",
            "- What: one drive after another into a scratch directory, one thread; the tree is "
            'rendered once per tree (its cost is the first row of each group). "As built" is '
            "what cloudseed does for an instance; Nova's way never fsyncs, so the no-fsync rows "
            "compare like with like. The typical tree is every OpenStack version, the EC2 "
            "tree, a key, 4 KiB of user data, static vendordata and two personality files.",
            f"- Command: `{command}`",
            "",
            "| Build | Drives/s | Median per drive | Notes |",
            "|---|---:|---:|---|",
            *rows,
            "",
        ]
    )
    print(section)
    if args.write is not None:
        write_section(args.write, START, END, section)
        print(f"wrote the config drive section of {args.write}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
