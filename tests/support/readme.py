"""The README's "Boot a real VM" walkthrough as commands: what tests/e2e/test_readme.py runs
and bench/readme_walkthrough.py times, read from README.md itself."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SECTION = "## Boot a real VM"
IMAGE = REPO / ".cache" / "images" / "debian-12-cloudseed.qcow2"
# A network, mount and PID namespace of its own; the PID namespace's first process is bash, so
# everything the walkthrough starts ends when bash does.
NAMESPACES = ("unshare", "--net", "--mount", "--pid", "--fork", "--mount-proc")


def walkthrough(readme: str) -> str:
    """The shell blocks of the README's walkthrough section, joined in order."""
    start = readme.index(SECTION)
    end = readme.find("\n## ", start + len(SECTION))
    section = readme[start : end if end != -1 else None]
    blocks = re.findall(r"^```sh\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)
    assert blocks, f"no sh block under {SECTION!r}"
    return "\n".join(blocks)
