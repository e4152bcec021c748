"""Every answer the soak's clients got, and the judgement of the ones that may be faults.

Each request is recorded once: its channel (``api``, ``guest``, ``fuzz-api``,
``fuzz-metadata``), its kind (``create``, ``meta_data.json``, ...), and its status or the
transport error that ended it. Counts are kept for all; the answers that may be faults (any
5xx, any transport error) are kept with their times, and judged at the end against what the
chaos loop did:

- a 503 is allowed while the database was down: from ``pg_ctl stop`` to the first query that
  succeeded after ``pg_ctl start``, plus ``grace`` seconds (each process notices the database
  is back at its next pooled connection's pre-ping);
- a transport error (reset, refused, closed before the answer) is allowed when the request was
  under way at a SIGKILL of a worker of the node it went to, or started within ``grace``
  seconds after it: a killed worker takes its connections with it (and the ones waiting in its
  accept queue), and the client sees that as a reset, not an answer. Under way, not ended: a
  client on a busy machine may notice the reset seconds late;
- anything else (a 500, a 503 outside the outage, a timeout, a reset with no kill near) fails
  the run.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

# Every request of the soak's clients goes on a connection of its own, as cloud-init's and
# curl's do. On a kept-alive connection the server's idle timer (uvicorn's 5 s) may close it
# just as the client sends the next request, which then ends unanswered: HTTP/1.1's own race,
# which clients meet with a retry, and which a busy client (its event loop late by seconds on
# a loaded machine) runs into even with a shorter idle timeout of its own. A request cut on a
# fresh connection is the server's doing, and judged so.
NO_KEEPALIVE = 0

# Which serve node each channel talks to: the kills that can explain its transport errors.
NODE_OF_CHANNEL = {
    "api": "api",
    "fuzz-api": "api",
    "guest": "metadata",
    "fuzz-metadata": "metadata",
    "check": "metadata",
}


@dataclass(frozen=True)
class Anomaly:
    """A 5xx answer or a transport error."""

    channel: str
    kind: str
    outcome: str  # "503", "500", "ReadError", "bad-fault" ...
    started: float  # time.time()
    ended: float
    detail: str
    transport: bool = False  # the request got no answer (reset, refused, timed out)


@dataclass
class Ledger:
    counts: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    anomalies: list[Anomaly] = field(default_factory=list)
    kills: list[tuple[float, str]] = field(default_factory=list)  # (time, node or agent)
    outage: tuple[float, float] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(
        self,
        channel: str,
        kind: str,
        status: int,
        started: float,
        detail: str = "",
        ended: float | None = None,
    ) -> None:
        ended = time.time() if ended is None else ended
        with self.lock:
            self.counts[(channel, kind, str(status))] += 1
            if status >= 500:
                self.anomalies.append(
                    Anomaly(channel, kind, str(status), started, ended, detail[:300])
                )

    def failure(
        self,
        channel: str,
        kind: str,
        error: BaseException,
        started: float,
        ended: float | None = None,
    ) -> None:
        ended = time.time() if ended is None else ended
        name = type(error).__name__
        with self.lock:
            self.counts[(channel, kind, name)] += 1
            self.anomalies.append(
                Anomaly(channel, kind, name, started, ended, str(error)[:300], transport=True)
            )

    def shape_fault(self, channel: str, kind: str, problem: str, started: float) -> None:
        """A refusal that is not a Nova fault."""
        with self.lock:
            self.anomalies.append(
                Anomaly(channel, kind, "bad-fault", started, time.time(), problem[:300])
            )

    def kill(self, target: str) -> None:
        with self.lock:
            self.kills.append((time.time(), target))

    def total(self, channel: str | None = None) -> int:
        with self.lock:
            return sum(n for (c, _, _), n in self.counts.items() if channel in (None, c))


@dataclass(frozen=True)
class Judgement:
    allowed_503: list[Anomaly]
    allowed_resets: list[Anomaly]
    faults: list[Anomaly]
    last_503_after_outage: float | None  # seconds after the outage's end (negative: before)


def judge(ledger: Ledger, grace: float) -> Judgement:
    allowed_503, resets, faults = [], [], []
    last = None
    for anomaly in ledger.anomalies:
        if anomaly.outcome == "503" and ledger.outage is not None:
            start, end = ledger.outage
            if anomaly.started <= end + grace and anomaly.ended >= start:
                allowed_503.append(anomaly)
                after = anomaly.ended - end
                last = after if last is None else max(last, after)
                continue
        if anomaly.transport and _near_kill(ledger, anomaly, grace):
            resets.append(anomaly)
            continue
        faults.append(anomaly)
    return Judgement(allowed_503, resets, faults, last)


def _near_kill(ledger: Ledger, anomaly: Anomaly, grace: float) -> bool:
    if "Timeout" in anomaly.outcome:
        return False  # a hang is a fault whatever happened around it
    node = NODE_OF_CHANNEL.get(anomaly.channel)
    return any(
        target == node and anomaly.started <= at + grace and anomaly.ended >= at - 0.5
        for at, target in ledger.kills
    )
