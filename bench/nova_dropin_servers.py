"""The servers bench/nova_dropin.py compares on one Nova deployment (tests/support/nova_peer.py):
Nova 34's metadata API under uwsgi and under gunicorn, and ``cloudseed nova-metadata``, each
with the same number of worker processes and the same ``nova.conf``; each can be stopped and
started again (a cold cache); and the bulk seed that gives the deployment its storm's guests.

Nova's WSGI entry point reads its configuration files from ``OS_NOVA_CONFIG_DIR`` and
``OS_NOVA_CONFIG_FILES`` (it parses ``sys.argv`` with oslo.config, so neither server is given
arguments it would see): uwsgi runs it as ``--module nova.wsgi.metadata:application`` with
``--http-socket`` (the team's peers README: uwsgi is Nova's faster server here; it closes every
connection, so wrk counts socket errors besides the requests), gunicorn from a
``gunicorn.conf.py`` in a directory of its own. Each server runs in a session of its own and is
stopped by its process group, which holds only what it started.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support import nova_peer, tool_venv
from tests.support.nova_dropin import DropIn, running_dropin
from tests.support.ports import free_port
from tests.support.waiting import wait_until

UWSGI_REQUIREMENT = "uwsgi>=2.0.28,<2.1"
START_TIMEOUT = 120.0
CONFIG_FILES = "api-paste.ini;nova.conf"
APP = "nova.wsgi.metadata:application"


def ensure_uwsgi(venv: Path) -> Path:
    """uwsgi in Nova's venv (``pip install uwsgi``: it compiles, about a minute here)."""
    uwsgi = venv / "bin" / "uwsgi"
    if not uwsgi.exists():
        print("installing uwsgi into Nova's venv (compiles; about a minute) ...", flush=True)
        tool_venv.pip_install(
            venv, UWSGI_REQUIREMENT, timeout=900, unavailable=nova_peer.NovaUnavailable
        )
    return uwsgi


def bulk_seed(nova: nova_peer.Nova, guests: int) -> list[str]:
    """``guests`` more instances through Nova's objects (tests/support/nova_seed.py --bulk),
    in one run of Nova's interpreter; their uuids."""
    result = subprocess.run(
        [
            str(nova.venv / "bin" / "python"),
            str(nova_peer.SEED_SCRIPT),
            "--config-file",
            str(nova.conf),
            "--project-id",
            nova.project_id,
            "--user-id",
            nova.user_id,
            "--bulk",
            str(guests),
        ],
        capture_output=True,
        text=True,
        timeout=3600,
        env=tool_venv.clean_env(),
        cwd=nova.directory,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"nova_seed.py --bulk failed:\n{result.stderr[-4000:]}")
    uuids: list[str] = json.loads(result.stdout.strip().splitlines()[-1])["uuids"]
    return uuids


@dataclass
class Served:
    """One server process (its group) answering at ``url``."""

    name: str
    url: str
    process: subprocess.Popen[bytes]
    log: Path


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the group we started (uwsgi stops on it with --die-on-term), then SIGKILL
    to whatever of it is left."""
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    with suppress(ProcessLookupError):  # workers the master left behind
        os.killpg(process.pid, signal.SIGKILL)


def _wait_answering(served: Served) -> None:
    def answered_or_died() -> str | None:
        if served.process.poll() is not None:
            return "died"
        try:
            httpx.get(served.url + "/", timeout=5)
        except httpx.TransportError:
            return None
        return "answers"

    outcome = wait_until(
        answered_or_died, timeout=START_TIMEOUT, interval=0.2, what=f"{served.name} answering"
    )
    if outcome == "died":
        tail = served.log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{served.name} exited ({served.process.returncode}):\n{tail}")


def _nova_env(nova: nova_peer.Nova) -> dict[str, str]:
    return tool_venv.clean_env(
        {"OS_NOVA_CONFIG_DIR": str(nova.directory), "OS_NOVA_CONFIG_FILES": CONFIG_FILES}
    )


def _uwsgi_command(uwsgi: Path, port: int, workers: int) -> list[str]:
    return [
        str(uwsgi),
        "--http-socket",
        f"127.0.0.1:{port}",
        "--master",
        "--processes",
        str(workers),
        "--need-app",
        "--disable-logging",
        "--listen",
        "1024",
        "--die-on-term",  # SIGTERM stops it (uwsgi's own meaning of SIGTERM is "reload")
        "--module",
        APP,
    ]


def _gunicorn_directory(nova: nova_peer.Nova, port: int, workers: int) -> Path:
    workdir = nova.directory / "bench-gunicorn"
    workdir.mkdir(exist_ok=True)
    (workdir / "gunicorn.conf.py").write_text(f"""\
# No command-line arguments: Nova's WSGI entry point parses sys.argv with oslo.config.
wsgi_app = {APP!r}
bind = ["127.0.0.1:{port}"]
workers = {workers}
backlog = 1024
timeout = 120
graceful_timeout = 3
errorlog = {str(nova.directory / "bench-gunicorn.log")!r}
""")
    return workdir


def start_nova(nova: nova_peer.Nova, server: str, workers: int) -> Served:
    """Nova's metadata API under ``server`` ("uwsgi" or "gunicorn"), answering."""
    port = free_port()
    log = nova.directory / f"bench-{server}.out"
    if server == "uwsgi":
        command, cwd = _uwsgi_command(ensure_uwsgi(nova.venv), port, workers), nova.directory
    else:
        command = [str(nova.venv / "bin" / "gunicorn")]
        cwd = _gunicorn_directory(nova, port, workers)
    env = _nova_env(nova)
    env.pop("GUNICORN_CMD_ARGS", None)
    with log.open("ab") as out:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    served = Served(f"Nova ({server})", f"http://127.0.0.1:{port}", process, log)
    try:
        _wait_answering(served)
    except BaseException:
        _stop_group(process)
        raise
    return served


@contextmanager
def _environ(changes: dict[str, str]) -> Iterator[None]:
    """os.environ with ``changes`` while the block runs (running_dropin copies it)."""
    saved = {name: os.environ.get(name) for name in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@dataclass
class Targets:
    """The servers of one run by name, each restartable; stopped when the run ends."""

    nova: nova_peer.Nova
    workers: int
    servers: list[str]  # "uwsgi", "gunicorn", "dropin", in the order they are measured
    running: dict[str, ExitStack] = field(default_factory=dict)
    urls: dict[str, str] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)  # the main process of each

    def start(
        self,
        name: str,
        environment: dict[str, str] | None = None,
        extra_conf: tuple[Path, ...] = (),
    ) -> str:
        """Start ``name`` (stopped first if it runs); its URL once it answers.
        ``environment``, ``extra_conf``: variables for the drop-in's processes (the statement
        counter) and configuration files after nova.conf."""
        self.stop(name)
        stack = ExitStack()
        try:
            if name == "dropin":
                with _environ(environment or {}):
                    dropin: DropIn = stack.enter_context(
                        running_dropin(
                            self.nova.conf,
                            self.nova.directory / "dropin",
                            workers=self.workers,
                            extra_conf=extra_conf,
                        )
                    )
                url, pid = dropin.url, dropin.process.pid
            else:
                served = start_nova(self.nova, name, self.workers)
                stack.callback(_stop_group, served.process)
                url, pid = served.url, served.process.pid
        except BaseException:
            stack.close()
            raise
        self.running[name] = stack
        self.urls[name] = url
        self.pids[name] = pid
        return url

    def stop(self, name: str) -> None:
        stack = self.running.pop(name, None)
        self.urls.pop(name, None)
        self.pids.pop(name, None)
        if stack is not None:
            stack.close()

    def stop_all(self) -> None:
        for name in list(self.running):
            self.stop(name)


@contextmanager
def targets(nova: nova_peer.Nova, workers: int, servers: list[str]) -> Iterator[Targets]:
    chosen = Targets(nova, workers, servers)
    try:
        yield chosen
    finally:
        chosen.stop_all()
