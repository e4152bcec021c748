"""The pure half of bench/side_by_side.py: its ratio table and its chart, on made-up numbers
(the benchmark itself needs Nova and Keystone and is run by ``make bench-nova``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from side_by_side_report import (  # noqa: E402
    CLOUDSEED,
    NGINX,
    Measurement,
    best_nova,
    ratio,
    ratio_table,
    results_table,
    write_chart,
)

WARM = "metadata, one warm guest, 8 conn."
IMPORT = "key pair import (median, sequential)"
RESULTS = [
    Measurement(WARM, "Nova 34 (gunicorn x2)", 2000.0, 2.0, 6.0),
    Measurement(WARM, "Nova 34 (uwsgi x2)", 4000.0, 1.0, 5.0),
    Measurement(WARM, CLOUDSEED, 20000.0, 0.3, 3.0),
    Measurement(WARM, NGINX, 80000.0, 0.1, 1.0),
    Measurement(IMPORT, "Nova 34", None, 40.0, 60.0),
    Measurement(IMPORT, CLOUDSEED, None, 5.0, 9.0),
]


def test_nova_best_server_is_the_fastest_and_ratios_go_both_ways() -> None:
    warm = [r for r in RESULTS if r.scenario == WARM]
    best = best_nova(warm)
    assert best is not None and best.target == "Nova 34 (uwsgi x2)"
    assert ratio(warm[2], best) == pytest.approx(5.0)
    imports = [r for r in RESULTS if r.scenario == IMPORT]
    assert ratio(imports[1], imports[0]) == pytest.approx(8.0)  # a latency ratio: 40 / 5


def test_ratio_table_rows() -> None:
    table = ratio_table(RESULTS, {WARM: ">= 5x Nova"}).splitlines()
    assert len(table) == 4
    assert (
        "| 20,000 req/s | 4,000 req/s (Nova 34 (uwsgi x2)) | 5.0x | 80,000 req/s | 25 % |"
        in (table[2])
    )
    assert "| 5.0 ms | 40.0 ms (Nova 34) | 8.0x | — | — |" in table[3]
    assert len(results_table(RESULTS).splitlines()) == 2 + len(RESULTS)


def test_chart_is_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the bench extra: pip install -e '.[bench]'")
    path = write_chart(RESULTS, tmp_path / "chart.png", "made up")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 5000
