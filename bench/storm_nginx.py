"""nginx serving the same bytes as static files, the storm's ceiling: every guest's documents
fetched once from cloudseed into a file tree, and nginx (unprivileged, foreground) serving it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from storm_crawl import flat_name
from storm_host import free_port, require_tool
from storm_identity import proxy_headers
from storm_raw_http import RawConnection


@dataclass
class StaticTree:
    root: Path
    statuses: Counter[int]


async def _fetch_documents(
    port: int, instances: list[str], paths: list[str], root: Path, connections: int
) -> StaticTree:
    statuses: Counter[int] = Counter()
    pending = iter(instances)
    unique = list(dict.fromkeys(paths))

    async def fetch_guests() -> None:
        conn = await RawConnection.open(port)
        try:
            for instance_id in pending:  # shared iterator: each guest is fetched once
                directory = root / instance_id
                directory.mkdir()
                headers = proxy_headers(instance_id)
                for path in unique:
                    status, body = await conn.get(path, headers)
                    statuses[status] += 1
                    (directory / flat_name(path)).write_bytes(body)
        finally:
            await conn.close()

    await asyncio.gather(*(fetch_guests() for _ in range(connections)))
    return StaticTree(root, statuses)


def fetch_documents(port: int, instances: list[str], paths: list[str], root: Path) -> StaticTree:
    """Every guest's documents, as cloudseed serves them, written to ``root/<id>/<flat>``."""
    root.mkdir(parents=True)
    return asyncio.run(_fetch_documents(port, instances, paths, root, connections=16))


NGINX_CONF = """\
worker_processes {workers};
daemon off;
master_process on;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    default_type application/octet-stream;
    sendfile on;
    tcp_nodelay on;
    keepalive_requests 100000000;
    keepalive_timeout 120s;
    client_body_temp_path {prefix}/client_body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    server {{
        listen 127.0.0.1:{port} reuseport;
        root {root};
        location / {{ }}
    }}
}}
"""


def nobody() -> tuple[int, int] | None:
    """Uid and gid to drop to when running as root (nginx is run unprivileged)."""
    if os.geteuid() != 0:
        return None
    import grp
    import pwd

    user = pwd.getpwnam("nobody")
    with contextlib.suppress(KeyError):
        return user.pw_uid, grp.getgrnam("nogroup").gr_gid
    return user.pw_uid, user.pw_gid


@contextlib.contextmanager
def running_nginx(root: Path, prefix: Path, workers: int) -> Iterator[str]:
    nginx = require_tool("nginx", "nginx-light")
    port = free_port()
    prefix.mkdir()
    config = prefix / "nginx.conf"
    config.write_text(NGINX_CONF.format(workers=workers, prefix=prefix, port=port, root=root))
    drop = nobody()
    if drop is not None:
        os.chown(prefix, *drop)  # its pid file, error log and temp directories
        os.chmod(prefix.parent, 0o755)  # the run's temp directory: let it reach the documents
    process = subprocess.Popen(
        [nginx, "-p", str(prefix), "-e", str(prefix / "error.log"), "-c", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        user=drop[0] if drop else None,
        group=drop[1] if drop else None,
        extra_groups=[] if drop else None,
    )
    try:
        _wait_for_port(port, process, prefix / "error.log")
        yield f"http://127.0.0.1:{port}"
    finally:
        process.send_signal(signal.SIGQUIT)  # graceful stop
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 20
    while True:
        if process.poll() is not None:
            raise RuntimeError(
                f"nginx exited with {process.returncode}: "
                f"{log.read_text(errors='replace') if log.exists() else ''}"
            )
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        if time.monotonic() > deadline:
            raise RuntimeError("nginx did not listen in 20 s")
        time.sleep(0.05)


def nginx_version() -> str:
    done = subprocess.run(
        [require_tool("nginx", "nginx-light"), "-v"], capture_output=True, text=True, check=False
    )
    return done.stderr.strip().removeprefix("nginx version: ")
