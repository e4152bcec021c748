"""The listening sockets of ``cloudseed serve`` and ``cloudseed nova-metadata``: what each
listener is, how its port is reserved and how each worker listens on it (TCP_NODELAY,
SO_REUSEPORT, the metadata service's hop limit), how a failure to bind reads, and the open
files limit the workers need.
"""

from __future__ import annotations

import logging
import resource
import socket
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from cloudseed.errors import ConfigError
from cloudseed.settings import Settings
from cloudseed.types import ASGIApp

if TYPE_CHECKING:
    from cloudseed.db.engines import Database

log = logging.getLogger(__name__)

# Listening sockets per listener in each worker, all in the port's SO_REUSEPORT group. uvloop's
# libuv accepts one connection per socket and event loop iteration (libuv 1.45 stopped
# accepting in a loop), and an iteration of a worker answering a storm takes milliseconds: it
# accepted wrk's 128 new connections over 0.8 s, and their first requests waited that long (a
# storm of 2,000 guests loaded ahead: p99 83-642 ms, max 0.35-0.81 s; with 16 sockets p99
# 47-57 ms, max 73-154 ms; docs/benchmarks.md, issue 36). Not dup()s of one socket: every
# copy wakes for each new connection and all but one accept() fail, which cost 80-110 µs
# more per connection arriving alone; each socket of the group has a queue of its own.
ACCEPTING_SOCKETS = 16


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int
    # The app, given the worker's API database: every app of a worker shares it (its pool,
    # and its announcer, so each hears at once what another committed). None when no
    # listener of the worker uses cloudseed's databases (``uses_api_db``).
    factory: Callable[[Settings, Database | None], ASGIApp]
    ip_ttl: int = 0  # 0: the system's default
    kind: str = "api"  # the metrics' listener label: api or metadata
    # False for an app with databases of its own (the Nova drop-in, nova_metadata/): a worker
    # whose listeners all say so opens no cloudseed database.
    uses_api_db: bool = True


def bind(
    host: str, port: int, *, ip_ttl: int = 0, reuse_port: bool = False, listen: bool = True
) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP stated explicitly: asyncio only disables Nagle's algorithm on sockets that say
    # they are TCP, and without that every small response on a kept-alive connection waits
    # ~40 ms for the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if ip_ttl:
            # EC2's hop limit: accepted connections inherit the listening socket's TTL, so
            # answers die after ip_ttl hops (1: they never get past the first router).
            set_hop_limit(sock, ip_ttl)
        sock.bind((host, port))
        if listen:
            sock.listen(2048)
    except BaseException:
        sock.close()  # a refused bind leaves no socket behind
        raise
    sock.set_inheritable(True)
    return sock


def set_hop_limit(sock: Any, hops: int) -> None:
    """Give ``sock`` (a listening socket, or one connection: the metadata service's token
    answer, 2.109) the IP TTL and IPv6 hop limit ``hops``."""
    if sock.family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_UNICAST_HOPS, hops)
    # Also on an IPv6 socket: a dual-stack one ("::") answers IPv4 callers with IPv4's TTL,
    # not the hop limit.
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, hops)


def bind_listener(listener: Listener, *, reuse_port: bool, listen: bool) -> socket.socket:
    """``bind`` for one listener; a port in use, an address this host does not have or any
    other refusal is a ConfigError naming the listener and its address (one line at start,
    not a traceback)."""
    address = f"[{listener.host}]" if ":" in listener.host else listener.host
    try:
        return bind(
            listener.host,
            listener.port,
            ip_ttl=listener.ip_ttl,
            reuse_port=reuse_port,
            listen=listen,
        )
    except (OSError, OverflowError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(
            f"the {listener.name} cannot listen on {address}:{listener.port}: {reason}"
        ) from exc


# Where the hard limit is unlimited, the most Linux allows by default (fs.nr_open).
_MOST_FILES = 1 << 20


def raise_open_files_limit(settings: Settings) -> int:
    """Raise this process's soft limit of open files to its hard limit, as Go's runtime and
    nginx's ``worker_rlimit_nofile`` do, and return it: every waiting long-poll holds a
    socket, and the soft limit systemd and most shells give (1,024) would refuse the
    1,025th guest's connection while ``[metadata] max_waiters`` allows 20,000. Forked
    workers inherit it. A limit still below ``max_waiters`` is logged."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = _MOST_FILES if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open files limit from %d to %d: %s", soft, wanted, exc)
    waiters = settings.metadata.max_waiters
    if soft != resource.RLIM_INFINITY and soft < waiters:
        log.warning(
            "each worker may open %d files, fewer than the %d long-polls [metadata] "
            "max_waiters allows it: raise the hard limit (LimitNOFILE= in systemd)",
            soft,
            waiters,
        )
    return soft


def reserve(listener: Listener) -> socket.socket:
    """The port of ``listener``, reserved for the workers' sockets (``listen_own``): bound with
    SO_REUSEPORT and never listening, which also resolves port 0. A port another process
    listens on is refused first (a ConfigError, as ``bind_listener``'s): SO_REUSEPORT alone
    would let this one join that process's sockets, where both run as the same user, and take
    half its connections."""
    probe = bind_listener(listener, reuse_port=False, listen=False)
    port = probe.getsockname()[1]
    probe.close()
    return bind_listener(replace(listener, port=port), reuse_port=True, listen=False)


def listen_own(
    bound: list[tuple[Listener, socket.socket]],
) -> list[tuple[Listener, socket.socket]]:
    """In a worker: ACCEPTING_SOCKETS listening sockets of its own on each port reserved
    (``reserve``), each paired with its listener."""
    own = []
    for listener, reserved in bound:
        host, port = reserved.getsockname()[:2]
        for _ in range(ACCEPTING_SOCKETS):
            own.append((listener, bind(host, port, ip_ttl=listener.ip_ttl, reuse_port=True)))
        # A forked worker's copy: the parent keeps its own, so the port stays reserved between
        # workers (with one worker, its listening sockets hold the port).
        reserved.close()
    return own
