"""The metrics cloudseed exports (docs/metrics.md), one ``Metrics`` per serving process.

With several workers (``cloudseed serve --workers N``) every worker writes its values to files
in a directory the serve parent made for them (prometheus_client's multiprocess mode), and a
scrape of any worker reads them all: the figures are the sum over the workers. With one worker
(and in tests) the values live in this object's registry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import values as prometheus_values
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

# Metadata answers take well under a millisecond; compute API requests a few to hundreds.
LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
# The change feed is read every 20 ms (polling) or on NOTIFY; a second is already stale.
LAG_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# A DynamicJSON target is an HTTP call: milliseconds to its timeouts (seconds).
TARGET_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def use_multiprocess_values() -> None:
    """Make metrics created from now on write to the multiprocess directory.

    prometheus_client picks its value class when it is first imported, from the environment;
    cloudseed may have imported it before the serve parent made the directory, so a worker
    switches explicitly (the variable itself is inherited from the parent)."""
    if not getattr(prometheus_values.ValueClass, "_multiprocess", False):
        prometheus_values.ValueClass = prometheus_values.MultiProcessValue()  # type: ignore[no-untyped-call]


class Metrics:
    """Every metric of one process. ``multiprocess_dir``: the workers' shared directory."""

    def __init__(self, *, multiprocess_dir: str | None = None) -> None:
        self.multiprocess_dir = multiprocess_dir
        self._flushes: list[Callable[[], None]] = []
        if multiprocess_dir is not None:
            use_multiprocess_values()
        self.registry = registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "cloudseed_http_requests",
            "HTTP requests answered, by listener, route template, method and status.",
            ["listener", "route", "method", "status"],
            registry=registry,
        )
        self.duration = Histogram(
            "cloudseed_http_request_duration_seconds",
            "Time from a request's arrival to the end of its answer, by listener and route.",
            ["listener", "route"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.connections_refused = Counter(
            "cloudseed_http_connections_refused",
            "Connections refused at once (503) because their source address already had "
            "[metadata] max_connections_per_address open in the worker, by listener.",
            ["listener"],
            registry=registry,
        )
        self.connection_timeouts = Counter(
            "cloudseed_http_connection_timeouts",
            "Connections closed because a deadline passed, by listener and deadline: "
            "first_request (nothing sent), header (408), request (408).",
            ["listener", "deadline"],
            registry=registry,
        )
        self.documents = Counter(
            "cloudseed_metadata_documents",
            "Metadata documents answered (2xx and 304), by document.",
            ["document"],
            registry=registry,
        )
        self.cache_hits = Counter(
            "cloudseed_metadata_cache_hits",
            "Metadata requests whose guest was in the worker's cache.",
            registry=registry,
        )
        self.cache_misses = Counter(
            "cloudseed_metadata_cache_misses",
            "Metadata requests whose guest had to be loaded from the cell databases.",
            registry=registry,
        )
        self.cache_guests = Gauge(
            "cloudseed_metadata_cache_guests",
            "Guests held in the metadata caches (summed over live workers).",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.waiters = Gauge(
            "cloudseed_metadata_waiters",
            "Metadata long-polls (?wait_for_change=true) waiting for a change (summed over "
            "live workers).",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.tokenless = Counter(
            "cloudseed_metadata_tokenless_requests",
            "Metadata requests made without a session token by the guests of each project, "
            "by what they read: user_data, password or other (the token-less access audit, "
            "2.109; per server: GET /servers/{id}/metadata-access).",
            ["project", "document"],
            registry=registry,
        )
        self.change_lag = Histogram(
            "cloudseed_metadata_change_lag_seconds",
            "Seconds from a guest change's write (its writer's clock) to a worker reading it "
            "from the change feed.",
            buckets=LAG_BUCKETS,
            registry=registry,
        )
        self.target_duration = Histogram(
            "cloudseed_vendordata_target_duration_seconds",
            "DynamicJSON vendordata target calls, by target.",
            ["target"],
            buckets=TARGET_BUCKETS,
            registry=registry,
        )
        self.target_errors = Counter(
            "cloudseed_vendordata_target_errors",
            "DynamicJSON vendordata target calls that failed, by target.",
            ["target"],
            registry=registry,
        )

    def flushing(self, flush: Callable[[], None]) -> None:
        """Call ``flush`` on every ``flush()``: it adds what it tallied since to the metrics."""
        self._flushes.append(flush)

    def flush(self) -> None:
        """Hand every tally to prometheus-client. On the event loop the tallies belong to."""
        for flush in self._flushes:
            flush()

    async def flush_every(self, seconds: float) -> None:
        """Flush every ``seconds`` until cancelled (serve.py runs it beside the servers)."""
        try:
            while True:
                await asyncio.sleep(seconds)
                self.flush()
        finally:
            self.flush()

    def exposition(self, extra: Iterable[Collector] = ()) -> bytes:
        """The text format of every metric, plus ``extra`` collectors (figures read at scrape
        time, such as the operations' counts)."""
        registry = CollectorRegistry(auto_describe=False)
        if self.multiprocess_dir is not None:
            MultiProcessCollector(registry, path=self.multiprocess_dir)  # type: ignore[no-untyped-call]
        else:
            registry.register(self.registry)
        for collector in extra:
            registry.register(collector)
        return generate_latest(registry)
