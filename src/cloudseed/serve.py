"""``cloudseed serve``: bind the listening sockets, then serve every HTTP app from one or more
worker processes.

The process reserves each port (``listening.reserve``: a socket with SO_REUSEPORT that never
listens, which also resolves port 0) and every worker, the process itself when there is one,
listens on sockets of its own bound to it (``listening.listen_own``): the kernel then spreads
new connections evenly over the workers by hash. One shared listening socket would hand each
connection to whichever worker accepts first, and under load one worker ended up with 180 of
256 kept-alive connections while the other idled. Each worker has several sockets per port,
since its event loop accepts one connection per socket at a time (``ACCEPTING_SOCKETS``).
SIGTERM or SIGINT to the parent stops the workers gracefully (in-flight requests finish) and
the parent exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import multiprocessing
import os
import signal
import socket
import sys
from collections.abc import Iterator
from ipaddress import ip_network
from types import FrameType
from typing import TYPE_CHECKING

import uvicorn

from cloudseed.coalescing import CoalescingHttpToolsProtocol
from cloudseed.connection_limits import ConnectionCap, Deadlines
from cloudseed.db import checkpoints
from cloudseed.head_limits import HeadLimits
from cloudseed.listening import Listener, listen_own, raise_open_files_limit, reserve
from cloudseed.settings import Settings, split_list
from cloudseed.types import ASGIApp

if TYPE_CHECKING:
    from cloudseed.db.engines import Database
    from cloudseed.metrics import Metrics, MultiprocessDirectory

log = logging.getLogger(__name__)

# How long a thread may keep the GIL once another asks for it (CPython's default: 5 ms). A
# worker's event loop gives the GIL up at every epoll wait, and uvloop at every socket
# callback too (each takes the GIL on its own). Each time a busy thread of the same process
# holds it (a load of guests, ahead or for misses; a multi-create's write; the embedded
# agent's builds), the loop waits up to the whole interval to take it back, once per
# callback. At 0.5 ms (from 5) the storm's p99 fell by a third while 2,000 servers were built
# beside it. At 0.1 ms the loop's p99 while a worker loaded 2,000 guests ahead fell from
# 4.9-5.6 ms to 2.3-2.6 ms, the loads taking about a tenth longer (bench/gil_convoy.py;
# docs/benchmarks.md, issue 36).
LOOP_FIRST_SWITCH_INTERVAL = 0.0001


class OncePerProcess(logging.Filter):
    """Lets uvicorn's lifecycle lines ("Started server process [n]", "Application startup
    complete.", "Shutting down", ...) through once per process: a worker runs one uvicorn
    server per listener, and each would say the same, naming no listener. Warnings and errors
    always pass."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[tuple[str, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.INFO:
            return True
        line = (record.getMessage(), str(os.getpid()))
        if line in self._seen:
            return False
        self._seen.add(line)
        return True


def quiet_uvicorn_repeats() -> None:
    """Install ``OncePerProcess`` on uvicorn's logger, once."""
    uvicorn_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, OncePerProcess) for f in uvicorn_log.filters):
        uvicorn_log.addFilter(OncePerProcess())


def listeners(settings: Settings, *, compute: bool = True) -> list[Listener]:
    """The HTTP apps a serve process runs, those of ``[DEFAULT] enabled_apis``; with
    ``compute``, the API app's lifespan also runs this node's compute agent (every worker
    process: they share the host's operations through leases, so any of them may take the
    next one), so a serve of the metadata service alone runs none. A change committed through
    the API app is heard at once by the metadata service and the agent of the same worker:
    they share its API database (``serve_sockets``)."""
    from cloudseed.api.app import create_api_app
    from cloudseed.metadata.app import create_metadata_app

    def api_app(settings: Settings, api_db: Database | None) -> ASGIApp:
        return create_api_app(settings, api_db=api_db, compute=compute)

    def metadata_app(settings: Settings, api_db: Database | None) -> ASGIApp:
        return create_metadata_app(settings, api_db=api_db)

    d = settings.default
    chosen = []
    if runs_compute_api(settings):
        chosen.append(
            Listener("compute API", d.osapi_compute_listen, d.osapi_compute_listen_port, api_app)
        )
    if "metadata" in split_list(d.enabled_apis):
        chosen.append(
            Listener(
                "metadata service",
                d.metadata_listen,
                d.metadata_listen_port,
                metadata_app,
                ip_ttl=settings.metadata.hop_limit,
                kind="metadata",
            )
        )
    return chosen


def runs_compute_api(settings: Settings) -> bool:
    """Whether ``cloudseed serve`` runs the compute API (and so, unless told not to, the
    compute agent) under these settings."""
    return "osapi_compute" in split_list(settings.default.enabled_apis)


def protocol_for(
    listener: Listener, settings: Settings, metrics: Metrics
) -> type[CoalescingHttpToolsProtocol]:
    """The HTTP protocol of ``listener`` in this worker: the head limits and deadlines of
    ``[wsgi]`` on both listeners; on the metadata listener also the whole request's deadline
    and the cap on each source address's connections (``[metadata]``), which exempts the
    metadata proxies (connection_limits.py's docstring)."""
    w = settings.wsgi
    md = settings.metadata
    metadata = listener.kind == "metadata"
    cap = None
    if metadata and md.max_connections_per_address and not settings.neutron.service_metadata_proxy:
        cap = ConnectionCap(
            md.max_connections_per_address,
            exempt=[ip_network(n, strict=False) for n in split_list(md.trusted_proxies)],
            refused=metrics.connections_refused.labels(listener.kind).inc,
        )
    timeouts = metrics.connection_timeouts

    def timed_out(deadline: str) -> None:
        timeouts.labels(listener.kind, deadline).inc()

    return CoalescingHttpToolsProtocol.with_limits(
        HeadLimits(
            max_request_line=w.max_request_line,
            max_header_line=w.max_header_line,
            max_header_size=w.max_header_size,
        ),
        deadlines=Deadlines(
            first_request=w.first_request_timeout,
            header=w.header_timeout,
            request=md.request_timeout if metadata else None,
        ),
        cap=cap,
        timed_out=timed_out,
    )


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # Several servers share one process; signals are handled once for all of them.
        yield


async def serve_sockets(
    settings: Settings,
    bound: list[tuple[Listener, socket.socket]],
    *,
    stop_event: asyncio.Event | None = None,
    metrics_dir: str | None = None,
    api_db: Database | None = None,
) -> None:
    """Serve each listener's app on its sockets in this process until SIGTERM/SIGINT, or until
    ``stop_event`` is set (for embedding, e.g. in tests). ``bound`` pairs each listening socket
    with its listener; a listener with several (``listen_own``) has one app on all of them.
    ``metrics_dir``: the workers' shared metrics directory (several workers); None: this
    process's metrics are all there is. ``api_db``: the API database the apps share (an
    embedder's, which stays open); by default this worker opens its own (when one of its
    listeners uses it) and disposes of it when the apps have stopped."""
    from cloudseed.db.engines import Database

    db = api_db
    if db is None and any(listener.uses_api_db for listener, _ in bound):
        db = Database.connect("api", settings.api_database_url)
    try:
        await _serve_apps(settings, bound, db, stop_event=stop_event, metrics_dir=metrics_dir)
    finally:
        if api_db is None and db is not None:
            db.dispose()


async def _serve_apps(
    settings: Settings,
    bound: list[tuple[Listener, socket.socket]],
    api_db: Database | None,
    *,
    stop_event: asyncio.Event | None,
    metrics_dir: str | None,
) -> None:
    from cloudseed.metrics import Metrics, instrument

    quiet_uvicorn_repeats()
    metrics = Metrics(multiprocess_dir=metrics_dir)
    servers = []
    apps = []
    sockets: dict[Listener, list[socket.socket]] = {}  # one app per listener, on all its sockets
    for listener, sock in bound:
        sockets.setdefault(listener, []).append(sock)
    for listener, listening_on in sockets.items():
        # proxy_headers off: uvicorn would otherwise believe X-Forwarded-For from 127.0.0.1
        # and rewrite the client address the metadata service identifies guests by.
        app = instrument(
            listener.factory(settings, api_db),
            listener=listener.kind,
            metrics=metrics,
            settings=settings,
        )
        apps.append(app)
        config = uvicorn.Config(
            app,
            lifespan="on",
            access_log=False,
            proxy_headers=False,
            http=protocol_for(listener, settings, metrics),
            ws="none",  # neither app serves WebSockets; an Upgrade is a plain request
            log_config=None,
            server_header=False,
            date_header=True,
            timeout_graceful_shutdown=30,
        )
        servers.append((_Server(config), listening_on))

    freeze_what_start_up_made()

    def stop() -> None:
        for server, _ in servers:
            server.should_exit = True
        # uvicorn lets requests in flight finish (up to timeout_graceful_shutdown); an app
        # with requests that could wait much longer (the metadata service's long-polls)
        # answers them now.
        for app in apps:
            drain = getattr(app, "drain", None)
            if callable(drain):
                drain()

    loop = asyncio.get_running_loop()
    with contextlib.suppress(ValueError, RuntimeError):  # not in the main thread (tests)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop)
    if stop_event is not None:

        async def watch() -> None:
            await stop_event.wait()
            stop()

        watcher = asyncio.ensure_future(watch())
    flusher = asyncio.ensure_future(metrics.flush_every(1.0))
    try:
        await asyncio.gather(*(server.serve(sockets=socks) for server, socks in servers))
    finally:
        flusher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await flusher
    if stop_event is not None:
        watcher.cancel()


def new_event_loop() -> asyncio.AbstractEventLoop:
    """The event loop a worker serves on: uvloop's where it is installed (a dependency on
    every platform but Windows), else asyncio's. uvloop accepts a connection and makes its
    transport in C, where asyncio runs a Task of Python for each. Guests behind Neutron's
    metadata proxy (its haproxy runs with ``option http-server-close``) and cloud-init's own
    ``readurl`` open a connection for every request, and there a storm served 15 % more
    requests a second on uvloop; on kept-alive connections its throughput and saturated p99
    were asyncio's and the paced p99 about half (docs/benchmarks.md, issue 36). Measured
    earlier, before answers were written at once, uvloop had raised the saturated p99
    fourfold; that no longer holds."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - Windows, or a Python uvloop has no wheel for
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def freeze_what_start_up_made() -> None:
    """Keep CPython's full collections off what the worker made to start (modules, classes,
    the apps): Python 3.11's full collection walks every tracked object, a worker's start-up
    leaves a few hundred thousand, and its full collections took 100-180 ms, each a stall of
    the event loop and a server create's p99 (gc.callbacks; docs/benchmarks.md, issue 36).
    Collected first, so only live objects go to the permanent generation (``gc.freeze``); a
    frozen object is still freed when its last reference goes. The metadata cache's guests
    are frozen as the cache grows (metadata/heap.py)."""
    gc.collect()
    gc.freeze()


def favour_the_event_loop() -> None:
    """Let this process's event loop take the GIL back from a busy thread within
    ``LOOP_FIRST_SWITCH_INTERVAL`` instead of CPython's 5 ms."""
    sys.setswitchinterval(LOOP_FIRST_SWITCH_INTERVAL)


def _worker(
    settings: Settings,
    reserved: list[tuple[Listener, socket.socket]],
    metrics_dir: str | None = None,
) -> None:
    bound = listen_own(reserved)
    favour_the_event_loop()
    if any(listener.kind != "metadata" for listener, _ in reserved):
        checkpoints.start()  # a writer's work: not in a worker of the metadata service alone
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(serve_sockets(settings, bound, metrics_dir=metrics_dir))


def run(settings: Settings, *, compute: bool = True, chosen: list[Listener] | None = None) -> None:
    """Bind, then serve in this process (one worker) or in ``workers`` forked processes.
    ``compute``: also run this node's compute agent (``serve --no-compute``: not).
    ``chosen``: these listeners instead of ``cloudseed serve``'s (``cloudseed
    nova-metadata``'s one)."""
    from cloudseed.metadata.tokens import with_shared_key

    settings = with_shared_key(settings)  # before forking: every worker checks every token
    raise_open_files_limit(settings)
    reserved = [
        (listener, reserve(listener))
        for listener in (chosen if chosen is not None else listeners(settings, compute=compute))
    ]
    for listener, sock in reserved:
        host, port = sock.getsockname()[:2]
        log.info(
            "%s listening on http://%s:%d",
            listener.name,
            f"[{host}]" if ":" in host else host,
            port,
        )
    if settings.default.workers == 1:
        _worker(settings, reserved)
        return
    from cloudseed.metrics import MultiprocessDirectory

    metrics_dir = MultiprocessDirectory() if settings.metrics.enabled else None
    try:
        _supervise(settings, reserved, metrics_dir)
    finally:
        if metrics_dir is not None:
            metrics_dir.close()


def _supervise(
    settings: Settings,
    reserved: list[tuple[Listener, socket.socket]],
    metrics_dir: MultiprocessDirectory | None,
) -> None:
    context = multiprocessing.get_context("fork")
    stopping = False
    path = metrics_dir.path if metrics_dir is not None else None

    def start() -> multiprocessing.process.BaseProcess:
        process = context.Process(target=_worker, args=(settings, reserved, path), daemon=False)
        process.start()
        return process

    def on_signal(_sig: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    workers = [start() for _ in range(settings.default.workers)]
    log.info("started %d workers: %s", len(workers), ", ".join(str(w.pid) for w in workers))
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        while not stopping:
            for i, worker in enumerate(workers):
                worker.join(timeout=0.2)
                if not stopping and worker.exitcode is not None:
                    log.error(
                        "worker %s exited with %s; starting another", worker.pid, worker.exitcode
                    )
                    if metrics_dir is not None and worker.pid is not None:
                        metrics_dir.worker_died(worker.pid)
                    workers[i] = start()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for worker in workers:
            if worker.is_alive() and worker.pid is not None:
                os.kill(worker.pid, signal.SIGTERM)
        for worker in workers:
            worker.join(timeout=35)
            if worker.is_alive():
                worker.kill()
        log.info("all workers stopped")
