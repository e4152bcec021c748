"""``cloudseed nova-metadata``: serve an existing Nova cloud's guests from Nova's own databases,
in place of nova-api-metadata (docs/nova-dropin.md).

It reads nova.conf (``--config-file``, repeatable, the later winning) and nothing of
cloudseed's own configuration. Before anything listens it checks what would otherwise fail at
the first request: the files and the options it reads, every database (named, password
masked, when one does not answer), Neutron's auth options, the vendordata file. A problem is
one line and exit status 2.
"""

from __future__ import annotations

import logging

import click

from cloudseed.errors import CloudseedError


class ConfigProblem(click.ClickException):
    exit_code = 2


def _host_port(value: str | None) -> tuple[str, int] | None:
    if value is None:
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise click.BadParameter(f"{value!r} is not HOST:PORT", param_hint="--listen")
    return host.strip("[]") or "0.0.0.0", int(port)


@click.command("nova-metadata")
@click.option(
    "--config-file",
    "config_files",
    multiple=True,
    required=True,
    type=click.Path(dir_okay=False),
    help="nova.conf (repeat for more files; the later wins).",
)
@click.option(
    "--listen",
    metavar="HOST:PORT",
    help="Address to listen on (default [DEFAULT] metadata_listen:metadata_listen_port, "
    "0.0.0.0:8775).",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    help="Worker processes (default [DEFAULT] metadata_workers, else one per CPU).",
)
def nova_metadata(config_files: tuple[str, ...], listen: str | None, workers: int | None) -> None:
    """Serve Nova's metadata API (both trees) from Nova's databases until SIGTERM."""
    from cloudseed import serve as serving
    from cloudseed.listening import Listener
    from cloudseed.nova_metadata import config as nova_config
    from cloudseed.nova_metadata.app import create_app
    from cloudseed.nova_metadata.preflight import preflight

    try:
        config = nova_config.load(list(config_files), listen=_host_port(listen), workers=workers)
        preflight(config)
    except CloudseedError as exc:
        raise ConfigProblem(exc.message) from None
    logging.getLogger().setLevel(logging.INFO)
    listener = Listener(
        "Nova metadata service",
        config.listen_host,
        config.listen_port,
        lambda _settings, _db: create_app(config),
        kind="metadata",
        uses_api_db=False,
    )
    try:
        serving.run(config.settings, chosen=[listener])
    except CloudseedError as exc:
        raise click.ClickException(exc.message) from None
    except OSError as exc:  # the address is taken, say
        raise ConfigProblem(
            f"cannot listen on {config.listen_host}:{config.listen_port}: {exc.strerror}"
        ) from None
