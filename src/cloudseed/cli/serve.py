"""``cloudseed serve``.

Before anything listens, ``preflight`` checks what would otherwise fail later and less clearly:
the databases must be at the newest schema (else every request is a 500), and
``auth_strategy = keystone`` needs the ``keystone`` extra (else each worker dies on import).
"""

from __future__ import annotations

import logging

import click

from cloudseed import serve as serving
from cloudseed.cli.context import (
    CliContext,
    DatabaseUnreachable,
    errors_as_click,
    open_databases,
    pass_cli,
    state_options,
)
from cloudseed.settings import Settings


def _host_port(value: str | None) -> tuple[str | None, int | None]:
    if value is None:
        return None, None
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise click.BadParameter(f"{value!r} is not HOST:PORT")
    return host.strip("[]") or "0.0.0.0", int(port)


@click.command()
@click.option(
    "--api-listen", metavar="HOST:PORT", help="Compute API address (default 127.0.0.1:8774)."
)
@click.option(
    "--metadata-listen",
    metavar="HOST:PORT",
    help="Metadata service address (default 127.0.0.1:8775).",
)
@click.option("--workers", type=int, help="Worker processes (default 1).")
@state_options
@pass_cli
def serve(
    cli: CliContext, api_listen: str | None, metadata_listen: str | None, workers: int | None
) -> None:
    """Run the compute API (and the metadata service) until SIGTERM."""
    api_host, api_port = _host_port(api_listen)
    md_host, md_port = _host_port(metadata_listen)
    settings = cli.settings(
        {
            ("DEFAULT", "osapi_compute_listen"): api_host,
            ("DEFAULT", "osapi_compute_listen_port"): api_port,
            ("DEFAULT", "metadata_listen"): md_host,
            ("DEFAULT", "metadata_listen_port"): md_port,
            ("DEFAULT", "workers"): workers,
        }
    )
    logging.getLogger().setLevel(settings.default.log_level.upper())
    if settings.api.auth_strategy == "noauth2":
        logging.getLogger("cloudseed").warning(
            "[api] auth_strategy is noauth2: anyone who can reach the API can act as any user, "
            "including 'admin'. Use it for development only."
        )
    preflight(cli, settings)
    with errors_as_click():
        serving.run(settings)


def preflight(cli: CliContext, settings: Settings) -> None:
    """Stop with a message, before binding a port, when serving could not work."""
    if settings.api.auth_strategy == "keystone":
        try:
            import keystonemiddleware.auth_token  # noqa: F401
        except ImportError as exc:
            raise click.ClickException(
                "[api] auth_strategy = keystone needs keystonemiddleware, which cannot be "
                f"imported ({exc}): install cloudseed with the keystone extra "
                "(pip install 'cloudseed[keystone]') or set auth_strategy = noauth2"
            ) from None
    try:
        with open_databases(cli):
            pass
    except DatabaseUnreachable as exc:
        # An outage at start is not a configuration error: serve, and let /healthz say 503
        # until the database answers (as it does for an outage later on).
        logging.getLogger("cloudseed").warning("%s; the schema was not checked", exc.message)
