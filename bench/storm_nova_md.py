"""Nova 34's metadata app at its fastest here (the team's peers README): the peers'
``nova_metadata_bench.py`` (Nova's own api-paste pipeline in Neutron proxy mode, the instance
lookup served from memory) under uwsgi with 2 processes, as bench/nova_dropin_servers.py runs
uwsgi (``--http-socket``: uwsgi answers each request and closes the connection)."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
from peers import PEERS_HOME, peers_dir, stop_group
from storm_host import free_port

INSTANCE = "b65cee2f-8c69-4aeb-be2f-f79742548fc2"  # nova_metadata_bench.py's
PROJECT = "6f70656e737461636b20342065766572"
SECRET = b"bench-secret"


def nova_headers() -> dict[str, str]:
    signature = hmac.new(SECRET, INSTANCE.encode(), hashlib.sha256).hexdigest()
    return {
        "X-Instance-ID": INSTANCE,
        "X-Tenant-ID": PROJECT,
        "X-Instance-ID-Signature": signature,
    }


def nova_instances_line() -> str:
    """bench/metadata_storm_wrk.lua's instances file line for Nova's one instance."""
    return f"{INSTANCE} {PROJECT} {nova_headers()['X-Instance-ID-Signature']}\n"


@contextlib.contextmanager
def running_nova_uwsgi(log: Path, processes: int = 2) -> Iterator[str]:
    uwsgi = PEERS_HOME / "nova-venv" / "bin" / "uwsgi"
    if not uwsgi.exists():
        raise SystemExit(f"{uwsgi} is missing: the peers' Nova venv with uwsgi (peers README)")
    directory = peers_dir()
    port = free_port()
    command = [
        str(uwsgi),
        *("--http-socket", f"127.0.0.1:{port}", "--master", "--processes", str(processes)),
        *("--need-app", "--disable-logging", "--listen", "1024", "--die-on-term"),
        *("--chdir", str(directory), "--module", "nova_metadata_bench:application"),
    ]
    env = {**os.environ, "NOVA_MD_APP": "paste", "NOVA_MD_MODE": "proxy"}
    env.pop("PYTHONPATH", None)
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/openstack", headers=nova_headers(), timeout=2).is_success:
                    break
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(f"Nova's uwsgi did not start: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield url
    finally:
        stop_group(process, timeout=20)
