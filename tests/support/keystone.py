"""A real Keystone (from PyPI) on a random loopback port, for the keystone auth strategy's tests.

``keystone_venv()`` creates, once, ``<repo>/.cache/keystone-venv`` (git-ignored) with
``python -m venv`` and ``pip install 'keystone>=26,<31' 'gunicorn>=22,<28'``, and reuses it while
its marker file names the same requirements and ``keystone-manage --version`` works. Concurrent
callers (pytest-xdist workers, two sessions) serialise on a lock file. When PyPI cannot be
reached the caller is told to skip (``KeystoneUnavailable``) unless ``CLOUDSEED_REQUIRE_DBS=1``
(CI), where that is a failure.

``running_keystone(directory)`` then sets up a Keystone in ``directory``: keystone.conf with
SQLite and fernet tokens, ``keystone-manage db_sync``, ``fernet_setup``, ``credential_setup``
and ``bootstrap`` (user admin, project admin, roles admin/member/reader/service, the identity
endpoints), serves it with gunicorn (one sync worker: SQLite allows one writer at a time) and,
through Keystone's own API with the admin's token, creates:

- project ``service`` and user ``cloudseed`` with role ``service`` in it: the service user
  keystonemiddleware logs in as to validate tokens (Keystone's default policy lets the
  ``service`` role validate any token);
- project ``proj`` and users ``alice`` and ``bob``, each with role ``member`` in it.

Traps met on the way (see shared/reference/openstack-clients.md, section 2):

- Keystone's WSGI entry point parses ``sys.argv`` with oslo.config, so gunicorn gets no
  command-line arguments at all: it reads ``gunicorn.conf.py`` from its working directory, and
  Keystone finds its config through ``OS_KEYSTONE_CONFIG_DIR``/``OS_KEYSTONE_CONFIG_FILES``.
- As root, ``fernet_setup`` and ``credential_setup`` insist on ``--keystone-user``/``-group``.
- keystonemiddleware finds the identity endpoint in the token's catalog (interface
  ``internal``), so bootstrap registers the real port; the port is picked by binding port 0,
  closing, and handing the number to gunicorn; if another process took it in between,
  gunicorn exits and we try again with a new port (bootstrap then updates the endpoints).

Passwords are hashed with 4 bcrypt rounds instead of 12: every token issue checks a password,
and the test only needs Keystone's behaviour, not its resistance to brute force.

Every step is timed; ``report`` receives one line per step.
"""

from __future__ import annotations

import concurrent.futures
import grp
import os
import pwd
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.support import tool_venv
from tests.support.ports import free_port
from tests.support.tool_venv import CACHE_DIR, clean_env
from tests.support.waiting import wait_until

VENV_DIR = CACHE_DIR / "keystone-venv"
REQUIREMENTS = ("keystone>=26,<31", "gunicorn>=22,<28")
INSTALL_TIMEOUT = 240  # seconds; a cold install here takes ~35 s (~110 wheels)
MANAGE_TIMEOUT = 180
START_TIMEOUT = 90
START_ATTEMPTS = 3
ADMIN_PASSWORD = "admin-secret"
DOMAIN = "default"

_NETWORK_ERRORS = (
    *tool_venv.NETWORK_ERRORS,
    "No matching distribution found for keystone",
    "No matching distribution found for gunicorn",
)

Report = Callable[[str], None]


class KeystoneUnavailable(tool_venv.Unavailable):
    """Keystone could not be installed because the package registry is unreachable."""


def required() -> bool:
    """Under CI (``CLOUDSEED_REQUIRE_DBS=1``) a Keystone that cannot be had is a failure."""
    return os.environ.get("CLOUDSEED_REQUIRE_DBS") == "1"


def _stderr_report(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@contextmanager
def _timed(report: Report, what: str) -> Iterator[None]:
    started = time.monotonic()
    try:
        yield
    finally:
        report(f"keystone: {what}: {time.monotonic() - started:.1f} s")


# --- the venv ------------------------------------------------------------------------------------


def _bin(venv: Path, name: str) -> Path:
    return venv / "bin" / name


def _works(venv: Path) -> bool:
    if not tool_venv.has_marker(venv, REQUIREMENTS):
        return False
    if not _bin(venv, "gunicorn").exists():
        return False
    return tool_venv.answers(venv, _bin(venv, "keystone-manage"), "--version", prints=True)


def _build(venv: Path, report: Report) -> None:
    if venv.exists():
        shutil.rmtree(venv)
    try:
        with _timed(report, "create venv"):
            tool_venv.create(venv, KeystoneUnavailable)
        with _timed(report, f"pip install {' '.join(REQUIREMENTS)}"):
            tool_venv.pip_install(
                venv,
                *REQUIREMENTS,
                timeout=INSTALL_TIMEOUT,
                unavailable=KeystoneUnavailable,
                network_errors=_NETWORK_ERRORS,
            )
    except (KeystoneUnavailable, RuntimeError):
        shutil.rmtree(venv, ignore_errors=True)
        raise
    # Written last: a venv without it (an interrupted build) is rebuilt from scratch.
    tool_venv.write_marker(venv, REQUIREMENTS)
    if not _works(venv):
        raise RuntimeError(f"{_bin(venv, 'keystone-manage')} --version does not work after install")


def keystone_venv(report: Report = _stderr_report) -> Path:
    """The cached venv with Keystone and gunicorn; builds it when needed.

    Raises ``KeystoneUnavailable`` when PyPI cannot be reached (callers skip, or fail under CI).
    """
    with _timed(report, "check cached venv"):
        if _works(VENV_DIR):
            return VENV_DIR
    with ExitStack() as held:
        with _timed(report, "wait for venv lock"):
            held.enter_context(tool_venv.locked(VENV_DIR.name))
        if not _works(VENV_DIR):  # it may have been built while we waited
            _build(VENV_DIR, report)
    return VENV_DIR


# --- a running Keystone --------------------------------------------------------------------------


@dataclass(frozen=True)
class User:
    name: str
    id: str
    password: str
    project: str  # the project the user is a member of (name), for project-scoped tokens


@dataclass
class Keystone:
    url: str  # http://127.0.0.1:<port>, without /v3
    directory: Path
    admin: User
    service_user: User
    alice: User
    bob: User
    project_ids: dict[str, str] = field(default_factory=dict)
    timings: list[str] = field(default_factory=list)

    @property
    def auth_url(self) -> str:
        return f"{self.url}/v3"

    def token(self, user: User, project: str | None = None) -> str:
        """A project-scoped token for ``user`` (password authentication)."""
        return issue_token(
            self.auth_url,
            user.name,
            user.password,
            {"project": {"name": project or user.project, "domain": {"id": DOMAIN}}},
        )

    def logs(self) -> str:
        return _tail_logs(self.directory)


def issue_token(auth_url: str, username: str, password: str, scope: dict[str, Any]) -> str:
    response = httpx.post(
        f"{auth_url}/auth/tokens",
        timeout=30,
        json={
            "auth": {
                "identity": {
                    "methods": ["password"],
                    "password": {
                        "user": {"name": username, "domain": {"id": DOMAIN}, "password": password}
                    },
                },
                "scope": scope,
            }
        },
    )
    if response.status_code != 201:
        raise RuntimeError(f"token for {username} refused: {response.status_code} {response.text}")
    return response.headers["X-Subject-Token"]


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _tail_logs(directory: Path) -> str:
    return "\n".join(
        f"--- {name} (tail) ---\n{_tail(directory / name)}"
        for name in ("keystone.log", "gunicorn.log")
    )


def _write_config(directory: Path) -> Path:
    conf = directory / "keystone.conf"
    conf.write_text(f"""\
[DEFAULT]
log_file = {directory / "keystone.log"}

[database]
connection = sqlite:///{directory / "keystone.db"}

[token]
provider = fernet

[fernet_tokens]
key_repository = {directory / "fernet-keys"}

[fernet_receipts]
key_repository = {directory / "fernet-receipts"}

[credential]
key_repository = {directory / "credential-keys"}

[identity]
password_hash_rounds = 4

[cache]
enabled = false
""")
    return conf


def _manage(venv: Path, conf: Path, *args: str) -> None:
    command = [str(_bin(venv, "keystone-manage")), "--config-file", str(conf), *args]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=MANAGE_TIMEOUT,
        env=clean_env(),
        cwd=conf.parent,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"keystone-manage {args[0]} failed (exit {result.returncode}):\n"
            f"{result.stdout[-3000:]}{result.stderr[-3000:]}\n"
            f"{_tail(conf.parent / 'keystone.log')}"
        )


def _owner_args() -> list[str]:
    return [
        "--keystone-user",
        pwd.getpwuid(os.getuid()).pw_name,
        "--keystone-group",
        grp.getgrgid(os.getgid()).gr_name,
    ]


def _bootstrap(venv: Path, conf: Path, url: str) -> None:
    _manage(
        venv,
        conf,
        "bootstrap",
        "--bootstrap-username",
        "admin",
        "--bootstrap-password",
        ADMIN_PASSWORD,
        "--bootstrap-project-name",
        "admin",
        "--bootstrap-role-name",
        "admin",
        "--bootstrap-service-name",
        "keystone",
        "--bootstrap-region-id",
        "RegionOne",
        "--bootstrap-admin-url",
        f"{url}/v3",
        "--bootstrap-public-url",
        f"{url}/v3",
        "--bootstrap-internal-url",
        f"{url}/v3",
    )


def _start_gunicorn(venv: Path, directory: Path, port: int) -> subprocess.Popen[bytes]:
    (directory / "gunicorn.conf.py").write_text(f"""\
# No command-line arguments: Keystone's WSGI entry point parses sys.argv with oslo.config.
wsgi_app = "keystone.wsgi.api:application"
bind = ["127.0.0.1:{port}"]
workers = 1  # SQLite: one writer at a time
timeout = 120
graceful_timeout = 5
errorlog = {str(directory / "gunicorn.log")!r}
""")
    env = clean_env(
        {"OS_KEYSTONE_CONFIG_DIR": str(directory), "OS_KEYSTONE_CONFIG_FILES": "keystone.conf"}
    )
    env.pop("GUNICORN_CMD_ARGS", None)
    log = open(directory / "gunicorn.out", "ab")  # noqa: SIM115 - handed to the child
    try:
        return subprocess.Popen(
            [str(_bin(venv, "gunicorn"))],
            cwd=directory,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    finally:
        log.close()


def _wait_for_v3(proc: subprocess.Popen[bytes], url: str) -> bool:
    """True once ``url``/v3 answers 200 while ``proc`` lives; False if ``proc`` died."""

    def answered_or_died() -> str | None:
        if proc.poll() is not None:
            return "died"
        try:
            response = httpx.get(f"{url}/v3", timeout=5)
            if response.status_code == 200 and "version" in response.json():
                return "answers"
        except (httpx.TransportError, ValueError):
            pass
        return None

    try:
        outcome = wait_until(
            answered_or_died, timeout=START_TIMEOUT, interval=0.2, max_interval=0.2
        )
    except AssertionError:
        raise RuntimeError(f"Keystone at {url} did not answer within {START_TIMEOUT} s") from None
    return outcome == "answers"


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()  # gunicorn's master stops its worker and exits
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)  # its own session: only what we started
        proc.wait(timeout=15)


class _Admin:
    """Keystone's API with a system-scoped admin token."""

    def __init__(self, auth_url: str) -> None:
        token = issue_token(auth_url, "admin", ADMIN_PASSWORD, {"system": {"all": True}})
        self.client = httpx.Client(base_url=auth_url, headers={"X-Auth-Token": token}, timeout=30)

    def close(self) -> None:
        self.client.close()

    def _check(self, response: httpx.Response) -> dict[str, Any]:
        if response.status_code >= 400:
            raise RuntimeError(
                f"Keystone {response.request.method} {response.request.url}: "
                f"{response.status_code} {response.text}"
            )
        return response.json() if response.content else {}

    def find(self, collection: str, name: str) -> str | None:
        found = self._check(self.client.get(f"/{collection}", params={"name": name}))
        items = found[collection]
        return str(items[0]["id"]) if items else None

    def role(self, name: str) -> str:
        role_id = self.find("roles", name)
        if role_id is None:  # bootstrap creates it from Keystone 2023.2 on; older ones do not
            role_id = self._check(self.client.post("/roles", json={"role": {"name": name}}))[
                "role"
            ]["id"]
        return str(role_id)

    def project(self, name: str) -> str:
        return self.find("projects", name) or str(
            self._check(
                self.client.post("/projects", json={"project": {"name": name, "domain_id": DOMAIN}})
            )["project"]["id"]
        )

    def user(self, name: str, password: str, project_id: str) -> str:
        return str(
            self._check(
                self.client.post(
                    "/users",
                    json={
                        "user": {
                            "name": name,
                            "password": password,
                            "domain_id": DOMAIN,
                            "default_project_id": project_id,
                        }
                    },
                )
            )["user"]["id"]
        )

    def grant(self, project_id: str, user_id: str, role_id: str) -> None:
        self._check(self.client.put(f"/projects/{project_id}/users/{user_id}/roles/{role_id}"))


@contextmanager
def running_keystone(directory: Path, report: Report = _stderr_report) -> Iterator[Keystone]:
    """Set up and serve a Keystone in ``directory`` (an empty scratch directory); yield it.

    Raises ``KeystoneUnavailable`` when Keystone cannot be installed (registry unreachable).
    """
    lines: list[str] = []

    def note(line: str) -> None:
        lines.append(line)
        report(line)

    overall = time.monotonic()
    venv = keystone_venv(note)
    conf = _write_config(directory)
    with (
        _timed(note, "db_sync + fernet_setup + credential_setup (in parallel)"),
        concurrent.futures.ThreadPoolExecutor(3) as pool,
    ):
        steps = {
            "db_sync": ["db_sync"],
            "fernet_setup": ["fernet_setup", *_owner_args()],
            "credential_setup": ["credential_setup", *_owner_args()],
        }

        def step(name: str) -> None:
            with _timed(note, name):
                _manage(venv, conf, *steps[name])

        for future in [pool.submit(step, name) for name in steps]:
            future.result()

    proc: subprocess.Popen[bytes] | None = None
    try:
        for attempt in range(1, START_ATTEMPTS + 1):
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            with _timed(note, f"gunicorn start + bootstrap + wait for /v3 (port {port})"):
                proc = _start_gunicorn(venv, directory, port)
                # Bootstrap runs while gunicorn loads Keystone: it only needs the database,
                # and it must name the port that gunicorn serves (the catalog's endpoints).
                with _timed(note, "bootstrap"):
                    _bootstrap(venv, conf, url)
                if _wait_for_v3(proc, url):
                    break
            note(
                f"keystone: gunicorn exited ({proc.returncode}) on port {port} "
                f"(attempt {attempt}):\n{_tail(directory / 'gunicorn.log', 10)}"
            )
            proc = None
        else:
            raise RuntimeError(f"Keystone would not start:\n{_tail_logs(directory)}")

        with _timed(note, "create projects, users and role assignments"):
            admin = _Admin(f"{url}/v3")
            try:
                roles = {name: admin.role(name) for name in ("admin", "member", "service")}
                projects = {name: admin.project(name) for name in ("admin", "service", "proj")}
                users: dict[str, User] = {
                    "admin": User(
                        "admin", str(admin.find("users", "admin")), ADMIN_PASSWORD, "admin"
                    )
                }
                for name, project, role in (
                    ("cloudseed", "service", "service"),
                    ("alice", "proj", "member"),
                    ("bob", "proj", "member"),
                ):
                    password = f"{name}-secret"
                    user_id = admin.user(name, password, projects[project])
                    admin.grant(projects[project], user_id, roles[role])
                    users[name] = User(name, user_id, password, project)
            finally:
                admin.close()
        note(f"keystone: ready at {url} in {time.monotonic() - overall:.1f} s")
        yield Keystone(
            url=url,
            directory=directory,
            admin=users["admin"],
            service_user=users["cloudseed"],
            alice=users["alice"],
            bob=users["bob"],
            project_ids=projects,
            timings=lines,
        )
    finally:
        if proc is not None:
            with _timed(report, "stop"):
                _stop(proc)
