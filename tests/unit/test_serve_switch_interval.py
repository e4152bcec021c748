"""A serve worker lets its event loop take the GIL back from a busy thread of its own within
a tenth of a millisecond (serve.py's ``LOOP_FIRST_SWITCH_INTERVAL``): the loop gives the GIL
up at every socket call (uvloop: at every callback), and with CPython's 5 ms it waited up to
5 ms each time a load of guests or the embedded agent's build held it. Run in a child
process, which the change would otherwise leave behind in the test runner."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

CHILD = """
import json, os, sys, threading, time
before = sys.getswitchinterval()
from cloudseed.serve import favour_the_event_loop
favour_the_event_loop()
spinning = True
def spin():
    while spinning:
        pass
busy = threading.Thread(target=spin)
busy.start()
r, w = os.pipe()
started = time.perf_counter()
for _ in range(100):
    os.write(w, b"x")  # each call gives the GIL up, and takes it back from the busy thread
    os.read(r, 1)
handoffs = time.perf_counter() - started
spinning = False
busy.join()
print(json.dumps([before, sys.getswitchinterval(), handoffs]))
"""


def test_a_worker_takes_the_gil_back_within_a_tenth_of_a_millisecond() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, check=True, timeout=60
    )
    before, after, handoffs = json.loads(done.stdout)
    assert before == 0.005  # CPython's default, for the record of what changed
    assert after == pytest.approx(0.0001)  # kept in whole microseconds
    # 200 GIL handoffs from a spinning thread: 0.02 s at most from the interval itself; the
    # rest of the margin is for a loaded machine. This bound catches a loop starved outright,
    # not the setting (with the default the probe read 134-546 ms here, under its 1 s bound):
    # ``after`` checks the setting.
    assert handoffs < 0.8
