"""``ThreadedVendordata``: one Vendordata on an event loop of its own, for callers that run in
worker threads (build operations, config drive builders).

A long-lived one keeps its answer cache and its service token across builds: a boot storm of
builds in fatal mode then logs in to Keystone once, not once per build, and a target's
``max-age`` spares it calls from builds as it does from guests.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from cloudseed.settings import Settings
from cloudseed.vendordata.request import VendordataRequest
from cloudseed.vendordata.service import Vendordata

T = TypeVar("T")


class ThreadedVendordata:
    """The blocking face of a Vendordata; safe to call from any number of threads."""

    def __init__(self, settings: Settings, **options: Any) -> None:
        """``options`` are Vendordata's (max_cache_entries, failure_backoff). Raises what
        Vendordata raises (ConfigError), with the thread already stopped."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="vendordata", daemon=True
        )
        self._thread.start()

        async def build() -> Vendordata:
            # Built on its loop: everything it creates belongs to that loop.
            return Vendordata(settings, **options)

        try:
            self._vendordata = self._run(build())
        except BaseException:
            self._stop()
            raise

    @property
    def has_dynamic(self) -> bool:
        return self._vendordata.has_dynamic

    def vendor_data_json(self) -> bytes | None:
        async def read() -> bytes | None:
            return self._vendordata.vendor_data_json

        return self._run(read())

    def vendor_data2(self, request: VendordataRequest) -> bytes:
        return self._run(self._vendordata.vendor_data2(request))

    def vendor_data2_for_build(self, request: VendordataRequest) -> bytes:
        return self._run(self._vendordata.vendor_data2_for_build(request))

    def check_for_build(self, request: VendordataRequest) -> None:
        self._run(self._vendordata.check_for_build(request))

    def close(self) -> None:
        if self._thread.is_alive():
            try:
                self._run(self._vendordata.aclose())
            finally:
                self._stop()

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
