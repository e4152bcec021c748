"""The soak's size and length (``Plan``: ``full`` for ``make soak``, ``short`` for the test
suite) and everything a run found (``Result``), which the report reads."""

from __future__ import annotations

from dataclasses import dataclass, field

from soak_chaos import Chaos
from soak_checks import Findings
from soak_guests import GuestFleet
from soak_ledger import Judgement, Ledger
from soak_load import Users
from soak_processes import Sample
from soak_resources import Incarnation, Quiet


@dataclass(frozen=True)
class Plan:
    """How big and how long; ``full`` for ``make soak``, ``short`` for the test suite."""

    seconds: float
    guests: int
    read_period: float  # seconds between a reading guest's visits
    wait_range: tuple[int, int]  # a long-poll's timeout_sec
    waiter_share: float
    op_rate: float  # user requests per second
    op_clients: int
    churn: int  # servers created during the run and alive at once (then deleted)
    fuzz_rate: float  # hostile requests per second
    chaos_interval: float
    outage_seconds: float
    warmup_share: float
    sample_seconds: float
    lease_seconds: int
    delay_ms: int  # the fake driver's time per operation
    grace: float  # seconds after a kill or the outage in which its symptoms are allowed
    memory_allowance_mib: float  # growth after warm-up allowed (bench/soak_resources.py)
    seed: int = 30

    @classmethod
    def full(cls, minutes: float, guests: int = 2000) -> Plan:
        return cls(
            seconds=minutes * 60,
            guests=guests,
            read_period=60,
            wait_range=(30, 120),
            waiter_share=0.25,
            op_rate=8,
            op_clients=4,
            churn=max(20, guests // 10),
            fuzz_rate=5,
            chaos_interval=60,
            outage_seconds=15,
            warmup_share=0.3,
            sample_seconds=10,
            lease_seconds=20,
            delay_ms=200,
            grace=10,
            memory_allowance_mib=8,
        )

    @classmethod
    def short(cls, seconds: float = 75, guests: int = 80) -> Plan:
        return cls(
            seconds=seconds,
            guests=guests,
            read_period=5,
            wait_range=(3, 10),
            waiter_share=0.25,
            op_rate=6,
            op_clients=3,
            churn=15,
            fuzz_rate=4,
            chaos_interval=10,
            outage_seconds=4,
            warmup_share=0.4,
            sample_seconds=1,
            lease_seconds=3,
            delay_ms=100,
            grace=10,
            # After 30 s of warm-up the workers' allocator arenas and caches are still filling
            # (the fuzzer's first routes, bodies and uploads): 8 MiB would fail healthy runs.
            # 24 MiB still catches a leak of ~10 KiB per request (~2,000 requests after
            # warm-up); slow leaks are the full run's to find.
            memory_allowance_mib=24,
        )


@dataclass
class Result:
    plan: Plan
    started: float = 0.0
    load_started: float = 0.0
    load_ended: float = 0.0
    finished: float = 0.0
    seeding_seconds: float = 0.0
    settle_seconds: float = 0.0
    ledger: Ledger = field(default_factory=Ledger)
    judgement: Judgement | None = None
    findings: Findings = field(default_factory=Findings)
    chaos: Chaos | None = None
    incarnations: list[Incarnation] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    quiet_before: Quiet = field(default_factory=dict)
    quiet_after: Quiet = field(default_factory=dict)
    users: Users | None = None
    guests: GuestFleet | None = None
    fuzz_sent: int = 0
    warmup_seconds: float = 0.0  # from the start of the load
    loop_lag: float = 0.0  # the most the load generator's event loop ran late, in seconds
    logged: list[tuple[str, str, int]] = field(default_factory=list)  # (log, ERROR line, count)
    errors: list[str] = field(default_factory=list)  # the soak's own failures

    @property
    def faults(self) -> list[str]:
        found = list(self.errors)
        if self.judgement is not None:
            found += [
                f"{a.channel} {a.kind}: {a.outcome} at +{a.ended - self.load_started:.1f} s: "
                f"{a.detail}"
                for a in self.judgement.faults
            ]
        found += self.findings.faults
        if self.chaos is not None:
            found += [f"{e.what}: {e.detail}" for e in self.chaos.events if e.fault]
        return found
