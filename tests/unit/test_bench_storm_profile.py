"""bench/storm_profile.py's thread names, as the storm's profile section writes them."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from storm_profile import thread_name  # noqa: E402


def test_pool_threads_are_named_by_kind():
    assert thread_name("thread (0x7f01): uvloop_3") == "uvloop_N"
    assert thread_name("thread (0x7f02): metadata-access-audit") == "metadata-access-audit"


def test_a_name_read_as_garbage_does_not_reach_the_docs():
    # Seen: a thread caught while starting, its name read from memory as NULs and stray bytes.
    assert thread_name("thread (0x7f03): \x00\x00 (\u7ce0)") == "(unnamed)"
    assert thread_name("thread (0x7f04):  ") == "(unnamed)"
