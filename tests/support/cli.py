"""The cloudseed command line, run in this process (``run``) or as a process of its own
(``command``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from cloudseed.cli import cli


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    return result.exit_code, result.output


def command(data_dir: Path, *args: str) -> list[str]:
    """``cloudseed --data-dir DATA_DIR ARGS``, for subprocess."""
    return [sys.executable, "-m", "cloudseed", "--data-dir", str(data_dir), *args]


def synced(data_dir: Path) -> Path:
    """``data_dir`` with its databases made (``cloudseed db sync``), for a serve to start on."""
    subprocess.run(command(data_dir, "db", "sync"), check=True, capture_output=True)
    return data_dir
