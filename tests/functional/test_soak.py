"""The soak under faults (issue 30), short: bench/soak.py's own code for 75 s with 80 guests,
chaos every 10 s (SIGKILLs of an agent and of serve workers, one PostgreSQL restart), asserting
what ``make soak`` asserts over 30 minutes: no 5xx but the outage's 503s, nothing left
unanswered but what a kill cut, every operation ended (failed ones with a reason), every guest
served what the API says, no memory, descriptor or thread growth after warm-up.

It needs PostgreSQL's server binaries (initdb, pg_ctl) for a cluster of its own; without them
it is skipped with the reason, or fails under CLOUDSEED_REQUIRE_DBS=1.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support import databases
from tests.support.private_postgres import Unavailable, binaries

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from soak import run_soak
from soak_plan import Plan
from soak_report import section


def test_short_soak_under_faults(tmp_path: Path) -> None:
    try:
        binaries()
    except Unavailable as exc:
        if databases.required():
            pytest.fail(f"CLOUDSEED_REQUIRE_DBS=1 but {exc}")
        pytest.skip(str(exc))
    plan = Plan.short()
    result = run_soak(plan, tmp_path, log=print)
    report = section(result, command="tests/functional/test_soak.py")
    assert result.faults == [], f"{report}\n\nlogs: {tmp_path}"
    # The chaos happened, and the load was there to feel it.
    assert result.chaos is not None
    kills = [e for e in result.chaos.events if e.what == "SIGKILL"]
    assert len(kills) >= 4, report
    assert result.ledger.outage is not None, report
    assert result.judgement is not None and result.judgement.allowed_503, report
    assert result.users is not None and result.users.accepted["rebuild"] > 0, report
    assert result.findings.numbers["guest views checked"] >= 2 * plan.guests, report
