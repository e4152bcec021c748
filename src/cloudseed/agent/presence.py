"""Which running agents a compute host has on this machine: the last one to stop cleanly marks
the host's service down.

Each agent of a host holds a shared ``flock`` on the host's lock file in the state directory
for as long as it runs: the workers of one ``cloudseed serve`` all run an agent of the same
host, and so may a ``cloudseed compute`` beside it. An agent that stops cleanly gives up its
shared lock and tries for the exclusive one: it gets it only when no other agent of the host
holds the file, and then holds it while the service is marked down, so an agent starting
meanwhile registers the host up only after that (it waits for its shared lock before it
registers). A worker restarted on its own therefore leaves the host up, and a crash releases
the lock without marking anything: the heartbeat rule decides then.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class HostPresence:
    def __init__(self, lock_dir: Path, host: str) -> None:
        self.path = lock_dir / f"compute-{host}.lock"
        self._fd: int | None = None

    def join(self) -> None:
        """Count this agent in (blocks while a stopping agent is marking the host down)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_SH)
        self._fd = fd

    def leave_last(self) -> bool:
        """Count this agent out; True when it was the host's last one, and then the caller
        holds the host until ``release`` (marks its service down in between). Each agent
        unlocks before it tries, so when several stop at once the last to try succeeds."""
        if self._fd is None:
            return False
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.release()
            return False
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
