"""A PostgreSQL cluster of one's own: ``initdb`` into a temporary directory, started on a free
loopback port with ``pg_ctl``, stopped and started again at will (the soak's outage,
bench/soak_chaos.py; the outage tests), and removed at the end, also on an exception or Ctrl-C.

The machine's shared server (5432) is never touched: other work uses it, and these callers
must be free to stop their database. The binaries come from ``/usr/lib/postgresql/<version>/bin``
(Debian's layout) or ``CLOUDSEED_TEST_PG_BIN``; without them ``Unavailable`` is raised.
PostgreSQL refuses to run as root, so as root every command runs as the ``postgres`` user
(``runuser``) on a data directory it owns.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from tests.support.waiting import wait_until

# The soak's deployment with every pool at its largest (serve: 10 + 10 overflow per engine, an
# API and a cell engine per worker, LISTEN connections, two agents, the checks) stays far below
# this; PostgreSQL's default of 100 does not.
MAX_CONNECTIONS = 400
COMMAND_TIMEOUT = 120


class Unavailable(Exception):
    """No PostgreSQL binaries here, or no way to run them."""


def binaries() -> Path:
    """The directory holding initdb, pg_ctl and postgres (the newest version installed)."""
    configured = os.environ.get("CLOUDSEED_TEST_PG_BIN")
    candidates = [Path(configured)] if configured else []
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: [int(x) for x in p.parent.name.split(".") if x.isdigit()],
    )
    candidates += reversed(found)
    for directory in candidates:
        if (directory / "initdb").is_file() and (directory / "pg_ctl").is_file():
            return directory
    raise Unavailable("no PostgreSQL server binaries (initdb, pg_ctl) in /usr/lib/postgresql")


def _run_as() -> list[str]:
    """The prefix that runs a command as the cluster's owner."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError as exc:
        raise Unavailable(
            "running as root and there is no postgres user to own the cluster"
        ) from exc
    if shutil.which("runuser") is None:
        raise Unavailable("running as root without runuser to drop to the postgres user")
    return ["runuser", "-u", "postgres", "--"]


@dataclass
class PrivatePostgres:
    root: Path
    port: int
    bin: Path
    prefix: list[str]

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "sockets"

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def _pg(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [*self.prefix, *args],
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            env={**os.environ, "LC_ALL": "C"},
            cwd=self.root,
        )
        if check and done.returncode:
            raise RuntimeError(
                f"{Path(args[0]).name} {' '.join(args[1:])} exited {done.returncode}:\n"
                f"{done.stdout}{done.stderr}\nthe server's log ends:\n{self.log_tail()}"
            )
        return done

    def init(self) -> None:
        self.socket_dir.mkdir(parents=True)
        if self.prefix:
            owner = pwd.getpwnam("postgres")
            for path in (self.root, self.socket_dir):
                os.chown(path, owner.pw_uid, owner.pw_gid)
        self._pg(
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
        )

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.socket_dir} -c listen_addresses=127.0.0.1 "
            f"-c max_connections={MAX_CONNECTIONS} -c fsync=off -c synchronous_commit=off "
            "-c full_page_writes=off"
        )
        self._pg(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.root / "postgres.log"),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        )

    def stop(self) -> None:
        """Fast shutdown: every client connection is cut, as in a real database restart."""
        self._pg(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def begin_smart_stop(self) -> None:
        """Ask for a smart shutdown and return at once: the server waits for its clients to
        leave, and meanwhile refuses every new connection ("the database system is shutting
        down"), the state a restart passes through."""
        self._pg(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "smart", "-W", "stop")

    def running(self) -> bool:
        """Whether the postmaster still runs. A server in a smart shutdown already refuses
        connections (``answers`` is False) but holds its data directory until its shutdown
        checkpoint is written; ``start`` in that window fails on the lock file."""
        # pg_ctl status: 0 while a server runs, 3 once none does.
        return (
            self._pg(
                str(self.bin / "pg_ctl"), "-D", str(self.data), "status", check=False
            ).returncode
            == 0
        )

    def wait_stopped(self, timeout: float = COMMAND_TIMEOUT) -> None:
        wait_until(
            lambda: not self.running(),
            timeout=timeout,
            what=f"PostgreSQL on port {self.port} to stop",
        )

    def answers(self) -> bool:
        engine = create_engine(self.url("postgres"), connect_args={"connect_timeout": 2})
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            return True
        except OperationalError:
            return False
        finally:
            engine.dispose()

    def wait_answering(self, timeout: float = 60) -> float:
        """Wait until a query succeeds; returns the time.time() it first did."""
        deadline = time.monotonic() + timeout
        while not self.answers():
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL on port {self.port} did not answer in {timeout} s")
            time.sleep(0.05)
        return time.time()

    def create_databases(self, *names: str) -> None:
        engine = create_engine(self.url("postgres"), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                for name in names:
                    conn.execute(text(f'CREATE DATABASE "{name}"'))
        finally:
            engine.dispose()

    def log_tail(self, lines: int = 40) -> str:
        path = self.root / "postgres.log"
        return (
            "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
            if path.exists()
            else ""
        )

    def destroy(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            self._pg(
                str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop",
                check=False,
            )  # fmt: skip
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def private_postgres(port: int, *databases: str) -> Iterator[PrivatePostgres]:
    """A running cluster on ``port`` with ``databases`` created; destroyed on the way out,
    whatever happened (an exception, Ctrl-C)."""
    bin_dir = binaries()
    prefix = _run_as()
    root = Path(tempfile.mkdtemp(prefix="cloudseed-pg-"))
    cluster = PrivatePostgres(root=root, port=port, bin=bin_dir, prefix=prefix)
    try:
        cluster.init()
        cluster.start()
        cluster.wait_answering()
        cluster.create_databases(*databases)
        yield cluster
    finally:
        cluster.destroy()
