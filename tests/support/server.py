"""A real cloudseed HTTP server in a background thread, on a loopback port the kernel picks."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import httpx
from sqlalchemy import delete
from sqlalchemy.orm import Session

from cloudseed import listening, serve
from cloudseed.api.app import create_api_app
from cloudseed.compute.interfaces import Driver
from cloudseed.db.engines import Database
from cloudseed.hosts.models import ComputeNode, Service
from cloudseed.settings import Settings
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from cloudseed.metadata.app import MetadataApp
    from cloudseed.nova_metadata.app import NovaMetadataApp
    from cloudseed.nova_metadata.config import NovaMetadataConfig


def own_host(settings: Settings, zone: str | None = None) -> Settings:
    """``settings`` for a test server whose compute agent has a host of its own. Without a
    ``zone`` the host is also a zone of its own, which the server's new servers are scheduled
    to: several test servers on one database (each with its own driver and settings) then never
    run each other's operations. The session-wide server takes zone "nova" and schedules
    anywhere, as a default deployment does."""
    if settings.default.host:
        return settings
    name = f"test-{next(_hosts)}-{os.getpid()}"
    default = dataclasses.replace(
        settings.default,
        host=name,
        default_availability_zone=zone or name,
        default_schedule_zone="" if zone else name,
    )
    return dataclasses.replace(settings, default=default)


def forget_host(settings: Settings) -> None:
    """Remove a stopped test server's compute host, so no later server is scheduled there."""
    db = Database.connect("cell", settings.cell_database_url)
    try:

        def work(session: Session) -> None:
            session.execute(delete(ComputeNode).where(ComputeNode.host == settings.default.host))
            session.execute(delete(Service).where(Service.host == settings.default.host))

        db.run(work, write=True)
    finally:
        db.dispose()


_hosts = itertools.count(1)


@contextmanager
def running_api(
    settings: Settings,
    *,
    api_db: Database | None = None,
    driver: Driver | None = None,
    compute: bool = True,
    zone: str | None = None,
) -> Iterator[str]:
    """Serve the compute API of ``settings`` (with ``driver``, if given; with a compute agent
    of its own host unless ``compute`` is False: see ``own_host`` for ``zone``) and yield its
    base URL. ``api_db``: the API database it shares (see ``_running``)."""
    settings = own_host(settings, zone)
    try:
        with _serving_api(settings, api_db, driver, compute) as base:
            yield base
    finally:
        if compute:
            forget_host(settings)


@contextmanager
def _serving_api(
    settings: Settings, api_db: Database | None, driver: Driver | None, compute: bool
) -> Iterator[str]:
    with _running(
        settings,
        listening.Listener(
            "compute API",
            "127.0.0.1",
            0,
            lambda s, db: create_api_app(s, api_db=db, driver=driver, compute=compute),
        ),
        "/healthz",
        api_db,
    ) as base:
        yield base


@contextmanager
def running_metadata(settings: Settings, *, api_db: Database | None = None) -> Iterator[str]:
    """Serve the metadata service of ``settings`` on 127.0.0.1 and yield its base URL; tests
    act as different guests by connecting from other 127.0.0.0/8 source addresses.
    ``api_db``: the API database it shares (see ``_running``)."""
    with running_metadata_app(settings, api_db=api_db) as (base, _app):
        yield base


@contextmanager
def running_metadata_app(
    settings: Settings, *, api_db: Database | None = None
) -> Iterator[tuple[str, MetadataApp]]:
    """``running_metadata``, yielding the app it started too: what a test reads the service's
    state from (``MetadataApp.waiting``: long-polls registered) instead of sleeping."""
    from cloudseed.metadata.app import create_metadata_app

    started: list[MetadataApp] = []

    def create(settings: Settings, db: Database | None) -> MetadataApp:
        started.append(create_metadata_app(settings, api_db=db))
        return started[-1]

    with _running(
        settings,
        listening.Listener(
            "metadata service",
            "127.0.0.1",
            0,
            create,
            ip_ttl=settings.metadata.hop_limit,
            kind="metadata",
        ),
        "/",
        api_db,
    ) as base:
        yield base, started[-1]


@contextmanager
def running_nova_metadata_app(config: NovaMetadataConfig) -> Iterator[tuple[str, NovaMetadataApp]]:
    """``cloudseed nova-metadata`` of ``config`` (nova_metadata/config.py ``load``) served
    in this process, as its command serves it, yielding the app it started too."""
    from cloudseed.nova_metadata.app import create_app

    started: list[NovaMetadataApp] = []

    def create(_settings: Settings, _db: Database | None) -> NovaMetadataApp:
        started.append(create_app(config))
        return started[-1]

    listener = listening.Listener(
        "Nova metadata service", "127.0.0.1", 0, create, kind="metadata", uses_api_db=False
    )
    with _running(config.settings, listener, "/", None) as base:
        yield base, started[-1]


@contextmanager
def running_metadata_in_namespace(
    settings: Settings, namespace: str, *, api_db: Database | None = None
) -> Iterator[None]:
    """The metadata service of ``settings`` with its listening socket made inside network
    namespace ``namespace`` exactly as ``cloudseed serve`` makes it (``serve.listeners`` and
    ``bind_listener``: ``[DEFAULT] metadata_listen`` and its port, ``[metadata] hop_limit``);
    the app runs in this process. Clients reach it from inside the namespace."""
    from cloudseed.compute import netns

    (listener,) = [x for x in serve.listeners(settings) if x.kind == "metadata"]
    sock = netns.inside(
        namespace, lambda: listening.bind_listener(listener, reuse_port=False, listen=True)
    )
    host = "::1" if ":" in listener.host else "127.0.0.1"

    def answers() -> bool:
        def probe() -> bool:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            with socket.socket(family) as client:
                client.settimeout(1)
                try:
                    client.connect((host, listener.port))
                    client.sendall(b"GET / HTTP/1.1\r\nHost: md\r\nConnection: close\r\n\r\n")
                    return client.recv(12).startswith(b"HTTP/1.1 200")
                except OSError:
                    return False

        return netns.inside(namespace, probe)

    with _running(settings, listener, "/", api_db, sock=sock, ready=answers):
        yield


@contextmanager
def _running(
    settings: Settings,
    listener: listening.Listener,
    ready_path: str,
    api_db: Database | None,
    *,
    sock: socket.socket | None = None,
    ready: Callable[[], bool] | None = None,
) -> Iterator[str]:
    """Serve ``listener`` in a thread. With ``api_db`` (the suite's, tests/conftest.py), the
    server hears at once what the test and the other servers given it commit, as the apps
    of one ``cloudseed serve`` worker do; without, it opens its own and hears other writers
    as another process would (NOTIFY on PostgreSQL, its poll otherwise). ``sock``: a socket
    made elsewhere (a namespace), with ``ready`` to tell when it answers."""
    if api_db is not None and api_db.url != settings.api_database_url:
        raise ValueError("api_db is not the API database of these settings")
    if sock is None:
        sock = listening.bind("127.0.0.1", 0, ip_ttl=listener.ip_ttl)
    port = sock.getsockname()[1]
    loop = serve.new_event_loop()  # the workers' own
    stop = asyncio.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(
            serve.serve_sockets(settings, [(listener, sock)], stop_event=stop, api_db=api_db)
        )

    thread = threading.Thread(target=run, name="cloudseed-test-server", daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    try:
        if ready is None:
            _wait_until_ready(base + ready_path, thread)
        else:
            wait_until(ready, timeout=15, interval=0.05, max_interval=0.05, what="the server")
        yield base
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=30)
        loop.close()
        sock.close()


def _wait_until_ready(url: str, thread: threading.Thread) -> None:
    def answers() -> bool:
        if not thread.is_alive():
            raise RuntimeError("test server did not start (its thread ended)")
        try:
            return httpx.get(url, timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(answers, timeout=15, interval=0.05, max_interval=0.05, what=f"{url} answering")
    except AssertionError as exc:
        raise RuntimeError(f"test server did not start: {exc}") from None


def with_options(settings: Settings, section: str, **values: Any) -> Settings:
    return dataclasses.replace(
        settings, **{section: dataclasses.replace(getattr(settings, section), **values)}
    )
