"""Scrapes of a test server's ``GET /metrics`` (docs/metrics.md), as samples by name and labels."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

SCRAPER = "127.0.0.1"  # the tests' guests connect from other 127.0.0.0/24 addresses

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(base: str, *, source: str = SCRAPER) -> Samples:
    """Every sample of a scrape from ``source``, by (name, labels)."""
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(transport=transport, timeout=10) as client:
        r = client.get(f"{base}/metrics")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=")
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)
