"""Compute driver errors.

CloudseedError ── DriverError                 the hypervisor could not do what was asked (500)
                  └── GuestAgentUnavailable   the guest's agent did not do what was asked:
                      │                       no agent, no answer in time; the compute
                      │                       agent records ``reason`` as the key
                      │                       delivery's failure (never an instance fault)
                      ├── GuestNotRunning     the guest is switched off: no use retrying
                      └── GuestAgentCommandFailed   the agent answered with an error (an
                                              unknown user, a command it lacks)
Exception ─────── BadRelayRequest   the guestfwd relay refuses what the guest sent (the
                                    relay answers 400 to the guest; never reaches the API)
"""

from __future__ import annotations

from cloudseed.errors import CloudseedError


class DriverError(CloudseedError):
    """The hypervisor could not do what was asked; ``message`` says why."""


class GuestAgentUnavailable(DriverError):
    """The guest agent could not be asked, or did not answer; ``reason`` says which, in words
    an API user reads in the key delivery state."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class GuestNotRunning(GuestAgentUnavailable):
    """The guest is not running, so no agent can answer."""

    def __init__(self) -> None:
        super().__init__("guest is not running")


class GuestAgentCommandFailed(GuestAgentUnavailable):
    """The guest agent answered ``command`` with an error (QMP's ``class`` and ``desc``)."""

    def __init__(self, command: str, error_class: str, desc: str) -> None:
        super().__init__(f"the guest agent refused {command}: {desc}")
        self.command = command
        self.error_class = error_class
        self.desc = desc


class BadRelayRequest(Exception):
    """What a guest sent through the guestfwd channel is not an HTTP request we relay."""
