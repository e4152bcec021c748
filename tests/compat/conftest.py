"""Fixtures for driving the real openstack CLI (python-openstackclient in its own venv) against
a running cloudseed: the binary, an identity stub, a recording proxy, and a ``Cli`` runner with
a clouds.yaml of its own per test."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import osc

TOKEN = "alice:proj"
RUN_TIMEOUT = 120  # seconds for one `openstack` run; normally 1.5-3 s


@pytest.fixture(scope="session")
def openstack() -> Path:
    try:
        return osc.openstack_binary()
    except osc.OscUnavailable as exc:
        if osc.required():
            pytest.fail(f"CLOUDSEED_REQUIRE_DBS=1 but python-openstackclient is unavailable: {exc}")
        pytest.skip(f"python-openstackclient cannot be installed here: {exc}")


@pytest.fixture()
def identity() -> Iterator[osc.IdentityStub]:
    with osc.identity_stub() as stub:
        yield stub


@pytest.fixture()
def proxy(api_url: str) -> Iterator[osc.RecordingProxy]:
    with osc.recording_proxy(api_url) as recorder:
        yield recorder


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


@pytest.fixture()
def cli(
    openstack: Path, proxy: osc.RecordingProxy, identity: osc.IdentityStub, tmp_path: Path
) -> Cli:
    config = tmp_path / "osc"
    config.mkdir()
    env = osc.cloud_env(config, f"{proxy.url}/v2.1", TOKEN, identity.url)
    return Cli(openstack, env, tmp_path)
