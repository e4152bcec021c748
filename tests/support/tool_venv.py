"""A third-party tool in a venv of its own under ``<repo>/.cache`` (git-ignored): created and
given pinned requirements from PyPI by uv (the test extra's; it resolves as pip does, and
builds a venv of two hundred wheels in seconds where pip takes about 40 s of CPU, which a fresh
clone's CI pays for every tool), and reused while it works. The venv gets pip too (``--seed``),
for whoever runs the tool's own pip.

The tools (python-openstackclient, with or without cloudseed's plugin: osc.py, osc_plugin.py;
Keystone: keystone.py; tempest: tempest.py) each say what "works" means and keep their own
cache directory, lock and marker; this module holds what they share. Concurrent builders
(pytest-xdist workers, two sessions) serialise on ``locked(name)``. A registry that cannot be
reached (or is too slow) raises the tool's own ``Unavailable`` subclass, so that callers skip,
or fail under ``CLOUDSEED_REQUIRE_DBS=1`` (CI); any other pip failure is a ``RuntimeError``.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = REPO_ROOT / ".cache"
# Written into a venv once its requirements are installed (keystone.py, tempest.py): a venv
# without it, or with other requirements in it, is rebuilt.
MARKER = "cloudseed-requirements.txt"

# Words in uv's (or a build backend's pip) output that mean "the registry could not be
# reached", as opposed to a resolver or build failure, which is a real error everywhere. Tools
# add their own.
NETWORK_ERRORS = (
    "Failed to fetch",
    "error sending request",
    "dns error",
    "operation timed out",
    "Could not fetch URL",
    "Max retries exceeded",
    "NewConnectionError",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "Connection refused",
    "ConnectTimeoutError",
    "ReadTimeoutError",
)
# Seconds uv waits on one HTTP read before it retries (three times, its default).
HTTP_TIMEOUT = "30"


class Unavailable(Exception):
    """The tool could not be installed because the package registry is unreachable."""


# Not passed on to a tool: this project's venv, and PYTHONDONTWRITEBYTECODE. uv installs no
# bytecode, so a tool whose environment forbids writing it compiles every module it imports
# from source at every start: `openstack --version` took 2.7 s of CPU that way, 1.15 s with its
# bytecode written once into its venv (ours, under .cache).
WITHHELD = frozenset({"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE"})


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The parent's environment without any OS_* variable, nor ``WITHHELD``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_") and k not in WITHHELD}
    env["PYTHONWARNINGS"] = "ignore"  # the tools' own deprecation noise is not ours to judge
    if extra:
        env.update(extra)
    return env


def uv() -> str:
    """The uv of the venv running the tests (``make test-venv`` installs the test extra)."""
    beside = Path(sys.executable).with_name("uv")
    found = str(beside) if beside.is_file() else shutil.which("uv")
    if found is None:
        raise RuntimeError("uv is not installed: it comes with the test extra (make test-venv)")
    return found


def create(venv: Path, unavailable: type[Unavailable]) -> None:
    """A new venv at ``venv`` (replacing whatever is there) on the tests' own Python."""
    try:
        subprocess.run(
            [uv(), "venv", "--quiet", "--seed", "--clear", "--python", sys.executable, str(venv)],
            check=True,
            capture_output=True,
            timeout=300,
            env=clean_env(),
        )
    except subprocess.TimeoutExpired as exc:
        raise unavailable(f"creating the venv took longer than {exc.timeout} s") from exc


def pip_install(
    venv: Path,
    *args: str,
    timeout: float,
    unavailable: type[Unavailable],
    network_errors: tuple[str, ...] = NETWORK_ERRORS,
) -> None:
    """``pip install <args>`` into ``venv``, done by ``uv pip install``."""
    what = " ".join(args)
    try:
        result = subprocess.run(
            [uv(), "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=clean_env({"UV_HTTP_TIMEOUT": HTTP_TIMEOUT}),
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise unavailable(
            f"installing {what} took longer than {exc.timeout} s (registry too slow or unreachable)"
        ) from exc
    if result.returncode != 0:
        output = result.stdout[-4000:] + result.stderr[-4000:]
        if any(marker in output for marker in network_errors):
            raise unavailable(
                f"cannot install {what}: the package registry is "
                f"unreachable:\n{result.stderr[-1500:]}"
            )
        raise RuntimeError(f"pip install {what} failed (exit {result.returncode}):\n{output}")


def build(
    venv: Path,
    requirements: tuple[str, ...],
    *,
    timeout: float,
    unavailable: type[Unavailable],
    network_errors: tuple[str, ...] = NETWORK_ERRORS,
) -> None:
    """A fresh venv at ``venv`` with ``requirements``, marked as built last: a venv without
    the marker (an interrupted build) is rebuilt from scratch, and a failed build leaves
    nothing behind."""
    if venv.exists():
        shutil.rmtree(venv)
    try:
        create(venv, unavailable)
        pip_install(
            venv,
            *requirements,
            timeout=timeout,
            unavailable=unavailable,
            network_errors=network_errors,
        )
    except (Unavailable, RuntimeError):
        shutil.rmtree(venv, ignore_errors=True)
        raise
    write_marker(venv, requirements)


def answers(venv: Path, *command: str | Path, naming: str = "", prints: bool = False) -> bool:
    """Whether ``command`` (a tool of ``venv`` with its arguments: ``--version``, an import)
    exits 0, saying ``naming`` when given and printing something on stdout when ``prints``: a
    tool's venv that works. The venv remembers that it did (a stamp per command), so that later
    processes, every test worker of every run, do not pay the tool's start-up again (Nova's
    ``nova-manage --version``: 6 s of CPU). A venv built again starts without stamps (``build``
    begins from an empty directory), and one whose interpreter is gone is asked again."""
    argv = [str(part) for part in command]
    digest = hashlib.sha256("\0".join(argv).encode()).hexdigest()[:16]
    stamp = venv / f".cloudseed-answered-{digest}"
    if stamp.is_file() and (venv / "bin" / "python").exists():
        return True
    try:
        result = subprocess.run(
            argv, capture_output=True, text=True, timeout=120, env=clean_env(), check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    if result.returncode != 0 or naming not in result.stdout + result.stderr:
        return False
    if prints and not result.stdout.strip():
        return False
    stamp.touch()
    return True


def has_marker(venv: Path, requirements: tuple[str, ...]) -> bool:
    marker = venv / MARKER
    return marker.is_file() and marker.read_text() == "\n".join(requirements) + "\n"


def write_marker(venv: Path, requirements: tuple[str, ...]) -> None:
    (venv / MARKER).write_text("\n".join(requirements) + "\n")


@contextmanager
def locked(name: str) -> Iterator[None]:
    """Hold ``.cache/<name>.lock``: another process may be building the same venv."""
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with open(CACHE_DIR / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# The venvs this process has seen work: their ``works`` (marker files, and ``answers``'s
# stamps once a tool has started) is not asked again in this process.
_WORKING: set[Path] = set()


def cached(venv: Path, works: Callable[[Path], bool], build: Callable[[Path], None]) -> Path:
    """``venv`` once ``works(venv)``: built by ``build`` under the lock named after it when it
    does not (and still does not once the lock is held: it may have been built meanwhile)."""
    if venv in _WORKING:
        return venv
    if not works(venv):
        with locked(venv.name):
            if not works(venv):
                build(venv)
    _WORKING.add(venv)
    return venv
