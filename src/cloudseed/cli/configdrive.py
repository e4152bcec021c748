"""``cloudseed configdrive build SERVER --output PATH`` and ``cloudseed configdrive show PATH
[FILE]``: an instance's drive built by hand (as create would build it, or with ``--format
nocloud`` a CIDATA drive of its NoCloud seed), and any drive's files listed or printed without
mounting it. ``build --format ironic|ironic-json`` prints the drive in the forms Ironic takes
for a bare-metal node (``configdrive/ironic.py``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from cloudseed.cli.context import (
    CliContext,
    errors_as_click,
    open_databases,
    pass_cli,
    state_options,
)
from cloudseed.configdrive import ironic
from cloudseed.configdrive.service import FORMATS, DriveBuilder, read_drive

# --format's NoCloud choices, by the filesystem they are written as.
NOCLOUD_FORMATS = {"nocloud": "iso9660", "nocloud-vfat": "vfat"}


@click.group()
def configdrive() -> None:
    """Build and inspect config drives."""


@configdrive.command()
@click.argument("server")
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the image (replaced atomically if it exists); required for images. "
    "The Ironic forms are printed to standard output without it.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice([*FORMATS, *NOCLOUD_FORMATS, *ironic.FORMATS]),
    help="Image format. Default: [DEFAULT] config_drive_format. nocloud (ISO 9660) and "
    "nocloud-vfat: a CIDATA drive for cloud-init's NoCloud datasource instead of config-2. "
    "'ironic': the ISO 9660 image gzipped and base64-encoded, 'ironic-json': the JSON object "
    "Ironic builds a drive from (both for `openstack baremetal node deploy --config-drive`).",
)
@click.option(
    "--carry-over/--no-carry-over",
    default=True,
    show_default=True,
    help="Keep the admin password and personality files of the instance's "
    "current drive (they are stored nowhere else).",
)
@state_options
@pass_cli
def build(
    cli: CliContext, server: str, output: Path | None, fmt: str | None, carry_over: bool
) -> None:
    """Build the config drive of instance SERVER (its uuid)."""
    if fmt in ironic.FORMATS:
        _ironic(cli, server, fmt, output, carry_over=carry_over)
        return
    if output is None:
        raise click.UsageError("--output is required for an image (iso9660, vfat or nocloud).")
    nocloud = NOCLOUD_FORMATS.get(fmt or "")
    settings = cli.settings({("DEFAULT", "config_drive_format"): None if nocloud else fmt})
    with open_databases(cli) as dbs:
        builder = DriveBuilder(settings, dbs.cells)
        try:
            with errors_as_click():
                if nocloud is not None:
                    built = builder.build_nocloud(server, output=output, fmt=nocloud)
                else:
                    built = builder.build(server, carry_over=carry_over, output=output)
        finally:
            builder.close()
    click.echo(f"wrote {built.path} ({built.format})")


def _ironic(
    cli: CliContext, server: str, fmt: str, output: Path | None, *, carry_over: bool
) -> None:
    """The drive in an Ironic form, to standard output or ``output``."""
    with open_databases(cli) as dbs:
        builder = DriveBuilder(cli.settings(), dbs.cells)
        try:
            with errors_as_click():
                tree = builder.carried_tree_for(server) if carry_over else builder.tree_for(server)
                form = ironic.render(fmt, tree)
        finally:
            builder.close()
    text = form if isinstance(form, str) else json.dumps(form, sort_keys=True)
    if output is None:
        click.echo(text)
    else:
        output.write_text(text + "\n", encoding="utf-8")
        click.echo(f"wrote {output} ({fmt})")


@configdrive.command()
@click.argument("image", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("file", required=False)
@state_options
def show(image: Path, file: str | None) -> None:
    """List the files of a drive image, or print FILE (a path such as
    openstack/latest/meta_data.json) to standard output."""
    with errors_as_click():
        fmt, label, tree = read_drive(image)
    if file is not None:
        content = tree.get(file.strip("/"))
        if content is None:
            raise click.ClickException(f"{file}: no such file on {image}")
        sys.stdout.buffer.write(content)
        sys.stdout.buffer.flush()
        return
    click.echo(f"{image}: {fmt}, label {label!r}, {len(tree)} files")
    for path in sorted(tree):
        click.echo(f"{len(tree[path]):>10}  {path}")
