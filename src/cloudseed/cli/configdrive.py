"""``cloudseed configdrive build SERVER --output PATH`` and ``cloudseed configdrive show PATH
[FILE]``: an instance's drive built by hand (as create would build it, or with ``--format
nocloud`` a CIDATA drive of its NoCloud seed), and any drive's files listed or printed without
mounting it."""

from __future__ import annotations

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
from cloudseed.configdrive.service import DriveBuilder, read_drive

# --format's NoCloud choices, by the filesystem they are written as.
NOCLOUD_FORMATS = {"nocloud": "iso9660", "nocloud-vfat": "vfat"}


@click.group()
def configdrive() -> None:
    """Build and inspect config drives."""


@configdrive.command()
@click.argument("server")
@click.option(
    "--output",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the image (replaced atomically if it exists).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["iso9660", "vfat", "nocloud", "nocloud-vfat"]),
    help="Image format. Default: [DEFAULT] config_drive_format. nocloud (ISO 9660) and "
    "nocloud-vfat: a CIDATA drive for cloud-init's NoCloud datasource instead of config-2.",
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
def build(cli: CliContext, server: str, output: Path, fmt: str | None, carry_over: bool) -> None:
    """Build the config drive of instance SERVER (its uuid)."""
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
