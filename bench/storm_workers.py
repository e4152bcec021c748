"""The serve workers as /proc shows them: their memory and CPU time, which worker holds which
connection, and every guest's documents asked of every worker on connections known to be its
own."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path

from storm_identity import proxy_headers
from storm_raw_http import RawConnection
from storm_server import Server


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def workers_rss(server: Server) -> dict[int, int]:
    return {pid: rss_kib(pid) for pid in server.worker_pids()}


# A worker trims its heap a second after its last load of guests (src/cloudseed/metadata/
# heap.py, QUIET_SECONDS): its RSS read sooner counts what the last burst freed.
SETTLE_SECONDS = 2.0


def settled_rss(server: Server) -> dict[int, int]:
    """The workers' RSS once they have settled after loading guests (nothing else asked)."""
    time.sleep(SETTLE_SECONDS)
    return workers_rss(server)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu_share(server: Server, seconds: float) -> dict[int, float]:
    """Each worker's CPU use with no request coming in (what following the change feed
    costs), as a share of one core."""
    pids = server.worker_pids()
    before = {pid: cpu_seconds(pid) for pid in pids}
    time.sleep(seconds)
    return {pid: (cpu_seconds(pid) - before[pid]) / seconds for pid in pids}


def socket_inode(server_port: int, client_port: int) -> int | None:
    """The inode of the server side of the loopback connection from ``client_port``."""
    local, remote = f"0100007F:{server_port:04X}", f"0100007F:{client_port:04X}"
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == local and fields[2] == remote:
            return int(fields[9])
    return None


def owner_of_socket(inode: int, pids: list[int]) -> int | None:
    """Which of ``pids`` holds the socket: the worker that accepted the connection."""
    wanted = f"socket:[{inode}]"
    for pid in pids:
        fd_dir = Path(f"/proc/{pid}/fd")
        for fd in fd_dir.iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(fd) == wanted:
                    return pid
    return None


async def connections_per_worker(
    server: Server, instance_id: str, path: str, per_worker: int
) -> dict[int, list[RawConnection]]:
    """Fresh connections, opened until each worker has accepted ``per_worker`` of them; which
    worker holds which is read from /proc, not assumed."""
    pids = server.worker_pids()
    owned: dict[int, list[RawConnection]] = {pid: [] for pid in pids}
    spare: list[RawConnection] = []
    headers = proxy_headers(instance_id)
    for _ in range(per_worker * len(pids) * 8):
        if all(len(c) >= per_worker for c in owned.values()):
            break
        conn = await RawConnection.open(server.metadata_port)
        status, _ = await conn.get(path, headers)  # accepted and answered
        if status != 200:
            raise RuntimeError(f"GET {path}: {status}")
        inode = socket_inode(server.metadata_port, conn.local_port)
        pid = owner_of_socket(inode, pids) if inode is not None else None
        if pid is None or len(owned[pid]) >= per_worker:
            spare.append(conn)
        else:
            owned[pid].append(conn)
    for conn in spare:
        await conn.close()
    missing = [pid for pid, c in owned.items() if len(c) < per_worker]
    if missing:
        raise RuntimeError(f"workers {missing} accepted too few connections")
    return owned


def connections_by_worker(server: Server) -> dict[int, int]:
    """Established connections to the metadata port that each worker holds."""
    local = f":{server.metadata_port:04X}"
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1].endswith(local) and fields[3] == "01":
            inodes.add(f"socket:[{fields[9]}]")
    counts = {}
    for pid in server.worker_pids():
        links = []
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                links.append(os.readlink(fd))
        counts[pid] = sum(1 for link in links if link in inodes)
    return counts


async def _fill_every_worker(server: Server, instances: list[str], paths: list[str]) -> None:
    owned = await connections_per_worker(server, instances[0], paths[0], per_worker=4)

    async def fill(conns: list[RawConnection]) -> None:
        pending = iter(instances)  # shared by this worker's connections

        async def walk(conn: RawConnection) -> None:
            for instance_id in pending:
                for path in paths:
                    status, _ = await conn.get(path, proxy_headers(instance_id))
                    if status != 200:
                        raise RuntimeError(f"GET {path} for {instance_id}: {status}")

        await asyncio.gather(*(walk(c) for c in conns))

    try:
        await asyncio.gather(*(fill(conns) for conns in owned.values()))
    finally:
        for conns in owned.values():
            for conn in conns:
                await conn.close()


def fill_every_worker(server: Server, instances: list[str], paths: list[str]) -> None:
    """Ask every worker, on connections known to be its own, for each guest's documents that
    are rendered on first use. wrk's connections are not spread evenly over the workers (the
    kernel hands each new connection to whichever worker accepts first), so after the cold
    pass a worker can lack the guests whose every request happened to reach the other one."""
    asyncio.run(_fill_every_worker(server, instances, paths))
