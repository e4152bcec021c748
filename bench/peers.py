"""Real Keystone and Nova 34 beside cloudseed, for bench/side_by_side.py.

The peers are installed and run by the shell scripts of the team's ``peers`` directory (Nova
34.0.0 and Keystone from PyPI into ``$PEERS``, default ``~/.cache/cloudseed-peers``); this module
only calls them by path. Where they are: ``$CLOUDSEED_PEERS_DIR``, else ``../shared/peers``
beside the repository. Without them, or with their venvs not installed, ``PeersUnavailable``
says what to run.

Everything here listens on 127.0.0.1 only. Keystone's port is the scripts' fixed 5000 (the Nova
script points at it), so a run refuses to start while something else holds it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
from storm_host import free_port

BENCH_DIR = Path(__file__).resolve().parent
KEYSTONE_PORT = 5000
ADMIN_PASSWORD = "peer-admin-secret"  # keystone.sh's default bootstrap password
PEERS_HOME = Path(os.environ.get("PEERS", Path.home() / ".cache" / "cloudseed-peers"))


class PeersUnavailable(Exception):
    """The peer scripts or their installed venvs are missing; the message says what to run."""


def peers_dir() -> Path:
    configured = os.environ.get("CLOUDSEED_PEERS_DIR")
    directory = Path(configured) if configured else BENCH_DIR.parent.parent / "shared" / "peers"
    if not (directory / "nova_api.sh").exists() or not (directory / "keystone.sh").exists():
        raise PeersUnavailable(
            f"the peer scripts (keystone.sh, nova_api.sh) are not in {directory}: set "
            "CLOUDSEED_PEERS_DIR to the team's shared/peers directory (see its README.md)"
        )
    return directory


def nova_python() -> Path:
    return PEERS_HOME / "nova-venv" / "bin" / "python"


def check_installed() -> Path:
    """The peers directory, once Keystone's and Nova's venvs (and uwsgi) are installed."""
    directory = peers_dir()
    missing = [
        hint
        for path, hint in (
            (PEERS_HOME / "keystone-venv" / "bin" / "keystone-manage", "keystone.sh install"),
            (PEERS_HOME / "osc-venv" / "bin" / "openstack", "keystone.sh install"),
            (PEERS_HOME / "nova-venv" / "bin" / "nova-manage", "nova_api.sh install"),
        )
        if not path.exists()
    ]
    if not (PEERS_HOME / "nova-venv" / "bin" / "uwsgi").exists():
        missing.append(f"{PEERS_HOME}/nova-venv/bin/pip install uwsgi")
    if missing:
        steps = "; ".join(f"bash {directory}/{m}" if m.endswith("install") else m for m in missing)
        raise PeersUnavailable(f"the peers are not installed: {steps}")
    return directory


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def _script(directory: Path, name: str, *args: str, env: dict[str, str], log: Path) -> None:
    with log.open("ab") as out:
        done = subprocess.run(
            ["bash", str(directory / name), *args],
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{name} {' '.join(args)} failed ({done.returncode}):\n{tail}")


@dataclass(frozen=True)
class Identity:
    """The admin user's project-scoped token, as both sides see it."""

    auth_url: str
    token: str
    project_id: str
    user_id: str


def admin_token(auth_url: str) -> Identity:
    response = httpx.post(
        f"{auth_url}/auth/tokens",
        timeout=30,
        json={
            "auth": {
                "identity": {
                    "methods": ["password"],
                    "password": {
                        "user": {
                            "name": "admin",
                            "domain": {"id": "default"},
                            "password": ADMIN_PASSWORD,
                        }
                    },
                },
                "scope": {"project": {"name": "admin", "domain": {"id": "default"}}},
            }
        },
    )
    response.raise_for_status()
    body = response.json()["token"]
    return Identity(
        auth_url,
        response.headers["X-Subject-Token"],
        body["project"]["id"],
        body["user"]["id"],
    )


@contextlib.contextmanager
def running_keystone(directory: Path, home: Path) -> Iterator[Identity]:
    """keystone.sh setup + start with its files under ``home``; stopped on exit."""
    if not port_free(KEYSTONE_PORT):
        raise RuntimeError(f"port {KEYSTONE_PORT} is taken: another Keystone is running")
    env = {"KS_HOME": str(home), "PEERS": str(PEERS_HOME)}
    log = home.parent / "keystone-script.log"
    home.mkdir(parents=True)
    try:
        _script(directory, "keystone.sh", "setup", env=env, log=log)
        _script(directory, "keystone.sh", "start", env=env, log=log)
        yield admin_token(f"http://127.0.0.1:{KEYSTONE_PORT}/v3")
    finally:
        _script(directory, "keystone.sh", "stop", env=env, log=log)


@dataclass(frozen=True)
class Nova:
    api: str  # http://127.0.0.1:<port>, the compute API (gunicorn x2)
    metadata_gunicorn: str  # the metadata API under gunicorn x2 (nova_api.sh's own)
    home: Path
    env: dict[str, str]


def nova_env(home: Path, secret: str, ports: tuple[int, int, int]) -> dict[str, str]:
    api, metadata, stubs = ports
    return {
        "NOVA_HOME": str(home),
        "NOVA_PORT": str(api),
        "MD_PORT": str(metadata),
        "STUB_PORT": str(stubs),
        "MD_SECRET": secret,
        "PEERS": str(PEERS_HOME),
        # nova_api.sh's catalog step runs the openstack CLI against keystone.sh's files.
        "KS_HOME": str(home.parent / "keystone"),
    }


@contextlib.contextmanager
def running_nova(directory: Path, home: Path, secret: str) -> Iterator[Nova]:
    """nova_api.sh setup + start (Glance/Neutron stubs, osapi and metadata under gunicorn);
    registered in the running Keystone's catalog; stopped on exit."""
    ports = (free_port(), free_port(), free_port())
    env = nova_env(home, secret, ports)
    log = home.parent / "nova-script.log"
    home.mkdir(parents=True)
    try:
        _script(directory, "nova_api.sh", "setup", env=env, log=log)
        # Key pairs unlimited, as on cloudseed's side: 100 listed + the imports exceed the
        # default quota of 100 on both.
        with (home / "nova.conf").open("a") as conf:
            conf.write("[quota]\nkey_pairs = -1\n")
        _script(directory, "nova_api.sh", "start", env=env, log=log)
        yield Nova(f"http://127.0.0.1:{ports[0]}", f"http://127.0.0.1:{ports[1]}", home, env)
    finally:
        _script(directory, "nova_api.sh", "stop", env=env, log=log)


@contextlib.contextmanager
def running_nova_metadata_uwsgi(nova: Nova, processes: int) -> Iterator[str]:
    """Nova's metadata WSGI app (the same one as gunicorn's, same config and database) under
    uwsgi, Nova's faster server here: ``processes`` workers, HTTP on a socket of its own."""
    port = free_port()
    log = nova.home / "uwsgi-metadata.log"
    uwsgi = PEERS_HOME / "nova-venv" / "bin" / "uwsgi"
    command = [
        str(uwsgi),
        "--http-socket",
        f"127.0.0.1:{port}",
        "--master",
        "--processes",
        str(processes),
        "--need-app",
        "--disable-logging",
        "--listen",
        "1024",
        "--die-on-term",  # SIGTERM stops it: uwsgi's own meaning of SIGTERM is "reload"
        "--module",
        "nova.wsgi.metadata:application",
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            cwd=nova.home,
            env={**os.environ, "OS_NOVA_CONFIG_DIR": str(nova.home)},
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its workers in its group: none outlives the run
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/", process, log)
        yield url
    finally:
        stop_group(process)


def stop_group(process: subprocess.Popen[bytes], timeout: float = 30) -> None:
    """Stop a server started in a process group of its own (``start_new_session``): SIGTERM,
    SIGKILL after ``timeout`` seconds, then SIGKILL for whatever of its group is left (workers
    the master left, killed before it could stop them)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def wait_http(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    for _ in range(240):
        if process.poll() is not None:
            raise RuntimeError(f"{url}: exited {process.returncode}\n{log.read_text()[-3000:]}")
        with contextlib.suppress(httpx.TransportError):
            httpx.get(url, timeout=2)
            return
        subprocess.run(["sleep", "0.25"], check=False)
    raise RuntimeError(f"{url} did not answer:\n{log.read_text()[-3000:]}")


def seed_nova_servers(
    directory: Path,
    nova: Nova,
    identity: Identity,
    count: int,
    key: tuple[str, str],
    *,
    user_data: Path,
    metadata: str,
) -> list[str]:
    """``count`` ACTIVE servers in Nova's database (nova_api_seed.py's way, one Python process
    for all of them), each with the key pair ``key`` (name, public key), ``user_data`` and the
    server ``metadata`` (JSON); their uuids."""
    done = subprocess.run(
        [
            str(nova_python()),
            str(BENCH_DIR / "nova_seed_servers.py"),
            "--peers-dir",
            str(directory),
            "--config-dir",
            str(nova.home),
            "--project-id",
            identity.project_id,
            "--user-id",
            identity.user_id,
            "--count",
            str(count),
            "--key-name",
            key[0],
            "--public-key",
            key[1],
            "--user-data-file",
            str(user_data),
            "--metadata",
            metadata,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"seeding Nova failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
    uuids = [line for line in done.stdout.split() if len(line) == 36]
    if len(uuids) != count:
        raise RuntimeError(f"seeding Nova: {len(uuids)} servers of {count}:\n{done.stderr}")
    return uuids


def nova_version() -> str:
    done = subprocess.run(
        [str(nova_python()), "-c", "import nova.version as v; print(v.version_string())"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "unknown"


if __name__ == "__main__":  # python bench/peers.py: are the peers ready?
    try:
        print(f"peers ready: {check_installed()} (Nova {nova_version()})")
    except PeersUnavailable as exc:
        sys.exit(str(exc))
