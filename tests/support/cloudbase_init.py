"""cloudbase-init (the Windows guest agent, from PyPI) in a venv of its own, and one run of its
readers (tests/support/cloudbase_init_client.py) against cloudseed.

``cloudbase_init_venv()`` creates, once, ``<repo>/.cache/cloudbase-init-venv`` (git-ignored)
with ``pip install cloudbase-init==1.1.9`` (pure Python: a cold install takes ~15 s) and
reuses it while its marker names the same requirements and the package imports. When PyPI
cannot be reached it raises ``CloudbaseInitUnavailable``: callers skip, or fail under
``CLOUDSEED_REQUIRE_DBS=1`` (CI).

The readers also need ``bsdtar`` (Debian: libarchive-tools) and mtools, which cloudbase-init's
Windows build ships as ``bsdtar.exe``, ``mlabel.exe`` and ``mcopy.exe``: ``tools(work)``
makes a directory of scripts under those names (mtools is one program that tells its commands
apart by the name it was called by, so a plain link would not do).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support import tool_venv
from tests.support.tool_venv import CACHE_DIR, clean_env

VENV_DIR = CACHE_DIR / "cloudbase-init-venv"
REQUIREMENTS = ("cloudbase-init==1.1.9",)
INSTALL_TIMEOUT = 600
CLIENT = Path(__file__).with_name("cloudbase_init_client.py")
CLIENT_TIMEOUT = 120  # seconds; a run takes about 2 s


class CloudbaseInitUnavailable(tool_venv.Unavailable):
    """cloudbase-init could not be installed because the package registry is unreachable."""


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _works(venv: Path) -> bool:
    if not tool_venv.has_marker(venv, REQUIREMENTS):
        return False
    return tool_venv.answers(
        venv, _python(venv), "-c", "import cloudbaseinit.metadata.services.httpservice"
    )


def _build(venv: Path) -> None:
    tool_venv.build(
        venv, REQUIREMENTS, timeout=INSTALL_TIMEOUT, unavailable=CloudbaseInitUnavailable
    )


def cloudbase_init_python() -> Path:
    """The interpreter of the cached venv with cloudbase-init; builds the venv when needed."""
    return _python(tool_venv.cached(VENV_DIR, _works, _build))


def missing_tools() -> list[str]:
    return [tool for tool in ("bsdtar", "mlabel", "mcopy") if shutil.which(tool) is None]


def tools(work: Path) -> dict[str, str]:
    """The ``bsdtar_path`` and ``mtools_path`` options: Debian's tools under the Windows
    names cloudbase-init runs them by."""
    mtools = work / "mtools"
    mtools.mkdir(parents=True, exist_ok=True)
    for tool in ("mlabel", "mcopy"):
        script = mtools / f"{tool}.exe"
        script.write_text(f'#!/bin/sh\nexec {shutil.which(tool) or tool} "$@"\n')
        script.chmod(0o755)
    return {"bsdtar": shutil.which("bsdtar") or "bsdtar", "mtools": str(mtools)}


@dataclass
class Reading:
    seconds: float
    result: dict[str, Any]


def read(
    python: Path, work: Path, *, http: list[dict[str, Any]], drives: list[dict[str, Any]]
) -> Reading:
    """One run of the client script (its docstring says what ``http`` and ``drives`` hold)."""
    work.mkdir(parents=True, exist_ok=True)
    spec = {"http": http, "drives": drives, "tools": tools(work), "work": str(work)}
    (work / "spec.json").write_text(json.dumps(spec))
    started = time.monotonic()
    done = subprocess.run(
        [str(python), "-I", "-B", str(CLIENT), str(work / "spec.json")],
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT,
        cwd=work,
        env=clean_env({"HOME": str(work), "TMPDIR": str(work)}),
        check=False,
    )
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise AssertionError(
            f"cloudbase-init's readers exited {done.returncode}:\n{done.stderr[-6000:]}"
        )
    return Reading(seconds, json.loads(done.stdout))
