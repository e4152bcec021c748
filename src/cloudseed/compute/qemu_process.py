"""One guest's QEMU process: start it, ask it over QMP, find it again by its pid file, stop it.

The process is found through files in the instance directory (``qemu.pid``, ``qmp.sock``), not
through objects in memory, so any worker process of the service can stop or restart a guest
another one started. A pid is only believed while ``/proc/<pid>/cwd`` is still that instance's
directory, so a recycled pid is never signalled.

QEMU runs in its own session (a Ctrl-C in the service's terminal is the service's to handle),
and under ``setpriv --pdeathsig KILL`` where available: should the service die without
stopping its guests, the kernel ends them. (The "parent" that must die is the thread that
started QEMU; the service's operation threads live as long as the service.)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from cloudseed.compute.errors import DriverError
from cloudseed.compute.qemu_argv import InstanceFiles

log = logging.getLogger(__name__)

QMP_TIMEOUT = 10.0
KILL_TIMEOUT = 10.0


class QemuProcesses:
    """Starts guests' QEMU processes and reaps the ones this process started."""

    def __init__(self, *, start_timeout: float) -> None:
        self.start_timeout = start_timeout
        self._children: dict[Path, subprocess.Popen[bytes]] = {}
        self._lock = threading.Lock()
        self._setpriv = shutil.which("setpriv")

    def start(
        self, files: InstanceFiles, argv: list[str], *, pass_fds: tuple[int, ...] = ()
    ) -> int:
        """Start QEMU and wait until it answers on QMP; its pid. ``pass_fds``: descriptors
        QEMU inherits (the taps of bridged ports)."""
        for stale in (files.pidfile, files.qmp_socket):
            stale.unlink(missing_ok=True)
        (files.directory / "qemu.cmd").write_text(" ".join(argv) + "\n")
        prefix = [self._setpriv, "--pdeathsig", "KILL", "--"] if self._setpriv else []
        with files.qemu_log.open("ab") as stderr:
            child = subprocess.Popen(
                [*prefix, *argv],
                cwd=files.directory,
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=stderr,
                start_new_session=True,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"},
                pass_fds=pass_fds,
            )
        with self._lock:
            self._children[files.directory] = child
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if child.poll() is not None:
                raise DriverError(
                    f"QEMU exited with status {child.returncode} at start: {_tail(files.qemu_log)}"
                )
            if files.qmp_socket.exists():
                try:
                    qmp(files, "query-status")
                    return child.pid
                except OSError:
                    pass
            time.sleep(0.05)
        self.kill(files)
        raise DriverError(
            f"QEMU did not come up within {self.start_timeout:g} s: {_tail(files.qemu_log)}"
        )

    def pid(self, files: InstanceFiles) -> int | None:
        """The guest's QEMU pid while it runs, else None."""
        self.reap()
        try:
            pid = int(files.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None
        try:
            if Path(f"/proc/{pid}/cwd").resolve() != files.directory.resolve():
                return None
        except OSError:  # gone, or a zombie of another worker (no cwd any more)
            self._collect(pid)
            return None
        return pid

    def running(self, files: InstanceFiles) -> bool:
        return self.pid(files) is not None

    def powerdown(self, files: InstanceFiles, *, timeout: float) -> bool:
        """Press the ACPI power button and wait up to ``timeout`` s for the guest to power
        off (QEMU then exits); whether it did."""
        if not self.running(files):
            return True
        try:
            qmp(files, "system_powerdown")
        except OSError:
            return not self.running(files)
        return self.wait_gone(files, timeout)

    def kill(self, files: InstanceFiles) -> None:
        """Switch the guest off: SIGTERM (QEMU exits at once, closing its files cleanly),
        then SIGKILL if that was not enough. Returns once the process is gone."""
        pid = self.pid(files)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            if not self.wait_gone(files, KILL_TIMEOUT):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                if not self.wait_gone(files, KILL_TIMEOUT):
                    raise DriverError(f"QEMU process {pid} does not stop.")
        with self._lock:
            child = self._children.pop(files.directory, None)
        if child is not None:
            if child.poll() is None:  # started but never wrote its pid file
                child.kill()
            child.wait(KILL_TIMEOUT)
        _kill_relays(files.directory)

    def wait_gone(self, files: InstanceFiles, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.running(files):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
        return True

    def _collect(self, pid: int) -> None:
        """Wait for our child ``pid`` once it has no cwd: it is exiting (killed by another
        worker, say) but may not be a zombie yet, so ``reap`` could still miss it."""
        with self._lock:
            found = [d for d, child in self._children.items() if child.pid == pid]
            children = [self._children.pop(d) for d in found]
        for child in children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(KILL_TIMEOUT)

    def close(self) -> None:
        """Collect every child this process started, ending those still running: called once
        the driver has switched its guests off. A child another worker killed may still be
        exiting, with its pid file already gone, so ``reap`` alone could leave it behind."""
        with self._lock:
            children = list(self._children.values())
            self._children.clear()
        for child in children:
            try:
                child.wait(KILL_TIMEOUT)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(KILL_TIMEOUT)

    def reap(self) -> None:
        """Collect the exit status of our children that ended (by themselves or through
        another worker), so none stays a zombie."""
        with self._lock:
            ended = [d for d, child in self._children.items() if child.poll() is not None]
            for directory in ended:
                del self._children[directory]


def qmp(files: InstanceFiles, command: str, **arguments: Any) -> Any:
    """Run one QMP command and return its result; OSError when QEMU is not there."""
    # The socket is reached through /proc/self/fd: its full path may be longer than the
    # 108 bytes a UNIX socket address can hold.
    directory = os.open(files.directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(QMP_TIMEOUT)
            sock.connect(f"/proc/self/fd/{directory}/{files.qmp_socket.name}")
            stream = sock.makefile("rwb")
            _read_reply(stream)  # the greeting
            for name, args in (("qmp_capabilities", {}), (command, arguments)):
                stream.write(json.dumps({"execute": name, "arguments": args}).encode() + b"\n")
                stream.flush()
                result = _read_reply(stream)
            return result
    finally:
        os.close(directory)


def _read_reply(stream: Any) -> Any:
    while True:
        line = stream.readline()
        if not line:
            raise ConnectionResetError("QMP connection closed")
        message = json.loads(line)
        if "event" in message:
            continue
        if "error" in message:
            raise DriverError(f"QMP: {message['error'].get('desc', message['error'])}")
        return message.get("return", message.get("QMP"))


def _kill_relays(directory: Path) -> None:
    """End the metadata relays QEMU started for this guest (they run in its directory): one
    caught in the middle of a request would otherwise live on until its own timeout."""
    target = directory.resolve()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "cwd").resolve() == target:
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, RuntimeError):
            continue  # gone meanwhile, or not ours to look at


def _tail(path: Path, limit: int = 2000) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return text[-limit:].strip() or "(empty log)"
