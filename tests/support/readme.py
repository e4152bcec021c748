"""The README's walkthroughs as commands: what tests/e2e/test_readme.py runs (each twice) and
bench/readme_walkthrough.py times, read from README.md itself."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRY_IT = "## Try it"
BOOT_A_REAL_VM = "## Boot a real VM"
IMAGE = REPO / ".cache" / "images" / "debian-12-cloudseed.qcow2"
# A network, mount and PID namespace of its own; the PID namespace's first process is bash, so
# everything the walkthrough starts ends when bash does.
NAMESPACES = ("unshare", "--net", "--mount", "--pid", "--fork", "--mount-proc")


def walkthrough(readme: str, section: str = BOOT_A_REAL_VM) -> str:
    """The shell blocks of one of the README's walkthrough sections, joined in order."""
    start = readme.index(section)
    end = readme.find("\n## ", start + len(section))
    text = readme[start : end if end != -1 else None]
    blocks = re.findall(r"^```sh\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)
    assert blocks, f"no sh block under {section!r}"
    return "\n".join(blocks)


def namespace_preamble(var: Path) -> str:
    """What a walkthrough needs in its namespaces before the README's first command: the
    loopback up, ``var`` as the repository's ``./var``, no package index, and job control as in
    the interactive shell the README is written for (``kill %1`` then stops the whole job,
    ``make`` and the service it started, as it does for a reader)."""
    return "\n".join(
        [
            "set -e -m",
            "ip link set lo up",
            f"mount --bind {var} {REPO / 'var'}",
            f"cd {REPO}",
            # No index here: make run's `pip install -e .` finds everything in the venv.
            # PIP_NO_BUILD_ISOLATION=0 means "no build isolation" (pip reads the variable as
            # the value of the option's negation), so setuptools in the venv builds it.
            "export PIP_NO_INDEX=1 PIP_NO_BUILD_ISOLATION=0 PIP_DISABLE_PIP_VERSION_CHECK=1",
            "set -x",
        ]
    )


# After a walkthrough's last command (``kill %1``): the job has ended, and nothing answers on
# the compute API's port any more.
STOPPED_CHECK = "\n".join(
    [
        "wait || true",
        "if curl -s -o /dev/null --max-time 5 http://127.0.0.1:8774/healthz; then",
        "    echo 'the service still answers after kill %1' >&2; exit 97",
        "fi",
    ]
)
