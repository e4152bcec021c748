"""What one metadata storm run measured: the ``Report`` that bench/metadata_storm.py fills in
as the run goes (its passes, memory, change visibility, idle CPU, profile and builds), and the
figures computed from it that both the targets table (storm_targets) and the section's text
(storm_report) show. It imports neither of them, so both can import it."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from storm_building import BuildReport
from storm_changes import ChangeTrial
from storm_nginx import StaticTree
from storm_profile import Profile
from storm_seeding import Seeding
from storm_wrk import WrkResult


@dataclass
class Report:
    args: argparse.Namespace
    seeding: Seeding | None = None
    paths: list[str] = field(default_factory=list)
    crawl_bytes: int = 0
    cold: WrkResult | None = None
    warm: list[WrkResult] = field(default_factory=list)
    paced: WrkResult | None = None
    paced_building: WrkResult | None = None  # the same load while servers are built
    building: BuildReport | None = None
    just_built: WrkResult | None = None  # the built servers' guests' crawls, once each
    nginx: list[WrkResult] = field(default_factory=list)
    rss_before: dict[int, int] = field(default_factory=dict)
    rss_after: dict[int, int] = field(default_factory=dict)
    static: StaticTree | None = None
    changes: list[ChangeTrial] = field(default_factory=list)
    idle_cpu: dict[int, float] = field(default_factory=dict)
    fill_seconds: float = 0.0
    split: list[dict[int, int]] = field(default_factory=list)  # wrk's connections per worker
    profile: Profile | None = None
    loads: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def kib_per_instance(report: Report) -> float:
    """RSS growth per instance held in one worker's cache (every worker holds every instance:
    each guest's requests spread over connections of both), for the worker that grew most: a
    worker that dropped part of its cache on the way would make an average look better."""
    grown = max(report.rss_after[pid] - report.rss_before[pid] for pid in report.rss_after)
    return float(grown / report.args.instances)


def visibility_ms(report: Report) -> list[float]:
    """Per trial: when the slowest worker served the new value."""
    return [max(t.visible_ms.values()) for t in report.changes]
