"""Compute driver errors.

CloudseedError ── DriverError   the hypervisor could not do what was asked   (500)
"""

from __future__ import annotations

from cloudseed.errors import CloudseedError


class DriverError(CloudseedError):
    """The hypervisor could not do what was asked; ``message`` says why."""
