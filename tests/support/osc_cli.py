"""Running the real ``openstack`` command (or the python of its venv) with one test's
clouds.yaml, recording each run's arguments and time."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

TOKEN = "alice:proj"


RUN_TIMEOUT = 120  # seconds for one `openstack` run; normally 1.5-3 s


class Cli:
    """Runs ``openstack`` (or the python of its venv) with the clouds.yaml of one test."""

    def __init__(self, binary: Path, env: dict[str, str], cwd: Path) -> None:
        self.binary, self.env, self.cwd = binary, env, cwd
        self.runs: list[tuple[list[str], float]] = []

    def _run(self, argv: list[str], ok: bool) -> subprocess.CompletedProcess[str]:
        started = time.monotonic()
        result = subprocess.run(
            argv,
            env=self.env,
            cwd=self.cwd,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
        )
        self.runs.append((argv[1:], time.monotonic() - started))
        if ok and result.returncode != 0:
            pytest.fail(
                f"{' '.join(argv)} exited {result.returncode}\n"
                f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
            )
        if not ok and result.returncode == 0:
            pytest.fail(f"{' '.join(argv)} unexpectedly succeeded\n{result.stdout}")
        return result

    def __call__(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        return self._run([str(self.binary), *args], ok)

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "-f", "json").stdout)

    def python(self, script: Path, *args: str) -> subprocess.CompletedProcess[str]:
        """Run ``script`` with the python of OSC's venv (openstacksdk is installed there)."""
        return self._run([str(self.binary.parent / "python"), str(script), *args], True)
