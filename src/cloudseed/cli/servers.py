"""``cloudseed server ssh SERVER``: the command that logs in to a server through its SSH
forward (the qemu driver's opt-in, docs/qemu-driver.md), printed for the operator to run or
use as ``$(cloudseed server ssh vm)``. Works on any node with the databases: the forward is
recorded there by the agent of the server's host.

``cloudseed server wait SERVER``: until the server's guest reports its boot done (readiness,
2.110's ``bootstrap_status``, read from the databases): exit 0; 1 when the boot failed (the
module cloud-init named), the server is in ERROR or gone; 2 when ``--timeout`` ran out.
"""

from __future__ import annotations

import time

import click

from cloudseed.cli.context import (
    CliContext,
    errors_as_click,
    open_databases,
    pass_cli,
    state_options,
)
from cloudseed.servers import states, views
from cloudseed.servers.lifecycle.ssh_access import find_server, ssh_access


@click.group()
def server() -> None:
    """Reach servers (the compute API manages them)."""


@server.command("ssh")
@click.argument("server_ref", metavar="SERVER")
@state_options
@pass_cli
def server_ssh(cli: CliContext, server_ref: str) -> None:
    """Print `ssh -p PORT USER@ADDRESS` for SERVER (a uuid or a unique name): USER is the
    image's os_admin_user property, else root. Fails when the server has no SSH forward
    (opt in with the server metadata cloudseed:ssh_forward=true)."""
    with open_databases(cli) as dbs, errors_as_click():
        access = ssh_access(dbs.cells, server_ref)
    click.echo(access.command())


class WaitTimedOut(click.ClickException):
    exit_code = 2


@server.command("wait")
@click.argument("server_ref", metavar="SERVER")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=1800.0,
    show_default=True,
    help="Seconds to wait at most (exit status 2 then).",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.01),
    default=2.0,
    show_default=True,
    help="Seconds between two looks at the server.",
)
@state_options
@pass_cli
def server_wait(cli: CliContext, server_ref: str, timeout: float, interval: float) -> None:
    """Wait until SERVER's guest reports its boot done (cloud-init's reporting webhook or its
    phone_home; docs/metadata.md#boot-reports). Exits 1 when the boot failed, naming the
    module, or the server is in ERROR or gone; 2 when --timeout runs out."""
    deadline = time.monotonic() + timeout
    with open_databases(cli) as dbs, errors_as_click():
        while True:
            record = find_server(dbs.cells, server_ref)
            uuid = record.instance.uuid
            shown = views.bootstrap_status(record)
            if shown["status"] == "done":
                click.echo(f"Server {uuid} is ready.")
                return
            if shown["status"] == "failed":
                raise click.ClickException(
                    f"Server {uuid}'s boot failed: cloud-init reported module "
                    f"{shown['failed_module']!r} failed."
                )
            if record.instance.vm_state == states.ERROR:
                raise click.ClickException(f"Server {uuid} is in ERROR.")
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimedOut(
                    f"Timed out after {timeout:g} s waiting for server {uuid} to be ready: "
                    f"its boot is {shown['status']}."
                )
            time.sleep(min(interval, left))
