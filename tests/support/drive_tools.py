"""Reading config drive images with independent tools (never cloudseed's own readers):
xorriso and isoinfo for ISO 9660, mtools and fsck.vfat for FAT, and cloud-init's own
ConfigDriveReader on the extracted tree. Tests that need a missing tool skip."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

CLOUD_INIT_PYTHON = "/usr/bin/python3"
READER_SCRIPT = Path(__file__).with_name("cloudinit_configdrive.py")
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C", "MTOOLS_SKIP_CHECK": "1"}


def need(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t, path=ENV["PATH"]) is None]
    if missing:
        pytest.skip(f"missing {', '.join(missing)} (tools/debian-packages.sh installs them)")


def run(*argv: str | Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [str(a) for a in argv], capture_output=True, env=ENV, timeout=120, check=False
    )


def tree_of(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def extract_iso(image: Path, dest: Path) -> dict[str, bytes]:
    """The Rock Ridge tree, as xorriso extracts it."""
    need("xorriso")
    done = run("xorriso", "-osirrox", "on", "-indev", image, "-extract", "/", dest)
    assert done.returncode == 0, done.stderr.decode()
    for path in dest.rglob("*"):  # xorriso keeps the image's read-only modes
        path.chmod(0o755 if path.is_dir() else 0o644)
    return tree_of(dest)


def isoinfo_file(image: Path, path: str, *, names: str = "-R") -> bytes:
    """One file through isoinfo: ``-R`` Rock Ridge or ``-J`` Joliet names."""
    need("isoinfo")
    done = run("isoinfo", names, "-i", image, "-x", "/" + path)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


def iso_label(image: Path) -> str:
    need("isoinfo")
    for line in run("isoinfo", "-d", "-i", image).stdout.decode().splitlines():
        if line.startswith("Volume id:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError("no volume id")


def extract_vfat(image: Path, dest: Path) -> dict[str, bytes]:
    """The long-name tree, as mtools copies it out; fsck.vfat -n must find nothing wrong."""
    need("mcopy", "fsck.vfat")
    checked = run("fsck.vfat", "-n", image)
    assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()
    dest.mkdir(parents=True, exist_ok=True)
    listing = run("mdir", "-b", "-i", image, "::/")
    assert listing.returncode == 0, listing.stderr.decode()
    tops = [line.removeprefix("::/").rstrip("/") for line in listing.stdout.decode().split()]
    done = run("mcopy", "-s", "-n", "-i", image, *(f"::/{t}" for t in tops), dest)
    assert done.returncode == 0, done.stderr.decode()
    return tree_of(dest)


def vfat_label(image: Path) -> str:
    need("mlabel")
    done = run("mlabel", "-s", "-i", image, "::")
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode().split(" is ", 1)[1].strip()


def extract(image: Path, fmt: str, dest: Path) -> dict[str, bytes]:
    return extract_iso(image, dest) if fmt == "iso9660" else extract_vfat(image, dest)


def label(image: Path, fmt: str) -> str:
    return iso_label(image) if fmt == "iso9660" else vfat_label(image)


def cloud_init_reads(tree_dir: Path) -> dict[str, Any]:
    """What cloud-init's ConfigDriveReader (and the datasource's read_config_drive) make of
    an extracted drive; runs under Debian's python with Debian's cloud-init."""
    if (
        not os.path.exists(CLOUD_INIT_PYTHON)
        or run(CLOUD_INIT_PYTHON, "-c", "import cloudinit").returncode != 0
    ):
        pytest.skip("Debian's cloud-init is not installed (tools/debian-packages.sh)")
    done = run(CLOUD_INIT_PYTHON, "-I", "-B", READER_SCRIPT, tree_dir)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result
