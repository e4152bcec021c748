"""What the benchmarks share: the machine's description and writing one section of
docs/benchmarks.md between its markers, leaving the other sections as they are."""

from __future__ import annotations

import contextlib
import platform
import re
from pathlib import Path

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
