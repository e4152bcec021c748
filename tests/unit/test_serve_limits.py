"""``cloudseed serve`` raises its open files limit: each waiting long-poll holds a socket, and
the usual soft limit (1,024) is far below ``[metadata] max_waiters``. Run in a child process
whose limits are set first, so this process keeps its own."""

from __future__ import annotations

import json
import resource
import subprocess
import sys

CHILD = """
import json, logging, resource
from cloudseed.listening import raise_open_files_limit
from cloudseed.settings import load_settings
logging.basicConfig(level=logging.WARNING, format="%(message)s")
settings = load_settings(environ={"CLOUDSEED_METADATA__MAX_WAITERS": "{waiters}"})
got = raise_open_files_limit(settings)
print(json.dumps([got, *resource.getrlimit(resource.RLIMIT_NOFILE)]))
"""


def run_with_limits(soft: int, hard: int, waiters: int) -> tuple[list[int], str]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    done = subprocess.run(
        [sys.executable, "-c", CHILD.replace("{waiters}", str(waiters))],
        preexec_fn=limit,  # only setrlimit, in the child before it runs Python
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(done.stdout), done.stderr


def test_soft_limit_raised_to_the_hard_one() -> None:
    hard = min(4096, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
    (got, soft_now, hard_now), log = run_with_limits(256, hard, waiters=1000)
    assert (got, soft_now, hard_now) == (hard, hard, hard)
    assert hard < 1000 or log == ""


def test_a_hard_limit_below_max_waiters_is_logged() -> None:
    (got, soft_now, hard_now), log = run_with_limits(256, 512, waiters=20_000)
    assert (got, soft_now, hard_now) == (512, 512, 512)
    assert "each worker may open 512 files, fewer than the 20000 long-polls" in log
    assert "LimitNOFILE" in log
