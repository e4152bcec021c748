"""The qemu driver's SSH forwards on disk: which host port each guest of this host keeps
(``instances/<uuid>/ssh-forward.json``), chosen when the guest starts. The choice itself is
IO-free (``ssh_forward.py``); this module asks the host which ports are free and keeps the
answer, so a guest's port stays the same across reboots and stop/start while it is free."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from collections.abc import Mapping
from pathlib import Path

from cloudseed.compute import ssh_forward
from cloudseed.compute.qemu_argv import InstanceFiles
from cloudseed.compute.ssh_forward import Forward

log = logging.getLogger(__name__)


class SshForwards:
    def __init__(self, root: Path, *, address: str, ports: range, ports_setting: str) -> None:
        self.root = root
        self.address = address
        self.ports = ports
        self.ports_setting = ports_setting  # as the operator wrote it, for the log
        # One guest's choice at a time in this process: two starts must not take one port.
        self._lock = threading.Lock()

    def kept(self, files: InstanceFiles) -> Forward | None:
        """The forward the guest was last started with (None: none, or it opted out)."""
        kept = _read(files.ssh_forward)
        return kept[0] if kept is not None and kept[1] else None

    def choose(
        self, files: InstanceFiles, metadata: Mapping[str, str], refused: set[int]
    ) -> Forward | None:
        """The forward to start the guest with (None: not opted in, or no port free), kept
        in its directory. The port stays the guest's when it opts out, for a later opt-in;
        ``refused`` are ports QEMU could not bind on an earlier attempt."""
        kept = _read(files.ssh_forward)
        if not ssh_forward.wanted(metadata):
            if kept is not None and kept[1]:
                _write(files.ssh_forward, kept[0], enabled=False)
            return None
        previous = kept[0].port if kept is not None and kept[0].port not in refused else None
        with self._lock:
            port = ssh_forward.choose_port(
                self.ports,
                previous=previous,
                reserved=self._reserved(files) | refused,
                is_free=lambda p: _port_free(self.address, p),
            )
            if port is None:
                # The guest matters more than a way into it: it starts, without a forward
                # (the CLI then says it has none).
                log.warning(
                    "no free port in [qemu] ssh_forward_ports %s for the SSH forward of %s",
                    self.ports_setting,
                    files.directory.name,
                )
                return None
            forward = Forward(self.address, port)
            _write(files.ssh_forward, forward, enabled=True)
        return forward

    def _reserved(self, files: InstanceFiles) -> set[int]:
        """The ports other guests of this host keep (running or not)."""
        if not self.root.is_dir():
            return set()
        ports = set()
        for directory in self.root.iterdir():
            if directory != files.directory and directory.is_dir():
                kept = _read(directory / files.ssh_forward.name)
                if kept is not None:
                    ports.add(kept[0].port)
        return ports


def _read(path: Path) -> tuple[Forward, bool] | None:
    """The forward kept in ``path`` and whether the guest was last started with it."""
    try:
        data = json.loads(path.read_text())
        return Forward(str(data["address"]), int(data["port"])), bool(data["enabled"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # none yet (or a torn file: a new port is chosen)


def _write(path: Path, forward: Forward, *, enabled: bool) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(
        json.dumps({"address": forward.address, "port": forward.port, "enabled": enabled})
    )
    os.replace(partial, path)


def _port_free(address: str, port: int) -> bool:
    """Whether QEMU could listen on ``address:port`` now. SO_REUSEADDR as slirp sets it, so a
    port whose old connections are in TIME_WAIT (a guest just switched off) counts as free."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((address, port))
        except OSError:
            return False
    return True
