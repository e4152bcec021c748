"""``cloudseed serve``.

Before anything listens, ``cli/preflight.py`` checks what would otherwise fail later and less
clearly: settings that cannot work together, the databases' schema (else every request is a
500), and the ``keystone`` extra when ``auth_strategy = keystone``.
"""

from __future__ import annotations

import logging

import click

from cloudseed import serve as serving
from cloudseed.cli.context import CliContext, errors_as_click, pass_cli, state_options
from cloudseed.cli.preflight import preflight


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
@click.option(
    "--enabled-apis",
    metavar="LIST",
    help="The APIs to run: osapi_compute, metadata or both, comma-separated "
    "([DEFAULT] enabled_apis; default both).",
)
@click.option(
    "--no-compute",
    is_flag=True,
    help="Serve the API and metadata only; guests run on `cloudseed compute` hosts.",
)
@state_options
@pass_cli
def serve(
    cli: CliContext,
    api_listen: str | None,
    metadata_listen: str | None,
    workers: int | None,
    enabled_apis: str | None,
    no_compute: bool,
) -> None:
    """Run the compute API and the metadata service (and, unless --no-compute, this host's
    compute agent, beside the compute API) until SIGTERM."""
    api_host, api_port = _host_port(api_listen)
    md_host, md_port = _host_port(metadata_listen)
    settings = cli.settings(
        {
            ("DEFAULT", "osapi_compute_listen"): api_host,
            ("DEFAULT", "osapi_compute_listen_port"): api_port,
            ("DEFAULT", "metadata_listen"): md_host,
            ("DEFAULT", "metadata_listen_port"): md_port,
            ("DEFAULT", "workers"): workers,
            ("DEFAULT", "enabled_apis"): enabled_apis,
        }
    )
    with_api = serving.runs_compute_api(settings)
    compute = not no_compute and with_api
    logging.getLogger().setLevel(settings.default.log_level.upper())
    if settings.api.auth_strategy == "noauth2" and with_api:
        logging.getLogger("cloudseed").warning(
            "[api] auth_strategy is noauth2: anyone who can reach the API can act as any user, "
            "including 'admin'. Use it for development only."
        )
    preflight(cli, settings, compute=compute)
    with errors_as_click():
        serving.run(settings, compute=compute)
