"""A real cloudseed HTTP server in a background thread, on a loopback port the kernel picks."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from cloudseed import serve
from cloudseed.api.app import create_api_app
from cloudseed.compute.driver import Driver
from cloudseed.settings import Settings


@contextmanager
def running_api(settings: Settings, *, driver: Driver | None = None) -> Iterator[str]:
    """Serve the compute API of ``settings`` (with ``driver``, if given) and yield its base
    URL."""
    listener = serve.Listener("compute API", "127.0.0.1", 0,
                              lambda s: create_api_app(s, driver=driver))
    sock = serve.bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(serve.serve_sockets(settings, [(listener, sock)],
                                                    stop_event=stop))

    thread = threading.Thread(target=run, name="cloudseed-test-server", daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_healthy(base, thread)
        yield base
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=30)
        loop.close()
        sock.close()


def _wait_until_healthy(base: str, thread: threading.Thread) -> None:
    deadline = time.monotonic() + 15
    while thread.is_alive():
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    raise RuntimeError("test server did not start")
