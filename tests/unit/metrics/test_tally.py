"""A tally flushed into prometheus-client gives exactly what observing each value would."""

from __future__ import annotations

import math

from prometheus_client import CollectorRegistry, Counter, Histogram

from cloudseed.metrics._registry import LATENCY_BUCKETS
from cloudseed.metrics._tally import Tally

VALUES = [0.0, 0.0001, 0.0005, 0.00051, 0.001, 0.3, 2.5, 10.0, 11.0, 1e9]


def histogram(name: str, registry: CollectorRegistry) -> Histogram:
    return Histogram(name, "h", ["route"], buckets=LATENCY_BUCKETS, registry=registry)


def test_flushed_tally_equals_observed_values() -> None:
    observed, tallied = CollectorRegistry(), CollectorRegistry()
    direct = histogram("h", observed).labels("r")
    direct_count = Counter("c", "c", registry=observed)
    tally = Tally(
        Counter("c", "c", registry=tallied),
        histogram("h", tallied).labels("r"),
        None,
        (*LATENCY_BUCKETS, math.inf),
    )
    for rounds in range(2):  # twice: a flush starts the next tally from zero
        for v in VALUES:
            direct.observe(v)
            direct_count.inc()
            tally.add(v)
        tally.flush()
        tally.flush()  # nothing new: nothing added
        assert samples(tallied) == samples(observed), rounds


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in registry.collect()
        for s in family.samples
        if not s.name.endswith("_created")
    }
