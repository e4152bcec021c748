"""Choosing the compute driver from settings."""

from __future__ import annotations

from cloudseed.compute.driver import Driver
from cloudseed.compute.fake import FakeDriver
from cloudseed.settings import Settings


def make_driver(settings: Settings) -> Driver:
    # Only one driver so far; the qemu driver joins here.
    return FakeDriver(delay=settings.fake_driver.delay_ms / 1000)
