"""Choosing the compute driver from settings (``[DEFAULT] compute_driver``)."""

from __future__ import annotations

from cloudseed.compute.fake import FakeDriver
from cloudseed.compute.interfaces import Driver
from cloudseed.compute.qemu import QemuDriver
from cloudseed.settings import Settings


def make_driver(settings: Settings, *, host: str) -> Driver:
    """The driver for compute host ``host``. The fake driver keeps its guests under
    ``<state_path>/fake-driver/<host>/``, so an agent started again knows them."""
    if settings.default.compute_driver == "qemu":
        return QemuDriver(settings, host=host)
    return FakeDriver(
        delay=settings.fake_driver.delay_ms / 1000,
        state_dir=settings.state_dir / "fake-driver" / host,
    )
