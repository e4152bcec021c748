"""A real cloudseed HTTP server in a background thread, on a loopback port the kernel picks."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from cloudseed import serve
from cloudseed.api.app import create_api_app
from cloudseed.compute.interfaces import Driver
from cloudseed.settings import Settings


def own_host(settings: Settings) -> Settings:
    """``settings`` for a test server whose compute agent has a host and zone of its own,
    which its new servers are scheduled to: several test servers on one database (each with
    its own driver and settings) then never run each other's operations."""
    if settings.default.host:
        return settings
    name = f"test-{next(_hosts)}-{os.getpid()}"
    default = dataclasses.replace(
        settings.default, host=name, default_availability_zone=name, default_schedule_zone=name
    )
    return dataclasses.replace(settings, default=default)


_hosts = itertools.count(1)


@contextmanager
def running_api(
    settings: Settings, *, driver: Driver | None = None, compute: bool = True
) -> Iterator[str]:
    """Serve the compute API of ``settings`` (with ``driver``, if given; with a compute agent
    of its own host unless ``compute`` is False) and yield its base URL."""
    settings = own_host(settings)
    with _running(
        settings,
        serve.Listener(
            "compute API",
            "127.0.0.1",
            0,
            lambda s: create_api_app(s, driver=driver, compute=compute),
        ),
        "/healthz",
    ) as base:
        yield base


@contextmanager
def running_metadata(settings: Settings) -> Iterator[str]:
    """Serve the metadata service of ``settings`` on 127.0.0.1 and yield its base URL; tests
    act as different guests by connecting from other 127.0.0.0/8 source addresses."""
    from cloudseed.metadata.app import create_metadata_app

    with _running(
        settings,
        serve.Listener(
            "metadata service",
            "127.0.0.1",
            0,
            create_metadata_app,
            ip_ttl=settings.metadata.hop_limit,
        ),
        "/",
    ) as base:
        yield base


@contextmanager
def _running(settings: Settings, listener: serve.Listener, ready_path: str) -> Iterator[str]:
    sock = serve.bind("127.0.0.1", 0, ip_ttl=listener.ip_ttl)
    port = sock.getsockname()[1]
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(serve.serve_sockets(settings, [(listener, sock)], stop_event=stop))

    thread = threading.Thread(target=run, name="cloudseed-test-server", daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_ready(base + ready_path, thread)
        yield base
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=30)
        loop.close()
        sock.close()


def _wait_until_ready(url: str, thread: threading.Thread) -> None:
    deadline = time.monotonic() + 15
    while thread.is_alive():
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    raise RuntimeError("test server did not start")
