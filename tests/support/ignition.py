"""Debian's Ignition (2.14, package ``ignition``) run as a Fedora CoreOS or Flatcar guest runs
it in its initramfs: ``ignition -platform openstack -stage fetch``, which reads the user's
config from ``/dev/disk/by-label/config-2`` (or ``CONFIG-2``) and from
``http://169.254.169.254/openstack/latest/user_data`` at once, takes whichever answers first,
and writes it to ``-config-cache`` (docs/metadata.md#ignition).

Neither place can be pointed elsewhere (both are compiled in), so each run gets a world of its
own, made with ``unshare`` and ``ip netns`` (root):

- a network namespace: the test's (where 169.254.169.254 is on ``lo``, answered by a relay in
  front of cloudseed's metadata service: tests/support/metadata_relay.py), or a new empty one
  when the drive alone must answer;
- a private mount namespace whose ``/dev`` is a tmpfs with the few device nodes the run uses
  (bound from the real ``/dev``) and ``disk/by-label/config-2`` linking to a read-only loop
  device of the drive image, as udev would make it; nothing outside the namespace sees it;
- when the kernel has no ``iso9660`` or ``vfat`` filesystem (a container's or a microVM's may
  not: ``/proc/filesystems``), ``mount -t auto`` still probes the image with libblkid, and its
  filesystem helpers ``/sbin/mount.iso9660`` and ``/sbin/mount.vfat`` (an overlay on
  ``/usr/sbin`` in that namespace) hand the mount to FUSE (``fuseiso``, ``fusefat``); Ignition's
  own code path (its ``mount`` command, the read, its unmount) is the same.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BINARY = Path("/usr/lib/dracut/modules.d/30ignition/ignition")
FETCH_TIMEOUT = "20s"  # Ignition's own bound on its HTTP retries (its default is 2 minutes)
RUN_TIMEOUT = 60  # seconds for one run; normally well under one

# What the FUSE helpers need, by the kernel filesystem they stand in for.
FUSE_HELPERS = {"iso9660": "fuseiso", "vfat": "fusefat"}

# Runs as root inside the new mount namespace: $1 a scratch directory, $2 the loop device
# (or "-"), $3 its label, $4 a directory of mount helpers (or "-"); then Ignition's argv.
SANDBOX = r"""
set -eu
work=$1 loop=$2 label=$3 helpers=$4
shift 4
dev=$work/dev
mkdir -p "$dev"
mount -t tmpfs -o mode=0755 cloudseed-dev "$dev"
nodes="null zero random urandom"
[ -e /dev/fuse ] && nodes="$nodes fuse"
[ "$loop" != - ] && nodes="$nodes ${loop#/dev/}"
for node in $nodes; do
    : > "$dev/$node"
    mount --bind "/dev/$node" "$dev/$node"
done
if [ "$loop" != - ]; then
    mkdir -p "$dev/disk/by-label"
    ln -s "$loop" "$dev/disk/by-label/$label"
fi
mount --move "$dev" /dev
if [ "$helpers" != - ]; then
    mount -t overlay cloudseed-sbin -o "lowerdir=$helpers:/usr/sbin" /usr/sbin
fi
exec "$@"
"""


def missing_filesystems() -> list[str]:
    """The drive filesystems this kernel cannot mount itself."""
    known = Path("/proc/filesystems").read_text().split()
    return [fs for fs in FUSE_HELPERS if fs not in known]


def problem() -> str | None:
    """Why Ignition cannot be run here, or None."""
    if os.geteuid() != 0:
        return "running Ignition in its own namespaces needs root"
    if not BINARY.is_file():
        return f"Debian's ignition package is not installed ({BINARY}): apt-get install ignition"
    for tool in ("unshare", "ip", "losetup", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} is missing (Debian: util-linux, mount, iproute2)"
    for fs in missing_filesystems():
        helper = FUSE_HELPERS[fs]
        if shutil.which(helper) is None or not Path("/dev/fuse").exists():
            return (
                f"the kernel has no {fs} filesystem and FUSE's {helper} is missing "
                f"(Debian: {helper})"
            )
    return None


def _helpers(work: Path) -> Path | None:
    """``mount.<fs>`` helpers for the filesystems the kernel lacks, or None."""
    missing = missing_filesystems()
    if not missing:
        return None
    directory = work / "mount-helpers"
    directory.mkdir(parents=True, exist_ok=True)
    commands = {
        # mount(8) calls: mount.<type> SPEC DIR [-o OPTIONS...]; both are read-only anyway.
        "iso9660": 'exec fuseiso -p "$1" "$2"',
        "vfat": 'exec fusefat -o ro "$1" "$2"',
    }
    for fs in missing:
        helper = directory / f"mount.{fs}"
        helper.write_text(f"#!/bin/sh\n{commands[fs]}\n")
        helper.chmod(0o755)
    return directory


@dataclass
class Fetch:
    returncode: int
    log: str
    config: dict[str, Any] | None  # the config cache Ignition wrote, parsed
    seconds: float

    @property
    def from_metadata_service(self) -> bool:
        return "GET result: OK" in self.log

    @property
    def from_config_drive(self) -> bool:
        return "[finished] mounting config drive" in self.log


def fetch(work: Path, *, namespace: str | None, drive: Path | None = None) -> Fetch:
    """One fetch stage in its own namespaces: inside ``namespace`` (``ip netns``) or, when
    None, a new empty network namespace; with ``drive`` as the config-2 disk, if given."""
    work.mkdir(parents=True, exist_ok=True)
    cache = work / "ignition.json"
    loop = None
    try:
        if drive is not None:
            loop = subprocess.run(
                ["losetup", "--find", "--show", "--read-only", str(drive)],
                capture_output=True,
                text=True,
                check=True,
                timeout=30,
            ).stdout.strip()
        helpers = _helpers(work) if drive is not None else None
        enter = ["ip", "netns", "exec", namespace] if namespace else []
        unshare = ["unshare", "--mount", "--propagation", "private"]
        if namespace is None:
            unshare.append("--net")
        argv = [
            *enter,
            *unshare,
            "sh",
            "-c",
            SANDBOX,
            "ignition-sandbox",
            str(work),
            loop or "-",
            "config-2",
            str(helpers) if helpers else "-",
            str(BINARY),
            "-platform",
            "openstack",
            "-stage",
            "fetch",
            "-config-cache",
            str(cache),
            "-state-file",
            str(work / "state"),
            "-fetch-timeout",
            FETCH_TIMEOUT,
            "-root",
            str(work / "root"),
            "-log-to-stdout",
        ]
        started = time.monotonic()
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            cwd=work,
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "TMPDIR": str(work), "LC_ALL": "C"},
            check=False,
        )
        seconds = time.monotonic() - started
    finally:
        if loop:
            subprocess.run(["losetup", "--detach", loop], check=False, timeout=30)
    config = json.loads(cache.read_text()) if cache.exists() else None
    return Fetch(done.returncode, done.stdout + done.stderr, config, seconds)
