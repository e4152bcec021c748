"""The cloudseed command line, run in this process."""

from __future__ import annotations

from click.testing import CliRunner

from cloudseed.cli import cli


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    return result.exit_code, result.output
