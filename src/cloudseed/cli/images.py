"""``cloudseed image add|list|show``: register the disk images servers boot from.

``image add`` registers a copy of the file in the data directory (``images/store.py``), so the
operator's file may move or change afterwards; ``--kernel`` and ``--initrd`` register the
kernel and initramfs of an image without a boot loader the same way and link them to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from sqlalchemy.orm import Session

from cloudseed.cli.context import CliContext, errors_as_click, pass_cli, state_options
from cloudseed.cli.output import emit_list, emit_one, output_options, pick
from cloudseed.cli.sessions import read, write
from cloudseed.errors import InvalidInput
from cloudseed.images import service, store
from cloudseed.images.errors import NotValidImage, VirtualSizeTooLarge
from cloudseed.images.models import Image

LIST_COLUMNS = ("id", "name", "disk_format", "size")

existing_file = click.Path(exists=True, dir_okay=False, path_type=Path)


def _record(image: Image) -> dict[str, Any]:
    return {
        "id": image.uuid,
        "name": image.name,
        "disk_format": image.disk_format,
        "size": image.size,
        "checksum_sha256": image.checksum_sha256,
        "file": image.path,
        "properties": service.properties_of(image),
    }


@click.group()
def image() -> None:
    """Register disk images servers boot from."""


@image.command("add")
@click.argument("name")
@click.option("--file", "path", type=existing_file, required=True)
@click.option("--disk-format", type=click.Choice(["raw", "qcow2"]), required=True)
@click.option(
    "--kernel",
    type=existing_file,
    help="Kernel to boot the image with, for an image without a boot loader.",
)
@click.option("--initrd", type=existing_file, help="Initramfs to boot the image with.")
@click.option(
    "--property",
    "properties",
    multiple=True,
    metavar="KEY=VALUE",
    help="Image property, e.g. img_config_drive=mandatory (repeatable).",
)
@output_options
@state_options
@pass_cli
def image_add(
    cli: CliContext,
    name: str,
    path: Path,
    disk_format: str,
    kernel: Path | None,
    initrd: Path | None,
    properties: tuple[str, ...],
    fmt: str,
    columns: tuple[str, ...],
) -> None:
    """Register a copy of an image file (and its kernel and initramfs) and show it."""
    props = dict(p.split("=", 1) for p in properties if "=" in p)
    if len(props) != len(properties):
        raise click.BadParameter("properties are KEY=VALUE", param_hint="--property")
    settings = cli.settings()
    directory = store.images_dir(settings.state_dir)
    virtual_size_cap = settings.glance.image_virtual_size_cap
    copies: dict[str, Path] = {}
    try:
        with errors_as_click():
            for role, source, suffix in (
                ("disk", path, f".{disk_format}"),
                ("kernel", kernel, ".raw"),
                ("ramdisk", initrd, ".raw"),
            ):
                if source is not None:
                    copies[role] = store.copy_in(source, directory, suffix=suffix)

        def register(session: Session) -> dict[str, Any]:
            try:
                added = service.add_bootable(
                    session,
                    name=name,
                    path=copies["disk"],
                    disk_format=disk_format,
                    properties=props,
                    kernel=copies.get("kernel"),
                    ramdisk=copies.get("ramdisk"),
                    virtual_size_cap=virtual_size_cap,
                )
            except VirtualSizeTooLarge as exc:
                # The operator's file, not the name of the store's copy.
                raise InvalidInput(
                    f"{path} has a virtual size of {exc.virtual_size} bytes, more than "
                    f"[glance] image_virtual_size_cap ({exc.cap} bytes)"
                ) from exc
            except NotValidImage as exc:
                # The operator's file and qemu-img's reason, not the name of the store's copy.
                raise InvalidInput(
                    f"{path} is not a valid {disk_format} image: {exc.reason}"
                ) from exc
            return _record(added)

        record = write(cli, register)
    except BaseException:
        for copy in copies.values():
            store.discard(copy)
        raise
    emit_one(record, fmt=fmt, columns=columns)


@image.command("list")
@output_options
@state_options
@pass_cli
def image_list(cli: CliContext, fmt: str, columns: tuple[str, ...]) -> None:
    """List the registered images."""
    records = read(cli, lambda s: [_record(i) for i in service.list_images(s)])
    emit_list(records, fmt=fmt, columns=columns, default=LIST_COLUMNS)


@image.command("show")
@click.argument("image_ref", metavar="ID_OR_NAME")
@output_options
@state_options
@pass_cli
def image_show(cli: CliContext, image_ref: str, fmt: str, columns: tuple[str, ...]) -> None:
    """Show one image, found by id or name (exit status 1 if there is none)."""
    records = read(cli, lambda s: [_record(i) for i in service.list_images(s)])
    emit_one(pick(records, image_ref, kind="image"), fmt=fmt, columns=columns)
