"""The ``fake`` driver: keeps guests in memory, takes ``delay`` seconds per operation, and can be
told to fail, so every state transition and error path is testable without a hypervisor.

With a ``state_dir`` it also keeps one small JSON file per guest there (written atomically), so
a ``cloudseed compute`` process that was killed and started again knows its guests, as a real
hypervisor would. It reports the capacity Nova's fake driver reports (1000 vCPUs, 800,000 MiB,
600,000 GiB) so schedulers never run out of room in tests.

Each running guest has a guest agent that answers ``push_keys`` by editing the guest's
``authorized`` keys (per user, in memory, kept across reboots, gone with the guest or its
disk), unless a test says it has none (``guest_agent(False)``, for every guest or one).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from cloudseed.compute import ssh_forward
from cloudseed.compute.errors import DriverError, GuestAgentUnavailable, GuestNotRunning
from cloudseed.compute.interfaces import Capacity, GuestSpec

RUNNING, SHUTDOWN = 1, 4  # Nova's power_state values
# What a running guest that opted in is told its SSH forward is (nothing listens there).
FAKE_SSH_FORWARD = "127.0.0.1:10022"


@dataclass
class _Failure:
    operation: str
    uuid: str | None
    remaining: int
    message: str
    error: Exception | None = None  # raised as it is, instead of a DriverError


FAKE_CONSOLE = "FAKE CONSOLE OUTPUT\nANOTHER\nAND ANOTHER\nONE MORE\nLAST LINE"


class FakeDriver:
    name = "fake"

    def __init__(self, *, delay: float = 0.0, state_dir: Path | None = None) -> None:
        self.delay = delay
        self.state_dir = state_dir
        self.guests: dict[str, GuestSpec] = {}
        self.power: dict[str, int] = {}
        if state_dir is not None:
            state_dir.mkdir(parents=True, exist_ok=True)
            for path in state_dir.glob("*.json"):
                with contextlib.suppress(OSError, ValueError, KeyError):
                    saved = json.loads(path.read_text())
                    self.power[path.stem] = int(saved["power"])
        self.calls: list[tuple[str, str]] = []
        self._failures: list[_Failure] = []
        self._lock = threading.Lock()
        # Per guest, per user: the authorized_keys lines the fake guest agent keeps.
        self.authorized: dict[str, dict[str, list[str]]] = {}
        self._agent_default = True
        self._agent: dict[str, bool] = {}

    def guest_agent(self, answers: bool, *, uuid: str | None = None) -> None:
        """Whether guests' agents answer (``uuid``: that guest's; None: every guest's that has
        no setting of its own, and forget those)."""
        with self._lock:
            if uuid is None:
                self._agent_default = answers
                self._agent.clear()
            else:
                self._agent[uuid] = answers

    def fail(
        self,
        operation: str,
        *,
        uuid: str | None = None,
        times: int = 1,
        message: str = "injected failure",
        error: Exception | None = None,
    ) -> None:
        """Make the next ``times`` calls of ``operation`` (for ``uuid``, or any) raise a
        DriverError with ``message``, or ``error`` itself (what a bug or the host would)."""
        with self._lock:
            self._failures.append(_Failure(operation, uuid, times, message, error))

    def clear_failures(self) -> None:
        with self._lock:
            self._failures.clear()

    def _call(self, operation: str, uuid: str) -> None:
        with self._lock:
            self.calls.append((operation, uuid))
            for failure in self._failures:
                if (
                    failure.operation == operation
                    and failure.remaining > 0
                    and failure.uuid in (None, uuid)
                ):
                    failure.remaining -= 1
                    if failure.error is not None:
                        raise failure.error
                    raise DriverError(f"{operation} failed: {failure.message}")
        if self.delay:
            time.sleep(self.delay)

    def spawn(self, guest: GuestSpec) -> None:
        self._call("spawn", guest.uuid)
        self._keep(guest, RUNNING)

    def reboot(self, guest: GuestSpec, *, hard: bool) -> None:
        self._call("reboot_hard" if hard else "reboot_soft", guest.uuid)
        self._keep(guest, RUNNING)

    def rebuild(self, guest: GuestSpec) -> None:
        self._call("rebuild", guest.uuid)
        self.authorized.pop(guest.uuid, None)  # a new disk
        self._keep(guest, RUNNING)

    def power_off(self, uuid: str) -> None:
        self._call("power_off", uuid)
        self.power[uuid] = SHUTDOWN
        self._save(uuid)

    def power_on(self, guest: GuestSpec) -> None:
        self._call("power_on", guest.uuid)
        self._keep(guest, RUNNING)

    def destroy(self, uuid: str) -> None:
        self._call("destroy", uuid)
        self.guests.pop(uuid, None)
        self.power.pop(uuid, None)
        self.authorized.pop(uuid, None)
        if self.state_dir is not None:
            (self.state_dir / f"{uuid}.json").unlink(missing_ok=True)

    def capacity(self) -> Capacity:
        return Capacity(vcpus=1000, memory_mb=800_000, disk_gb=600_000, hypervisor_type="fake")

    def running(self) -> set[str]:
        return set(self.power)

    def powered_on(self, uuid: str) -> bool:
        return self.power.get(uuid) == RUNNING

    def ssh_forward(self, uuid: str) -> str | None:
        """``FAKE_SSH_FORWARD`` for a running guest of this object that opted in, else None
        (as the qemu driver answers, with one made-up port)."""
        guest = self.guests.get(uuid)
        if guest is None or self.power.get(uuid) != RUNNING:
            return None
        return FAKE_SSH_FORWARD if ssh_forward.wanted(guest.metadata) else None

    def console_output(self, uuid: str) -> str:
        # Nova's fake driver answers three lines; tempest's "unlimited size" test wants more
        # than three, as a real guest's log has.
        return FAKE_CONSOLE if uuid in self.power else ""

    def console_stamp(self, uuid: str) -> str:
        return "fake" if uuid in self.power else ""  # the console never changes

    def push_keys(
        self, instance_uuid: str, *, user: str, add: list[str], remove: list[str]
    ) -> None:
        """As qemu-guest-agent's ssh commands: add the lines not there yet, drop ``remove``."""
        self._call("push_keys", instance_uuid)
        with self._lock:
            if self.power.get(instance_uuid) != RUNNING:
                raise GuestNotRunning()
            if not self._agent.get(instance_uuid, self._agent_default):
                raise GuestAgentUnavailable(
                    "the guest agent did not answer the guest-sync-delimited handshake "
                    "(fake driver: no agent)"
                )
            lines = self.authorized.setdefault(instance_uuid, {}).setdefault(user, [])
            lines += [key for key in add if key not in lines]
            lines[:] = [key for key in lines if key not in remove]

    def _keep(self, guest: GuestSpec, power: int) -> None:
        self.guests[guest.uuid] = guest
        self.power[guest.uuid] = power
        self._save(guest.uuid)

    def _save(self, uuid: str) -> None:
        if self.state_dir is None or uuid not in self.power:
            return
        path = self.state_dir / f"{uuid}.json"
        partial = path.with_suffix(".tmp")
        partial.write_text(json.dumps({"power": self.power[uuid]}))
        os.replace(partial, path)

    def clean_up(self) -> None:
        """Nothing outlives a fake guest."""

    def close(self) -> None:
        pass  # nothing runs outside this object
