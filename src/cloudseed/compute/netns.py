"""Network namespaces as the qemu driver uses them: made and removed with ``ip netns``, entered
by one short-lived thread of ours (``inside``) to open what must belong to the namespace (a
tap, a listening socket), and emptied of their processes before they go.

Only namespaces named ``cloudseed-...`` are ever touched; the host's own interfaces, routes and
firewall are never changed (every ``ip`` and ``nft`` call names a namespace).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import signal
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from cloudseed.compute.errors import DriverError
from cloudseed.programs.errors import ProgramFailed
from cloudseed.programs.run import run, which

T = TypeVar("T")

NETNS_DIR = Path("/run/netns")
PREFIX = "cloudseed-"
CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000
KILL_TIMEOUT = 10.0
TIMEOUT = 30.0


def _checked(name: str) -> str:
    if not name.startswith(PREFIX) or "/" in name or len(name) > 200:
        raise DriverError(f"refusing to touch network namespace {name!r} (not cloudseed's)")
    return name


def names(prefix: str) -> list[str]:
    """The namespaces whose names start with ``prefix`` (a cloudseed prefix)."""
    _checked(prefix)
    try:
        return sorted(n for n in os.listdir(NETNS_DIR) if n.startswith(prefix))
    except FileNotFoundError:
        return []


def exists(name: str) -> bool:
    return (NETNS_DIR / _checked(name)).exists()


def create(name: str) -> None:
    _ip("netns", "add", _checked(name))
    ip(name, "link", "set", "lo", "up")


def delete(name: str) -> None:
    """Kill whatever runs in the namespace, then remove it (its devices go with it: taps,
    veths and the bridge). Gone already is fine."""
    if not exists(name):
        return
    kill(pids(name))
    with contextlib.suppress(ProgramFailed):
        _ip("netns", "delete", name)
    if exists(name):
        raise DriverError(f"network namespace {name} could not be removed")


def pids(name: str) -> list[int]:
    """The processes whose network namespace is ``name``."""
    result = run(["ip", "netns", "pids", _checked(name)], timeout=TIMEOUT, check=False)
    return [int(p) for p in result.stdout.split() if p.isdigit()]


def ip(name: str, *args: str) -> str:
    """``ip -n NAME ARGS``: the output."""
    return _ip("-n", _checked(name), *args)


def sysctl(name: str, key: str, value: str) -> None:
    """Set ``key`` (``net/ipv4/ip_forward``) inside the namespace."""
    path = "/proc/sys/" + key.replace(".", "/")

    def write() -> None:
        # What /proc/sys/net opens is the network namespace of the thread that opens it.
        with open(path, "w", encoding="ascii") as fh:
            fh.write(value)

    inside(name, write)


def nft(name: str, script: str) -> None:
    """Load ``script`` with ``nft -f -`` inside the namespace (atomically: all or nothing)."""
    if which("nft") is None:
        raise DriverError("bridged networks need nft (Debian: nftables)")
    run(["ip", "netns", "exec", _checked(name), "nft", "-f", "-"], input=script.encode())


def _ip(*args: str) -> str:
    try:
        return run(["ip", *args], timeout=TIMEOUT).stdout.decode("utf-8", "replace")
    except ProgramFailed as exc:
        raise DriverError(exc.message) from exc


def inside(name: str, fn: Callable[[], T]) -> T:
    """``fn()`` run by a new thread that entered the namespace first: what it opens (sockets,
    taps) belongs to the namespace; the rest of the process stays where it is. The thread
    ends with ``fn``."""
    outcome: dict[str, object] = {}

    def enter_and_run() -> None:
        try:
            fd = os.open(NETNS_DIR / _checked(name), os.O_RDONLY | os.O_CLOEXEC)
            try:
                _setns(fd)
            finally:
                os.close(fd)
            outcome["value"] = fn()
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=enter_and_run, name="cloudseed-netns", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        error = outcome["error"]
        assert isinstance(error, BaseException)
        if isinstance(error, OSError):
            raise DriverError(f"in network namespace {name}: {error}") from error
        raise error
    return outcome["value"]  # type: ignore[return-value]


def _setns(fd: int) -> None:
    setns = getattr(os, "setns", None)  # Python 3.12+
    if setns is not None:
        setns(fd, CLONE_NEWNET)
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


def open_tap(name: str, device: str) -> int:
    """A new tap ``device`` in the namespace, and the file descriptor QEMU reads and writes
    it through. The tap lives as long as a descriptor does: when QEMU (the last holder) ends,
    the kernel removes it, so a dead guest leaves no device behind."""

    def make() -> int:
        fd = os.open("/dev/net/tun", os.O_RDWR | os.O_CLOEXEC)
        try:
            request = struct.pack("16sH", device.encode(), IFF_TAP | IFF_NO_PI)
            fcntl.ioctl(fd, TUNSETIFF, request)
        except BaseException:
            os.close(fd)
            raise
        return fd

    return inside(name, make)


def listening_socket(
    name: str, address: str, port: int, *, device: str | None = None, hop_limit: int = 0
) -> socket.socket:
    """A TCP socket listening on ``address``:``port`` in the namespace (a link-local
    ``address`` on ``device``). ``hop_limit`` (``[metadata] hop_limit``) is the TTL or hop
    limit of every answer sent on its connections (they inherit it)."""

    def make() -> socket.socket:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if hop_limit:
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_UNICAST_HOPS, hop_limit)
                else:
                    sock.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, hop_limit)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                scope = socket.if_nametoindex(device) if device else 0
                sock.bind((address, port, 0, scope))
            else:
                sock.bind((address, port))
            sock.listen(128)
        except BaseException:
            sock.close()
            raise
        return sock

    return inside(name, make)


def kill(pids: Iterable[int]) -> None:
    """SIGKILL each process and wait (briefly) until it is gone."""
    wanted = [p for p in pids if p > 1 and p != os.getpid()]
    for pid in wanted:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + KILL_TIMEOUT
    for pid in wanted:
        while _alive(pid) and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    break
            time.sleep(0.02)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][:1]
    except (OSError, IndexError):
        return False
    return state != "Z"


def processes_in(directory: Path) -> list[int]:
    """The processes whose working directory is ``directory``."""
    target = directory.resolve()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "cwd").resolve() == target:
                found.append(int(entry.name))
        except (OSError, RuntimeError):
            continue  # gone meanwhile, or not ours to look at
    return found
