"""What every command gets: the global options, and settings built from them on first use."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import click

from cloudseed.errors import CloudseedError
from cloudseed.settings import Settings, load_settings


@dataclass
class CliContext:
    config_file: str | None
    data_dir: str | None
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


pass_cli = click.make_pass_decorator(CliContext)


@contextmanager
def errors_as_click() -> Iterator[None]:
    """Domain errors end the command with their message and exit status 1, no traceback."""
    try:
        yield
    except CloudseedError as exc:
        raise click.ClickException(exc.message) from exc
