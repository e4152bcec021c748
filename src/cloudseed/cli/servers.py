"""``cloudseed server ssh SERVER``: the command that logs in to a server through its SSH
forward (the qemu driver's opt-in, docs/qemu-driver.md), printed for the operator to run or
use as ``$(cloudseed server ssh vm)``. Works on any node with the databases: the forward is
recorded there by the agent of the server's host.
"""

from __future__ import annotations

import click

from cloudseed.cli.context import (
    CliContext,
    errors_as_click,
    open_databases,
    pass_cli,
    state_options,
)
from cloudseed.servers.lifecycle.ssh_access import ssh_access


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
