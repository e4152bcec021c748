"""``cloudseed compute``: run the compute agent of one host until SIGTERM.

The agent registers its host (``os-services``, ``os-hypervisors``), takes the operations queued
for it from the database, runs them through its driver and records their outcome; it serves
no HTTP. Any number of hosts share one cloudseed through the database; ``cloudseed serve
--no-compute`` runs the API and metadata nodes (docs/deployment.md).
"""

from __future__ import annotations

import logging
import re
import signal
import threading
from types import FrameType

import click

from cloudseed.agent.factory import make_agent
from cloudseed.cli.context import (
    CliContext,
    errors_as_click,
    open_databases,
    pass_cli,
    state_options,
)
from cloudseed.cli.preflight import preflight
from cloudseed.db import checkpoints

log = logging.getLogger(__name__)

# A host name becomes a directory name and a database value: a DNS name's characters only.
HOST_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,253}[A-Za-z0-9])?$")


@click.command()
@click.option(
    "--host", help="This compute host's name (default: [DEFAULT] host, else the hostname)."
)
@click.option(
    "--driver",
    type=click.Choice(["fake", "qemu"]),
    help="Compute driver (default: [DEFAULT] compute_driver).",
)
@state_options
@pass_cli
def compute(cli: CliContext, host: str | None, driver: str | None) -> None:
    """Run this host's compute agent until SIGTERM or SIGINT."""
    if host is not None and not HOST_NAME.match(host):
        raise click.BadParameter("letters, digits, '.', '-' and '_' only", param_hint="--host")
    settings = cli.settings({("DEFAULT", "host"): host, ("DEFAULT", "compute_driver"): driver})
    logging.getLogger().setLevel(settings.default.log_level.upper())
    preflight(cli, settings)
    stopping = threading.Event()

    def on_signal(_sig: int, _frame: FrameType | None) -> None:
        stopping.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        with open_databases(cli) as dbs, errors_as_click():
            agent = make_agent(settings, dbs.cells)
            agent.start()
            checkpoints.start()
            log.info("compute host %s ready", agent.host)
            try:
                stopping.wait()
            finally:
                log.info("compute host %s stopping", agent.host)
                agent.stop()
                agent.close()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
