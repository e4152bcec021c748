"""Operations queued, running and failed, counted in the cell databases when scraped.

Operations are rows (servers/lifecycle/queue.py), so the truth is in the database, not in any one
process: one ``COUNT ... GROUP BY state`` per cell at scrape time (scrapes come every few
seconds; the count reads the (host, state) index) gives the same answer from every worker and
every host, where counting in the agents would need them all to be scraped and summed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from sqlalchemy import func, select

from cloudseed.cells.service import CellDatabases
from cloudseed.servers.lifecycle import queue
from cloudseed.servers.models import Operation

log = logging.getLogger(__name__)

# Label value -> the operations' state: "queued" is what an operator asks about; the row says
# pending.
STATES = {"queued": queue.PENDING, "running": queue.RUNNING, "failed": queue.FAILED}


def count_operations(cells: CellDatabases) -> dict[str, int]:
    """Operations per label value, over every cell. Blocking: run in a thread."""
    counts = dict.fromkeys(STATES, 0)
    label_of = {state: label for label, state in STATES.items()}
    for cell in cells.all_cells():
        with cell.read() as session:
            rows = session.execute(
                select(Operation.state, func.count())
                .where(Operation.state.in_(list(label_of)))
                .group_by(Operation.state)
            ).all()
        for state, count in rows:
            counts[label_of[state]] += count
    return counts


class OperationsCollector:
    """One scrape's counts as a gauge family (a collector of one exposition)."""

    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "cloudseed_operations",
            "Operations in the cell databases by state: queued (pending), running, failed.",
            labels=["state"],
        )
        for label, count in self.counts.items():
            family.add_metric([label], count)
        yield family
