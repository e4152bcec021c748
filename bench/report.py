"""What the benchmarks share: the machine's description, the code measured, a percentile, and
writing one section of docs/benchmarks.md between its markers, leaving the other sections as
they are."""

from __future__ import annotations

import contextlib
import math
import os
import platform
import re
import subprocess
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
INTRO = "# Benchmarks\n\nWritten by the scripts in `bench/`; each section between its markers.\n"


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def write_section(path: Path, start: str, end: str, section: str, intro: str = INTRO) -> None:
    """Replace the text between ``start`` and ``end`` in ``path`` (or append it)."""
    block = f"{start}\n{section.strip()}\n{end}"
    document = path.read_text(encoding="utf-8") if path.exists() else intro
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(document):
        document = pattern.sub(lambda _m: block, document, count=1)
    else:
        document = document.rstrip("\n") + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(document, encoding="utf-8")


def percentile(samples: list[float], pct: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


def code_version() -> str:
    """The commit measured, and whether the source differed from it."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", *args], capture_output=True, text=True, check=False, cwd=BENCH_DIR.parent
        )
        return done.stdout.strip()

    version = git("rev-parse", "--short", "HEAD") or "unknown"
    if git("status", "--porcelain", "--", "src"):
        version += " with uncommitted changes in src/"
    if os.environ.get("PYTHONPATH"):
        version += f" (cloudseed imported through PYTHONPATH={os.environ['PYTHONPATH']})"
    return version
