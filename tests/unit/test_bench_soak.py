"""The soak's judgement (bench/soak_ledger.py, bench/soak_resources.py) on made-up answers and
samples: which 5xx and cut requests the chaos explains, and which growth of memory, threads
and descriptors fails a run. The soak itself runs in tests/functional/test_soak.py and
``make soak``."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from soak_ledger import Ledger, judge
from soak_processes import Sample, Usage
from soak_resources import descriptor_faults, incarnations, memory_faults

T0 = 1_000_000.0


def ledger_with_chaos() -> Ledger:
    ledger = Ledger()
    ledger.outage = (T0 + 100, T0 + 115)
    ledger.kills = [(T0 + 50, "api"), (T0 + 200, "metadata")]
    return ledger


def answered(ledger: Ledger, channel: str, status: int, at: float) -> None:
    ledger.answer(channel, "k", status, at, ended=at + 0.1)


def cut(ledger: Ledger, channel: str, error: Exception, at: float) -> None:
    ledger.failure(channel, "k", error, at, ended=at + 0.1)


def test_503s_are_allowed_only_in_the_outage() -> None:
    ledger = ledger_with_chaos()
    answered(ledger, "api", 503, T0 + 101)
    answered(ledger, "guest", 503, T0 + 120)  # within the grace after the outage
    answered(ledger, "guest", 503, T0 + 140)  # long after: a fault
    answered(ledger, "api", 500, T0 + 105)  # a 500 is never the outage's
    answered(ledger, "api", 200, T0 + 105)
    verdict = judge(ledger, grace=10)
    assert [a.started for a in verdict.allowed_503] == [T0 + 101, T0 + 120]
    assert [(a.outcome, a.started) for a in verdict.faults] == [
        ("503", T0 + 140),
        ("500", T0 + 105),
    ]


def test_cut_requests_are_allowed_only_near_a_kill_of_their_node() -> None:
    ledger = ledger_with_chaos()
    cut(ledger, "api", httpx.ReadError("reset"), T0 + 51)  # the API worker was killed
    cut(ledger, "guest", httpx.ReadError("reset"), T0 + 51)  # the metadata node was not
    cut(ledger, "guest", httpx.RemoteProtocolError("closed"), T0 + 203)
    cut(ledger, "fuzz-api", httpx.ReadTimeout("hang"), T0 + 51)  # a hang is never a kill's
    # Under way at the kill, its reset noticed 20 s late by a busy client: the kill's.
    ledger.failure("api", "k", httpx.ReadError("reset"), T0 + 49, ended=T0 + 70)
    cut(ledger, "api", httpx.ReadError("reset"), T0 + 75)  # started long after it: a fault
    verdict = judge(ledger, grace=10)
    assert [(a.channel, a.started) for a in verdict.allowed_resets] == [
        ("api", T0 + 51),
        ("guest", T0 + 203),
        ("api", T0 + 49),
    ]
    assert [(a.channel, a.outcome, a.started) for a in verdict.faults] == [
        ("guest", "ReadError", T0 + 51),
        ("fuzz-api", "ReadTimeout", T0 + 51),
        ("api", "ReadError", T0 + 75),
    ]


def samples(role: str, pid: int, rss: list[int], *, sockets: int = 10, threads: int = 5):
    return [
        Sample(T0 + 10 * i, role, pid, Usage(kib, 20, sockets, threads))
        for i, kib in enumerate(rss)
    ]


def test_memory_growth_after_warm_up_fails_only_the_whole_run_processes() -> None:
    flat = samples("api worker 1", 1, [90_000, 100_000, 100_500, 101_000, 101_500])
    leaking = samples("metadata worker 1", 2, [90_000, 100_000, 105_000, 110_000, 115_000])
    killed = samples("api worker 2", 3, [90_000, 100_000, 130_000])  # gone before the end
    found = incarnations(flat + leaking + killed, load_start=T0, warm_end=T0 + 10, load_end=T0 + 40)
    assert {i.role: i.whole_run for i in found} == {
        "api worker 1": True,
        "metadata worker 1": True,
        "api worker 2": False,
    }
    faults = memory_faults(found, allowance_mib=8)
    assert len(faults) == 1 and faults[0].startswith("metadata worker 1 (pid 2) grew 14.6 MiB")


def test_sockets_gained_after_warm_up_are_allowed_for() -> None:
    # 400 more connections (the other worker's clients, after it was killed) at 21 KiB each.
    series = samples("metadata worker 1", 2, [90_000, 100_000, 110_000])
    series[-1] = Sample(series[-1].at, series[-1].role, 2, Usage(110_000, 420, 410, 5))
    found = incarnations(series, load_start=T0, warm_end=T0 + 10, load_end=T0 + 20)
    assert memory_faults(found, allowance_mib=8) == []


def test_threads_may_move_in_a_band_but_not_climb() -> None:
    band = samples("api worker 1", 1, [90_000] * 4, threads=5)
    climbing = samples("metadata worker 1", 2, [90_000] * 2, threads=5)
    climbing += samples("metadata worker 1", 2, [90_000] * 2, threads=20)
    climbing = [Sample(T0 + 10 * i, s.role, s.pid, s.usage) for i, s in enumerate(climbing)]
    found = incarnations(band + climbing, load_start=T0, warm_end=T0 + 15, load_end=T0 + 30)
    faults = memory_faults(found, allowance_mib=8)
    assert faults == ["metadata worker 1 (pid 2) went from 5 threads during warm-up to 20 after it"]


def test_descriptors_back_to_where_they_were_once_clients_are_gone() -> None:
    before = {
        "api worker 1": (1, Counter({"file": 13, "database": 5, "listening": 2})),
        "api worker 2": (2, Counter({"file": 13})),
    }
    after = {
        "api worker 1": (1, Counter({"file": 15, "database": 9, "listening": 2, "client": 1})),
        "api worker 2": (9, Counter({"file": 17})),  # a new process: compared with nothing
    }
    assert descriptor_faults(before, after) == [
        "api worker 1: 1 client connections left after every client closed",
        "api worker 1: file descriptors 13 before the load, 15 after",
    ]
