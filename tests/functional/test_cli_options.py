"""The CLI's shared options and its start-up checks, as an operator meets them: options after
the sub-command, a database never synced, ``serve`` with keystone auth but no keystonemiddleware.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from cloudseed.cli import cli
from tests.support import keys

SYNC_HINT = "run `cloudseed db sync`"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def leaf_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            found += leaf_commands(command, (*prefix, name))
        else:
            found.append((*prefix, name))
    return found


# Commands that read no cloudseed state: nova-metadata and its sub-commands read nova.conf
# (--config-file, before the sub-command) and Nova's databases, never a data directory.
WITHOUT_STATE = "nova-metadata"


@pytest.mark.parametrize(
    "path", [p for p in leaf_commands(cli) if p[0] != WITHOUT_STATE], ids=" ".join
)
def test_every_command_takes_the_state_options_after_it(path):
    code, out = run(*path, "--help")
    assert code == 0, out
    assert "--data-dir" in out and "--config" in out


class TestOptionsAfterTheCommand:
    def test_data_dir_after_the_sub_command(self, tmp_path):
        code, out = run("db", "sync", "--data-dir", str(tmp_path))
        assert code == 0, out
        assert (tmp_path / "cloudseed_api.sqlite").exists()
        pub = tmp_path / "k.pub"
        pub.write_text(keys.ed25519_public() + "\n")
        code, out = run(
            "keypair", "import", "k1", "--user", "u1", "--public-key", str(pub),
            "--data-dir", str(tmp_path),
        )  # fmt: skip
        assert code == 0, out
        code, out = run(
            "keypair", "list", "--data-dir", str(tmp_path), "--user", "u1", "-f", "value"
        )
        assert code == 0 and out.startswith("k1 ssh "), out

    def test_config_after_the_sub_command(self, tmp_path):
        conf = tmp_path / "c.conf"
        conf.write_text(f"[DEFAULT]\nstate_path = {tmp_path / 'state'}\n")
        assert run("db", "sync", "--config", str(conf))[0] == 0
        assert (tmp_path / "state" / "cloudseed_api.sqlite").exists()
        code, out = run("flavor", "list", "--config", str(conf), "-f", "json")
        assert (code, out) == (0, "[]\n")

    def test_the_later_one_wins(self, tmp_path):
        first, second = tmp_path / "a", tmp_path / "b"
        assert run("--data-dir", str(first), "db", "sync", "--data-dir", str(second))[0] == 0
        assert (second / "cloudseed_api.sqlite").exists()
        assert not first.exists()

    def test_bad_config_after_the_sub_command_is_reported(self, tmp_path):
        conf = tmp_path / "c.conf"
        conf.write_text("[api]\nauth_strategy = nope\n")
        code, out = run("db", "sync", "--config", str(conf))
        assert code == 1
        assert "invalid value 'nope' for [api] auth_strategy" in out


@pytest.mark.parametrize(
    "command",
    [
        ("keypair", "list", "--user", "u1"),
        ("keypair", "delete", "k", "--user", "u1"),
        ("image", "list"),
        ("flavor", "list"),
        ("network", "list"),
        ("configdrive", "build", "0b4e6c9e-0000-4000-8000-000000000000", "--output", "x.iso"),
    ],
    ids=" ".join,
)
def test_a_never_synced_database_says_run_db_sync(tmp_path, command):
    result = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), *command])
    assert result.exit_code == 1, result.output
    assert SYNC_HINT in result.output
    assert result.output.startswith("Error: the api database has no schema yet")
    assert isinstance(result.exception, SystemExit)  # click's exit, not a traceback


def cloudseed(tmp_path: Path, *args: str, pythonpath: str | None = None, timeout: float = 60):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDSEED_")}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run(
        [sys.executable, "-m", "cloudseed", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tmp_path,
    )


class TestServePreflight:
    def test_never_synced_database_stops_serve_before_it_listens(self, tmp_path):
        result = cloudseed(
            tmp_path, "serve", "--data-dir", str(tmp_path / "empty"),
            "--api-listen", "127.0.0.1:0", "--metadata-listen", "127.0.0.1:0",
        )  # fmt: skip
        assert result.returncode == 1, result.stderr
        assert SYNC_HINT in result.stderr
        assert "Traceback" not in result.stderr
        assert "Uvicorn running" not in result.stderr and "listening" not in result.stderr

    def test_keystone_without_keystonemiddleware_is_a_clear_error(self, tmp_path):
        # A real interpreter in which keystonemiddleware cannot be imported, as on a host
        # where cloudseed was installed without the keystone extra.
        blocker = tmp_path / "blocker"
        blocker.mkdir()
        (blocker / "sitecustomize.py").write_text(
            textwrap.dedent(
                """
                import sys

                class Blocker:
                    def find_spec(self, name, path=None, target=None):
                        if name.split(".")[0] == "keystonemiddleware":
                            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                        return None

                sys.meta_path.insert(0, Blocker())
                """
            )
        )
        state = tmp_path / "state"
        assert cloudseed(tmp_path, "db", "sync", "--data-dir", str(state)).returncode == 0
        conf = tmp_path / "c.conf"
        conf.write_text("[api]\nauth_strategy = keystone\n")
        result = cloudseed(
            tmp_path, "serve", "--config", str(conf), "--data-dir", str(state),
            "--api-listen", "127.0.0.1:0", "--metadata-listen", "127.0.0.1:0",
            pythonpath=str(blocker),
        )  # fmt: skip
        assert result.returncode == 1, result.stderr
        assert "auth_strategy = keystone needs keystonemiddleware" in result.stderr
        assert "cloudseed[keystone]" in result.stderr
        assert "Traceback" not in result.stderr
