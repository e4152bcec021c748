"""``cloudseed known-hosts SERVER``: the server's SSH host keys as ``known_hosts`` lines, for
``ssh -o StrictHostKeyChecking=yes -o UserKnownHostsFile=FILE`` on first contact
(docs/host-keys.md). Works on any node with the databases, as ``cloudseed server ssh`` does.
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
from cloudseed.hostkeys.ssh_names import known_hosts_of


@click.command("known-hosts")
@click.argument("server_ref", metavar="SERVER")
@click.option(
    "--host",
    "more",
    multiple=True,
    metavar="NAME",
    help="Another name the server is reached by, as known_hosts writes it "
    "(vm1.example.org, [192.0.2.1]:2222); repeat for more.",
)
@state_options
@pass_cli
def known_hosts(cli: CliContext, server_ref: str, more: tuple[str, ...]) -> None:
    """Print known_hosts lines for SERVER (a uuid or a unique name): its host keys as its guest
    reported them, under its fixed addresses and its SSH forward ([ADDRESS]:PORT). Fails when
    no keys are recorded yet (the guest neither phoned home nor printed them on its console)."""
    with open_databases(cli) as dbs, errors_as_click():
        found = known_hosts_of(dbs.cells, server_ref, more=more)
    if not found.hosts:
        raise click.ClickException(f"Server {found.uuid} has no address; name one with --host.")
    for line in found.lines():
        click.echo(line)
