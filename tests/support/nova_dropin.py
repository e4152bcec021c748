"""``cloudseed nova-metadata`` as a real process on a Nova deployment's ``nova.conf``: started
with this interpreter (``python -m cloudseed``, the code under test first on ``PYTHONPATH``)
on a kernel-chosen loopback port, ready once ``/`` answers, stopped afterwards.

``running_dropin(conf, directory)`` yields its base URL; its output goes to
``directory/nova-metadata.log`` (``DropIn.log()``). If the port was taken between choosing and
binding it, the process exits and is started again on another one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

import cloudseed
from tests.support.ports import free_port
from tests.support.waiting import wait_until

START_TIMEOUT = 60
START_ATTEMPTS = 3
# The source tree of the cloudseed this test imports: the process must run the same code.
SOURCE = Path(cloudseed.__file__).resolve().parents[1]


@dataclass
class DropIn:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLOUDSEED_", "OS_"))}
    paths = [str(SOURCE), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=15)


@contextmanager
def running_dropin(
    conf: Path, directory: Path, *, workers: int = 1, extra_conf: tuple[Path, ...] = ()
) -> Iterator[DropIn]:
    """``cloudseed nova-metadata --config-file conf [--config-file extra...] --listen
    127.0.0.1:PORT --workers N``, answering."""
    directory.mkdir(parents=True, exist_ok=True)
    log_path = directory / "nova-metadata.log"
    config_args = [arg for path in (conf, *extra_conf) for arg in ("--config-file", str(path))]
    for _attempt in range(START_ATTEMPTS):
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "cloudseed",
                    "nova-metadata",
                    *config_args,
                    "--listen",
                    f"127.0.0.1:{port}",
                    "--workers",
                    str(workers),
                ],
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
                env=_environment(),
                cwd=directory,
            )
        dropin = DropIn(url, process, log_path)

        def answered_or_died(dropin: DropIn = dropin) -> str | None:
            if dropin.process.poll() is not None:
                return "died"
            try:
                httpx.get(dropin.url + "/", timeout=5)
                return "answers"
            except httpx.TransportError:
                return None

        try:
            outcome = wait_until(
                answered_or_died,
                timeout=START_TIMEOUT,
                interval=0.05,
                max_interval=0.2,
                what="cloudseed nova-metadata answering",
            )
            if outcome == "answers":
                yield dropin
                return
        finally:
            _stop(process)
    raise RuntimeError(
        f"cloudseed nova-metadata would not start (exit {process.returncode}):\n{dropin.log()}"
    )
