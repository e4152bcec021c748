"""How each listener's app is instrumented: its route labels, its refusal, where its cell
databases are, and (the metadata service) what its guest cache, long-polls and vendordata
targets report."""

from __future__ import annotations

from cloudseed.cells.service import CellDatabases
from cloudseed.hosts.api import HostsState
from cloudseed.metadata.app import MetadataApp
from cloudseed.metrics._edge import MetricsEdge, scraper_networks
from cloudseed.metrics._registry import Metrics
from cloudseed.metrics._routes import MetadataRoutes, StarletteRoutes
from cloudseed.nova_metadata.app import NovaMetadataApp
from cloudseed.settings import Settings
from cloudseed.types import ASGIApp, Scope
from cloudseed.web.state import fragment_in

API = "api"
METADATA = "metadata"


class _Reports:
    """The metadata service's StoreStats, TargetStats and AccessStats, as metric updates."""

    def __init__(self, metrics: Metrics) -> None:
        # Hits are one per metadata request: tallied, then flushed with the requests.
        self.hits = 0
        self.misses = 0
        self._hits = metrics.cache_hits
        self._misses = metrics.cache_misses
        self._guests = metrics.cache_guests
        self._waiters = metrics.waiters
        self._lag = metrics.change_lag
        self._target_duration = metrics.target_duration
        self._target_errors = metrics.target_errors
        # The token-less access audit's (2.109), by project and document: tallied likewise.
        self.tokenless_counts: dict[tuple[str, str], int] = {}
        self._tokenless = metrics.tokenless

    def hit(self) -> None:
        self.hits += 1

    def missed(self) -> None:
        self.misses += 1

    def tokenless(self, project_id: str, document: str) -> None:
        key = (project_id, document)
        self.tokenless_counts[key] = self.tokenless_counts.get(key, 0) + 1

    def flush(self) -> None:
        if self.tokenless_counts:
            counts, self.tokenless_counts = self.tokenless_counts, {}
            for labels, n in counts.items():
                self._tokenless.labels(*labels).inc(n)
        if self.hits:
            self._hits.inc(self.hits)
            self.hits = 0
        if self.misses:
            self._misses.inc(self.misses)
            self.misses = 0

    def cached(self, guests: int) -> None:
        self._guests.set(guests)

    def waiting(self, total: int) -> None:
        self._waiters.set(total)

    def change_lag(self, seconds: float) -> None:
        self._lag.observe(max(seconds, 0.0))  # clocks of writer and reader may differ a little

    def target_called(self, target: str, seconds: float, *, failed: bool) -> None:
        self._target_duration.labels(target).observe(seconds)
        if failed:
            self._target_errors.labels(target).inc()


def instrument(app: ASGIApp, *, listener: str, metrics: Metrics, settings: Settings) -> ASGIApp:
    """``app`` (the ``listener``'s: "api" or "metadata") counted in ``metrics``; ``app``
    itself when metrics are off (nothing counted, /metrics unknown as any other path)."""
    options = settings.metrics
    if not options.enabled:
        return app
    scrapers = scraper_networks(options.allow_from)
    if listener == METADATA:
        if isinstance(app, MetadataApp | NovaMetadataApp):
            reports = _Reports(metrics)
            metrics.flushing(reports.flush)
            app.observe(store=reports, targets=reports)
            waiters = app.freshness.waiters if isinstance(app, MetadataApp) else app.waiters
            waiters.report(reports.waiting)
            if isinstance(app, MetadataApp):
                app.observe_access(reports)

        def metadata_cells(_scope: Scope) -> CellDatabases | None:
            cells = getattr(app, "cells", None)
            return cells if isinstance(cells, CellDatabases) else None

        return MetricsEdge(
            app,
            metrics=metrics,
            listener=METADATA,
            routes=MetadataRoutes(),
            scrapers=scrapers,
            refuse="unknown",
            cells_of=metadata_cells,
        )

    def api_cells(scope: Scope) -> CellDatabases | None:
        hosts = fragment_in(scope, HostsState)
        return hosts.cells if hosts is not None else None

    return MetricsEdge(
        app,
        metrics=metrics,
        listener=API,
        routes=StarletteRoutes(),
        scrapers=scrapers,
        refuse="forbidden",
        cells_of=api_cells,
    )
