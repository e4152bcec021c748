"""What every command gets: the global options, settings built from them on first use, and the
one way a command opens the databases.

``--config`` and ``--data-dir`` are accepted before the sub-command (``cloudseed --data-dir D
keypair list``) and after it (``cloudseed keypair list --data-dir D``): operators type both, and
the second is how every other OpenStack CLI takes its options. The later one wins.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import click
from sqlalchemy.exc import OperationalError

from cloudseed.cells.service import CellDatabases
from cloudseed.db.engines import Database
from cloudseed.errors import CloudseedError
from cloudseed.schema.sync import require_current
from cloudseed.settings import Settings, load_settings

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class CliContext:
    config_file: str | None = None
    data_dir: str | None = None
    _settings: Settings | None = field(default=None, repr=False)

    def settings(self, overrides: dict[tuple[str, str], Any] | None = None) -> Settings:
        if self._settings is None:
            all_overrides = {("DEFAULT", "state_path"): self.data_dir, **(overrides or {})}
            with errors_as_click():
                self._settings = load_settings(
                    config_file=self.config_file, overrides=all_overrides
                )
            for warning in self._settings.warnings:
                click.echo(f"warning: {warning}", err=True)
        return self._settings


pass_cli = click.make_pass_decorator(CliContext, ensure=True)


def _set(attribute: str) -> Callable[[click.Context, click.Parameter, str | None], None]:
    def callback(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
        if value is None:
            return
        setattr(ctx.ensure_object(CliContext), attribute, value)

    return callback


def state_options(command: F) -> F:
    """``--config`` and ``--data-dir`` on a sub-command, setting the same CliContext values as
    the group's options (given after the sub-command, they win)."""
    command = click.option(
        "--config",
        type=click.Path(dir_okay=False),
        expose_value=False,
        callback=_set("config_file"),
        help="INI file in nova.conf's layout (also CLOUDSEED_CONFIG).",
    )(command)
    return click.option(
        "--data-dir",
        expose_value=False,
        callback=_set("data_dir"),
        help="Directory for cloudseed's files ([DEFAULT] state_path).",
    )(command)


@contextmanager
def errors_as_click() -> Iterator[None]:
    """Domain errors end the command with their message and exit status 1, no traceback."""
    try:
        yield
    except CloudseedError as exc:
        raise click.ClickException(exc.message) from exc


class DatabaseUnreachable(click.ClickException):
    """A database did not answer the schema check (its message names the server's error)."""


@dataclass(frozen=True)
class Databases:
    api: Database
    cells: CellDatabases


@contextmanager
def open_databases(cli: CliContext) -> Iterator[Databases]:
    """The API database and its cells for one command, disposed of whatever happens.

    Stops with "run `cloudseed db sync`" when a schema is missing or old, before the command
    reads a table that is not there.
    """
    settings = cli.settings()
    with errors_as_click():
        api = Database.connect("api", settings.api_database_url)
    cells = CellDatabases(api)
    try:
        with errors_as_click():
            try:
                require_current(api)
            except OperationalError as exc:
                raise DatabaseUnreachable(f"cannot reach a database: {exc.orig}") from None
        yield Databases(api, cells)
    finally:
        cells.dispose()
        api.dispose()
