"""Compute driver errors.

CloudseedError ── DriverError       the hypervisor could not do what was asked   (500)
Exception ─────── BadRelayRequest   the guestfwd relay refuses what the guest sent (the
                                    relay answers 400 to the guest; never reaches the API)
"""

from __future__ import annotations

from cloudseed.errors import CloudseedError


class DriverError(CloudseedError):
    """The hypervisor could not do what was asked; ``message`` says why."""


class BadRelayRequest(Exception):
    """What a guest sent through the guestfwd channel is not an HTTP request we relay."""
