"""The metrics edge: pure ASGI middleware around each listener's app that counts and times
every request, and answers ``GET /metrics`` to the configured scrapers.

Per request it costs two clock reads, one dict lookup for the tally of (route key, method,
status) and a few plain increments (``_tally.py``: handed to prometheus-client every second);
label values are worked out once per key.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
import time
from collections.abc import Callable, Hashable
from functools import partial

from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from cloudseed.at_once import AnswersAtOnce, AtOnce, Headers
from cloudseed.cells.service import CellDatabases
from cloudseed.errors import Forbidden
from cloudseed.metrics._operations import OperationsCollector, count_operations
from cloudseed.metrics._registry import LATENCY_BUCKETS, Metrics
from cloudseed.metrics._routes import MetadataRoutes, RouteNames
from cloudseed.metrics._tally import Tally
from cloudseed.replay import MakeReplayable, Replayable
from cloudseed.settings import split_list
from cloudseed.types import ASGIApp, Message, Receive, Scope, Send
from cloudseed.web.faults import fault_parts

log = logging.getLogger(__name__)

PATH = "/metrics"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Headers of a request relayed on a guest's behalf (a metadata proxy, the qemu relay): such a
# request is a guest's, whatever address it comes from.
RELAYED = frozenset(
    {
        b"x-instance-id",
        b"x-tenant-id",
        b"x-instance-id-signature",
        b"x-forwarded-for",
        b"forwarded",
        b"x-metadata-provider",
        b"x-metadata-provider-signature",
    }
)
_MAX_TALLIES = 4096  # remembered label sets; emptied when full, so odd paths cannot grow it

Networks = tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]


def scraper_networks(allow_from: str) -> Networks:
    return tuple(ipaddress.ip_network(item, strict=False) for item in split_list(allow_from))


class MetricsEdge:
    """``listener``: the label value. ``refuse``: what a non-scraper asking for /metrics gets:
    "forbidden" (the compute API: a Nova 403 fault) or "unknown" (the metadata listener: the
    request goes on to the app, which answers it as any unknown path). ``cells_of``: the
    cell databases for the operations' counts, from the request's scope (None: not known)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        metrics: Metrics,
        listener: str,
        routes: RouteNames,
        scrapers: Networks,
        refuse: str,
        cells_of: Callable[[Scope], CellDatabases | None],
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.listener = listener
        self.routes = routes
        self.scrapers = scrapers
        self.refuse = refuse
        self.cells_of = cells_of
        self._tallies: dict[tuple[Hashable, str, int], Tally] = {}
        metrics.flushing(self._flush)
        # The metadata app's answers written at once (coalescing.py asks the outermost app
        # for respond_now): counted here too, or the busiest requests would go unseen.
        self._respond_now = app.respond_now if isinstance(app, AnswersAtOnce) else None
        if self._respond_now is not None and isinstance(routes, MetadataRoutes):
            self.respond_now = self._counted_respond_now
            # Its replayed answers (replay.py): counted here too, by the wrapped ``counted``.
            self.replays = getattr(app, "replays", None)

    def _counted_respond_now(
        self, method: str, path: str, peer: str | None, headers: Headers
    ) -> AtOnce | None:
        if path == PATH or self._respond_now is None:
            return None
        started = time.perf_counter()
        found = self._respond_now(method, path, peer, headers)
        if found is not None:
            # The metadata listener's route key is the path (MetadataRoutes).
            status = found[0]
            self._tally(path, method, status, time.perf_counter() - started)
            make = found.replayable
            if make is not None:
                replayable = partial(self._counted_replayable, make, path, method, status)
                found = AtOnce(found.status, found.header_lines, found.body, found.sent, replayable)
        return found

    def _counted_replayable(
        self, make: MakeReplayable, path: str, method: str, status: int
    ) -> Replayable | None:
        """``make()``'s Replayable, each replay of which this edge counts as well (made once
        the answer is kept: replay.py)."""
        replayable = make()
        if replayable is None:
            return None
        counted = replayable.counted

        def counted_here() -> None:
            counted()
            self._tally(path, method, status, 0.0)  # a replay takes no app time

        # Made anew rather than with _replace, which costs about a microsecond each.
        return Replayable(replayable.guest, replayable.still_valid, counted_here, replayable.hole)

    def drain(self) -> None:
        """serve.py's call on SIGTERM, passed on to the app (the metadata service's)."""
        drain = getattr(self.app, "drain", None)
        if callable(drain):
            drain()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            if scope["path"] == PATH:
                if self._scraper(scope):
                    await self._scrape(scope, send_status)
                    return
                if self.refuse == "forbidden":
                    await _fault(send_status, Forbidden("Metrics are not served to this address."))
                    return
            await self.app(scope, receive, send_status)
        finally:
            self._count(scope, status, time.perf_counter() - started)

    def _count(self, scope: Scope, status: int, seconds: float) -> None:
        self._tally(self.routes.key(scope), scope["method"], status, seconds)

    def _tally(self, route_key: Hashable, method: str, status: int, seconds: float) -> None:
        key = (route_key, method, status)
        tally = self._tallies.get(key)
        if tally is None:
            tally = self._resolve(key)
        tally.add(seconds)

    def _resolve(self, key: tuple[Hashable, str, int]) -> Tally:
        route_key, method, status = key
        ok = 200 <= status < 300 or status == 304
        route, document = self.routes.names(route_key, ok)
        m = self.metrics
        tally = Tally(
            m.requests.labels(
                self.listener, route, method if method in METHODS else "other", str(status)
            ),
            m.duration.labels(self.listener, route),
            m.documents.labels(document) if document is not None else None,
            (*LATENCY_BUCKETS, math.inf),
        )
        if len(self._tallies) >= _MAX_TALLIES:
            self._flush()
            self._tallies.clear()
        self._tallies[key] = tally
        return tally

    def _flush(self) -> None:
        for tally in self._tallies.values():
            tally.flush()

    def _scraper(self, scope: Scope) -> bool:
        if self.refuse != "forbidden" and any(name in RELAYED for name, _ in scope["headers"]):
            return False
        client = scope.get("client")
        if not client:
            return False
        try:
            address = ipaddress.ip_address(client[0])
        except ValueError:
            return False
        return any(address in network for network in self.scrapers)

    async def _scrape(self, scope: Scope, send: Send) -> None:
        cells = self.cells_of(scope)
        self.metrics.flush()  # this process's figures up to now (on the loop: no races)
        body = await asyncio.to_thread(self._exposition, cells)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", CONTENT_TYPE_LATEST.encode()),
                    (b"content-length", str(len(body)).encode()),
                    (b"cache-control", b"no-store"),
                ],
            }
        )
        await send(
            {"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body}
        )

    def _exposition(self, cells: CellDatabases | None) -> bytes:
        extra: list[Collector] = []
        if cells is not None:
            try:
                extra.append(OperationsCollector(count_operations(cells)))
            except Exception:
                # The request figures are still worth having while a database is away.
                log.warning("counting operations for /metrics failed", exc_info=True)
        return self.metrics.exposition(extra)


async def _fault(send: Send, exc: Exception) -> None:
    status, headers, body = fault_parts(exc)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(k.lower().encode(), v.encode()) for k, v in headers],
        }
    )
    await send({"type": "http.response.body", "body": body})
