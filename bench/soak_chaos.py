"""The soak's chaos loop: every ``interval`` seconds a SIGKILL of the second compute agent, a
worker of the API node or a worker of the metadata node, in turn, and once, right after the
first round of kills, a restart of PostgreSQL instead; meanwhile it watches that nothing else
dies. The first time each of these happens is part of the warm-up (``warmed_up``): it raises
the survivors' memory to a new high-water mark once (the surviving metadata worker takes all
of its sibling's clients until the sibling is back, and keeps the arenas it grew for them;
every process reloads its caches after the outage), and later times must not.

A killed agent is started again after 2 s (``RestartSec=2`` of docs/deployment.md's unit); a
killed worker is replaced by its serve parent, and the loop measures how long the node took to
have two workers again. PostgreSQL is stopped with ``pg_ctl stop -m fast`` (every connection
cut), left down ``outage_seconds`` and started again; the outage is from the stop to the first
query that succeeds, the window in which 503s are allowed (bench/soak_ledger.py).

A serve node's parent that exits, or an agent that exits without being killed, is an event of
its own that fails the run (the agent is started again, as systemd would).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from soak_ledger import Ledger
from soak_processes import KILLABLE_AGENT, Deployment

from tests.support.private_postgres import PrivatePostgres

AGENT_RESTART_SECONDS = 2
VICTIMS = ("agent", "api", "metadata")


@dataclass(frozen=True)
class Event:
    at: float  # seconds since the load started
    kind: str  # "agent", "api", "metadata", "postgresql"; "" for what chaos did not do
    what: str
    detail: str
    recovery: float | None = None  # seconds until whole again
    fault: bool = False


@dataclass
class Chaos:
    deployment: Deployment
    postgres: PrivatePostgres
    ledger: Ledger
    interval: float
    outage_seconds: float
    events: list[Event] = field(default_factory=list)
    started: float = 0.0
    killed: set[str] = field(default_factory=set)  # agents being restarted by this loop
    action_started: float = 0.0

    def schedule(self, duration: float) -> list[tuple[float, str]]:
        """(seconds since the start, action): one action per interval, the PostgreSQL restart
        after the first round of kills (or in the last slot of a run too short for that)."""
        slots = [self.interval * k for k in range(1, int(duration / self.interval) + 1)]
        slots = [t for t in slots if t < duration - self.interval / 2] or [duration / 2]
        outage_slot = slots[min(len(VICTIMS), len(slots) - 1)]
        plan, turn = [], 0
        for t in slots:
            if t == outage_slot:
                plan.append((t, "postgresql"))
            else:
                plan.append((t, VICTIMS[turn % len(VICTIMS)]))
                turn += 1
        return plan

    def run(self, stop: threading.Event, duration: float) -> None:
        self.started = time.time()
        for at, action in self.schedule(duration):
            while time.time() - self.started < at:
                if stop.wait(min(1.0, at - (time.time() - self.started))):
                    return
                self.supervise()
            self.action_started = time.time()
            if action == "postgresql":
                self._restart_postgres()
            elif action == "agent":
                self._kill_agent()
            else:
                self._kill_worker(action)
        while not stop.wait(1.0):
            self.supervise()

    def warmed_up(self) -> float | None:
        """Seconds since the start at which every kind of fault had happened once and its
        node had settled (half an interval later); None: not every kind happened."""
        kinds = ("postgresql", *VICTIMS)
        firsts = [next((e for e in self.events if e.kind == k), None) for k in kinds]
        if any(e is None for e in firsts):
            return None
        return max(e.at + (e.recovery or 0) for e in firsts if e) + self.interval / 2

    def _event(
        self,
        what: str,
        detail: str,
        recovery: float | None = None,
        *,
        kind: str = "",
        fault: bool = False,
    ) -> None:
        at = self.action_started if recovery is not None else time.time()
        self.events.append(Event(at - self.started, kind, what, detail, recovery, fault))

    def supervise(self) -> None:
        for name, code in self.deployment.nodes_alive().items():
            if code is not None and not any(e.what == f"{name} exited" for e in self.events):
                self._event(f"{name} exited", f"status {code}", fault=True)
        for host, code in self.deployment.exited_agents().items():
            if host in self.killed:
                continue
            tail = self.deployment.log_tail(f"agent-{host}", 20)
            self._event(f"agent {host} exited on its own", f"status {code}\n{tail}", fault=True)
            time.sleep(AGENT_RESTART_SECONDS)
            self.deployment.start_agent(host)

    def _kill_agent(self) -> None:
        self.killed.add(KILLABLE_AGENT)
        began = time.monotonic()
        pid = self.deployment.kill_agent(KILLABLE_AGENT)
        self.ledger.kill("agent")
        time.sleep(AGENT_RESTART_SECONDS)
        self.deployment.start_agent(KILLABLE_AGENT)
        self.killed.discard(KILLABLE_AGENT)
        self._event(
            "SIGKILL",
            f"agent {KILLABLE_AGENT} (pid {pid}), started again",
            time.monotonic() - began,
            kind="agent",
        )

    def _kill_worker(self, node: str) -> None:
        began = time.monotonic()
        pid = self.deployment.kill_worker(node)
        self.ledger.kill(node)
        if pid is None:
            self._event("SIGKILL", f"{node}: no worker to kill", fault=True)
            return
        self.deployment.wait_workers(node)
        self._event("SIGKILL", f"{node} worker (pid {pid})", time.monotonic() - began, kind=node)

    def _restart_postgres(self) -> None:
        stopped = time.time()
        self.postgres.stop()
        time.sleep(self.outage_seconds)
        self.postgres.start()
        back = self.postgres.wait_answering()
        self.ledger.outage = (stopped, back)
        self._event(
            "PostgreSQL restart",
            f"down {back - stopped:.1f} s (pg_ctl stop -m fast, start)",
            back - stopped,
            kind="postgresql",
        )
