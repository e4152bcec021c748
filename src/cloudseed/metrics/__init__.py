"""Prometheus metrics of both listeners (docs/metrics.md): ``instrument`` wraps a listener's
app in the metrics edge, which counts and times its requests and answers ``GET /metrics``."""

from __future__ import annotations

from cloudseed.metrics._process import MultiprocessDirectory
from cloudseed.metrics._registry import Metrics
from cloudseed.metrics._wiring import instrument

__all__ = ["Metrics", "MultiprocessDirectory", "instrument"]
