"""The pure half of bench/nova_dropin.py on made-up numbers: the drop-in against issue 31's
targets and the idle queries per node (the benchmark itself needs Nova and wrk and is run by
``make bench-nova-dropin``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from nova_dropin_queries import database_names  # noqa: E402
from nova_dropin_report import (  # noqa: E402
    DROPIN,
    Idle,
    idle_rows,
    idle_table,
    per_second,
    statements_per_worker,
    storm_scenario,
    targets_table,
    verdicts,
    warm_scenario,
)
from side_by_side_report import NGINX, Measurement  # noqa: E402

WARM = warm_scenario(8)
STORM = storm_scenario(2000, 64)
LOW = storm_scenario(2000, 8)  # the drop-in alone
RESULTS = [
    Measurement(WARM, "Nova 34 (uwsgi x2)", 3000.0, 2.0, 20.0),
    Measurement(WARM, "Nova 34 (gunicorn x2)", 1500.0, 5.0, 40.0),
    Measurement(WARM, DROPIN + " (x2)", 33000.0, 0.2, 8.0),
    Measurement(STORM, "Nova 34 (uwsgi x2)", 100.0, 500.0, 2000.0),
    Measurement(STORM, "Nova 34 (gunicorn x2)", 150.0, 400.0, 1800.0),
    Measurement(STORM, DROPIN + " (x2)", 3000.0, 3.0, 40.0),
    Measurement(STORM, NGINX, 50000.0, 1.0, 5.0),
    Measurement(LOW, DROPIN + " (x2)", 2500.0, 1.0, 9.0),
]


def test_each_scenario_is_judged_against_nova_best_server_and_its_own_target() -> None:
    judged = {v.scenario: v for v in verdicts(RESULTS)}
    warm, storm = judged[WARM], judged[STORM]
    assert warm.nova is not None and storm.nova is not None
    assert warm.nova.target == "Nova 34 (uwsgi x2)"
    assert warm.ratio == pytest.approx(11.0)
    assert (warm.goal, warm.ratio_met, warm.p99_met) == (10.0, True, True)
    # Nova's best in the storm is gunicorn here: 3000 / 150 = 20x, short of 30x.
    assert storm.nova.target == "Nova 34 (gunicorn x2)"
    assert storm.ratio == pytest.approx(20.0)
    assert (storm.goal, storm.ratio_met, storm.p99_met) == (30.0, False, False)
    assert storm.nginx is not None and storm.nginx.rps == 50000.0
    table = targets_table(RESULTS)
    assert "| 11.0x | 10x: met | 8.00 ms | met | — |" in table
    assert "| 20.0x | 30x: **missed** | 40.00 ms | **missed** | 50,000 |" in table


def test_the_drop_in_alone_is_judged_on_its_p99_only() -> None:
    alone = {v.scenario: v for v in verdicts(RESULTS)}[LOW]
    assert (alone.nova, alone.ratio, alone.ratio_met, alone.p99_met) == (None, None, None, True)
    assert f"| {LOW} | 2,500 | — | — | — | 9.00 ms | met | — |" in targets_table(RESULTS)
    only_nova = [r for r in RESULTS if not r.target.startswith(DROPIN)]
    assert verdicts(only_nova) == []


def test_statements_per_worker_leave_out_processes_that_sent_none() -> None:
    before = {100: {"cell1": 7}, 101: {"cell1": 10, "api": 3}}
    after = {100: {"cell1": 7}, 101: {"cell1": 70, "api": 6}, 102: {"cell1": 60, "cell2": 60}}
    rates = statements_per_worker(before, after, 30.0)
    # 100 (the supervisor) sent nothing in the window; 102 started in it and counts from 0.
    assert rates == {101: {"cell1": 2.0, "api": 0.1}, 102: {"cell1": 2.0, "cell2": 2.0}}
    assert per_second({"a": 10}, {"a": 40, "b": 3}, 3.0) == {"a": 10.0, "b": 1.0}


def test_idle_rows_are_nova_databases_in_order_with_the_drop_in_difference() -> None:
    idle = Idle(
        seconds=30.0,
        labels={"db_c1": "cell1", "db_api": "api", "db_c0": "cell0"},
        nova_transactions={"db_api": 0.0, "db_c0": 0.0, "db_c1": 0.5},
        with_dropin_transactions={"db_api": 0.2, "db_c0": 0.0, "db_c1": 4.5},
        statements={1: {"db_c1": 2.0, "db_api": 0.1}, 2: {"db_c1": 2.0, "db_api": 0.1}},
    )
    rows = idle_rows(idle)
    assert [r.database for r in rows] == ["api", "cell0", "cell1"]
    assert [r.dropin for r in rows] == [pytest.approx(0.2), 0.0, 4.0]
    assert [r.statements for r in rows] == [pytest.approx(0.1), 0.0, 2.0]
    table = idle_table(idle)
    assert "(2 workers)" in table
    assert "| **all** | **0.50** | **4.70** | **4.20** | **2.10** |" in table


def test_idle_rows_without_postgresql_show_statements_only() -> None:
    idle = Idle(30.0, {"nova_cell1.sqlite": "cell1"}, {}, {}, {7: {"nova_cell1.sqlite": 0.5}})
    assert "| cell1 | — | — | — | 0.50 |" in idle_table(idle)


def test_nova_databases_are_named_as_the_counters_name_them() -> None:
    names = database_names(
        {
            "api": "postgresql+psycopg2://postgres@127.0.0.1:5432/nova_api_1",
            "cell1": "sqlite:////tmp/x/nova_cell1.sqlite",
        }
    )
    assert names == {"nova_api_1": "api", "nova_cell1.sqlite": "cell1"}


def test_the_storm_of_instances_just_gone_active_is_judged_as_a_storm() -> None:
    active = storm_scenario(2000, 64, just_active=True)
    assert active == "boot storm, 2,000 guests, just gone ACTIVE, 64 conn."
    results = [
        Measurement(active, "Nova 34 (uwsgi x2)", 100.0, 500.0, 2000.0),
        Measurement(active, DROPIN + " (x2)", 3500.0, 3.0, 8.0),
    ]
    (judged,) = verdicts(results)
    assert (judged.goal, judged.ratio_met, judged.p99_met) == (30.0, True, True)
