"""What this machine offers guests, as a driver reports it (``Driver.capacity``): its CPUs, its
memory (``/proc/meminfo``) and the free space of the file system guests' files go to."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

from cloudseed.compute.interfaces import Capacity


def machine_capacity(root: Path, *, hypervisor_type: str) -> Capacity:
    """This machine's capacity, the disk being the free space where ``root`` is (or would be)."""
    return Capacity(
        vcpus=os.cpu_count() or 1,
        memory_mb=_memory_mb(),
        disk_gb=_free_gb(root),
        hypervisor_type=hypervisor_type,
        hypervisor_hostname=socket.gethostname(),
    )


def _memory_mb() -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _free_gb(path: Path) -> int:
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    return shutil.disk_usage(existing).free // (1 << 30)
