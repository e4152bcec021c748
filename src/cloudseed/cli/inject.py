"""``cloudseed inject IMAGE``: the same injection create and rebuild do, on an image file.

Handlers come from ``[libvirt] inject_handlers``; the partition from ``--partition`` or
``[libvirt] inject_partition``. What the command is asked to write is written: ``--key`` and
``--password`` do not depend on ``inject_key`` and ``inject_password``, which are about what
create and rebuild do on their own.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO

import click

from cloudseed.cli.context import CliContext, errors_as_click, pass_cli, state_options
from cloudseed.injection.request import PARTITION_OFF, InjectionOptions, InjectionRequest
from cloudseed.injection.service import inject as inject_image


def _split_file_option(value: str) -> tuple[Path, str]:
    # SRC:DST, split at the first ":/" so a host path may itself contain ':'.
    src, sep, dst = value.partition(":/")
    if not sep or not src:
        raise click.BadParameter(f"{value!r} is not SRC:/guest/path", param_hint="--file")
    return Path(src), "/" + dst


def _split_metadata_option(value: str) -> tuple[str, str]:
    key, sep, item = value.partition("=")
    if not sep or not key:
        raise click.BadParameter(f"{value!r} is not KEY=VALUE", param_hint="--metadata")
    return key, item


@click.command("inject")
@click.argument("image", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--key",
    "key_file",
    type=click.File("r"),
    help="OpenSSH public key to append to /root/.ssh/authorized_keys ('-' for standard input).",
)
@click.option(
    "--password",
    "ask_password",
    is_flag=True,
    help="Prompt for an admin password for root (stored as a SHA-512 crypt hash).",
)
@click.option(
    "--file",
    "file_specs",
    multiple=True,
    metavar="SRC:DST",
    help="Copy the host file SRC to the guest path DST (repeatable).",
)
@click.option(
    "--metadata",
    "metadata_specs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Server metadata for /meta.js (repeatable).",
)
@click.option(
    "--partition",
    type=click.IntRange(min=-1),
    help="-1 find the root filesystem by inspection (guestfs only), 0 the whole "
    "image is the filesystem, N partition N. Default: [libvirt] inject_partition.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["raw", "qcow2"]),
    default="raw",
    show_default=True,
    help="The image's format; anything else is refused.",
)
@state_options
@pass_cli
def inject(
    cli: CliContext,
    image: Path,
    key_file: IO[str] | None,
    ask_password: bool,
    file_specs: tuple[str, ...],
    metadata_specs: tuple[str, ...],
    partition: int | None,
    fmt: str,
) -> None:
    """Write a key, root password, metadata or files into a disk image."""
    files = []
    for spec in file_specs:
        src, dst = _split_file_option(spec)
        try:
            files.append((dst, src.read_bytes()))
        except OSError as exc:
            raise click.BadParameter(
                f"cannot read {src}: {exc.strerror}", param_hint="--file"
            ) from None
    metadata = dict(_split_metadata_option(spec) for spec in metadata_specs)
    key = key_file.read() if key_file is not None else None
    password = (
        click.prompt("Admin password", hide_input=True, confirmation_prompt=True)
        if ask_password
        else None
    )

    settings = cli.settings()
    chosen = settings.libvirt.inject_partition if partition is None else partition
    if chosen == PARTITION_OFF:
        raise click.UsageError(
            "[libvirt] inject_partition is -2 (injection off); pass "
            "--partition (0 whole image, N partition N, -1 inspect)."
        )
    with errors_as_click():
        request = InjectionRequest(
            key_data=key, admin_password=password, metadata=metadata, files=tuple(files)
        )
        if request.is_empty:
            raise click.UsageError(
                "Nothing to inject: give --key, --password, --file or --metadata."
            )
        options = InjectionOptions.from_settings(
            settings,
            partition=chosen,
            inject_key=key is not None,
            inject_password=password is not None,
        )
        report = inject_image(image, fmt, request, options=options)
    for name, reason in report.unavailable:
        click.echo(f"{name}: cannot serve this image: {reason}", err=True)
    click.echo(f"injected into {image} with {report.handler}: {', '.join(report.written)}")
