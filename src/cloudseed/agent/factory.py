"""Making a compute agent from settings: its driver, image cache, config drive builder and
vendordata check. Used by the API app's lifespan (the embedded deployment) and ``cloudseed
compute``."""

from __future__ import annotations

import socket
from functools import partial

from cloudseed.agent.images import make_image_cache
from cloudseed.agent.worker import Agent
from cloudseed.cells.service import CellDatabases
from cloudseed.compute.factory import make_driver
from cloudseed.compute.interfaces import Driver
from cloudseed.configdrive.service import DriveBuilder
from cloudseed.metadata.loading import vendordata_request_for
from cloudseed.settings import Settings
from cloudseed.vendordata.build_check import build_check


def host_name(settings: Settings) -> str:
    """This node's compute host name: ``[DEFAULT] host``, else the machine's hostname."""
    return settings.default.host or socket.gethostname()


def make_agent(
    settings: Settings,
    cells: CellDatabases,
    *,
    driver: Driver | None = None,
    host: str | None = None,
) -> Agent:
    """The agent of ``host`` (default: ``[DEFAULT] host``, else this machine's name). A
    driver handed in belongs to the caller; one made here is closed with the agent."""
    host = host or host_name(settings)
    driver = driver if driver is not None else make_driver(settings, host=host)
    return Agent(
        settings,
        host=host,
        cells=cells,
        driver=driver,
        drives=DriveBuilder(settings, cells),
        build_check=build_check(settings, partial(vendordata_request_for, cells)),
        image_cache=make_image_cache(settings, driver),
    )
