"""The housekeeping loop shared by the agent's and the service's background passes."""

from __future__ import annotations

import threading
import time

import pytest

from cloudseed.periodic import Periodic


def test_passes_repeat_and_a_failing_pass_does_not_end_the_loop(caplog):
    passes: list[float] = []
    third = threading.Event()

    def work() -> None:
        passes.append(time.monotonic())
        if len(passes) == 1:
            raise RuntimeError("database away")
        if len(passes) == 3:
            third.set()

    loop = Periodic(work, interval=0.01, name="t", failure="pass failed")
    loop.start()
    loop.start()  # a second start while running starts nothing more
    assert third.wait(5)
    loop.stop()
    assert not loop.running
    assert "pass failed" in caplog.text and "database away" in caplog.text
    done = len(passes)
    time.sleep(0.05)
    assert len(passes) == done  # stopped means no more passes


def test_stop_wakes_the_thread_instead_of_waiting_out_the_interval():
    ran = threading.Event()
    loop = Periodic(ran.set, interval=3600, name="t", failure="x")
    loop.start()
    assert ran.wait(5)  # the first pass at once
    started = time.monotonic()
    loop.stop()
    assert time.monotonic() - started < 2 and not loop.running


@pytest.mark.parametrize("at_once", [True, False])
def test_an_interval_of_zero_is_one_pass(at_once):
    passes: list[int] = []
    loop = Periodic(
        lambda: passes.append(1), interval=0, name="t", failure="x", first_pass_at_once=at_once
    )
    loop.start()
    deadline = time.monotonic() + 5
    while loop.running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert passes == [1]


def test_the_first_pass_can_wait_one_interval():
    ran = threading.Event()
    loop = Periodic(ran.set, interval=0.3, name="t", failure="x", first_pass_at_once=False)
    started = time.monotonic()
    loop.start()
    assert ran.wait(5)
    assert time.monotonic() - started >= 0.3
    loop.stop()
    # Stopped during its first wait: no pass at all, and it can start again afterwards.
    again = Periodic(ran.clear, interval=3600, name="t", failure="x", first_pass_at_once=False)
    again.start()
    again.stop()
    assert ran.is_set()
    again.start()
    assert again.running
    again.stop()
