"""The ``fake`` driver: keeps guests in memory, takes ``delay`` seconds per operation, and can be
told to fail, so every state transition and error path is testable without a hypervisor."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from cloudseed.compute.errors import DriverError
from cloudseed.compute.interfaces import GuestSpec

RUNNING, SHUTDOWN = 1, 4  # Nova's power_state values


@dataclass
class _Failure:
    operation: str
    uuid: str | None
    remaining: int
    message: str


class FakeDriver:
    name = "fake"

    def __init__(self, *, delay: float = 0.0) -> None:
        self.delay = delay
        self.guests: dict[str, GuestSpec] = {}
        self.power: dict[str, int] = {}
        self.calls: list[tuple[str, str]] = []
        self._failures: list[_Failure] = []
        self._lock = threading.Lock()

    def fail(
        self,
        operation: str,
        *,
        uuid: str | None = None,
        times: int = 1,
        message: str = "injected failure",
    ) -> None:
        """Make the next ``times`` calls of ``operation`` (for ``uuid``, or any) raise."""
        with self._lock:
            self._failures.append(_Failure(operation, uuid, times, message))

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
                    raise DriverError(f"{operation} failed: {failure.message}")
        if self.delay:
            time.sleep(self.delay)

    def spawn(self, guest: GuestSpec) -> None:
        self._call("spawn", guest.uuid)
        self.guests[guest.uuid] = guest
        self.power[guest.uuid] = RUNNING

    def reboot(self, guest: GuestSpec, *, hard: bool) -> None:
        self._call("reboot_hard" if hard else "reboot_soft", guest.uuid)
        self.guests[guest.uuid] = guest
        self.power[guest.uuid] = RUNNING

    def rebuild(self, guest: GuestSpec) -> None:
        self._call("rebuild", guest.uuid)
        self.guests[guest.uuid] = guest
        self.power[guest.uuid] = RUNNING

    def power_off(self, uuid: str) -> None:
        self._call("power_off", uuid)
        self.power[uuid] = SHUTDOWN

    def power_on(self, guest: GuestSpec) -> None:
        self._call("power_on", guest.uuid)
        self.guests[guest.uuid] = guest
        self.power[guest.uuid] = RUNNING

    def destroy(self, uuid: str) -> None:
        self._call("destroy", uuid)
        self.guests.pop(uuid, None)
        self.power.pop(uuid, None)

    def console_output(self, uuid: str) -> str:
        # What Nova's fake driver answers, so API tests have lines to cut.
        return "FAKE CONSOLE OUTPUT\nANOTHER\nLAST LINE" if uuid in self.guests else ""

    def close(self) -> None:
        pass  # nothing runs outside this object
