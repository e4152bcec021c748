"""tests/support/tool_venv.py: ``answers`` (a tool's start-up check runs once per venv, not
once per test worker and run, and is asked again when the venv's interpreter is gone) and
``clean_env`` (what a tool's process is started with)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support import tool_venv


def fake_venv(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A venv directory whose tool counts its runs in a file; the venv, the tool, the count."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    count = tmp_path / "runs"
    tool = venv / "bin" / "tool"
    tool.write_text(
        f"#!{sys.executable}\nimport sys\n"
        f"with open({str(count)!r}, 'a') as runs:\n    runs.write('x')\n"
        "print('tool 1.0')\nsys.exit(0 if sys.argv[1:] == ['--version'] else 2)\n"
    )
    tool.chmod(0o755)
    return venv, tool, count


def runs(count: Path) -> int:
    return len(count.read_text()) if count.exists() else 0


def test_a_tool_that_answered_once_is_not_started_again(tmp_path):
    venv, tool, count = fake_venv(tmp_path)
    assert tool_venv.answers(venv, tool, "--version", naming="tool")
    assert tool_venv.answers(venv, tool, "--version", naming="tool")
    assert runs(count) == 1


def test_a_failed_or_wrong_answer_is_not_remembered(tmp_path):
    venv, tool, count = fake_venv(tmp_path)
    assert not tool_venv.answers(venv, tool, "--help")
    assert not tool_venv.answers(venv, tool, "--help")
    assert not tool_venv.answers(venv, tool, "--version", naming="another tool")
    assert not tool_venv.answers(venv, tool, "--help", prints=True)
    assert runs(count) == 4
    # Each command has its own stamp: a failure above left none for --version.
    assert tool_venv.answers(venv, tool, "--version", prints=True)
    assert runs(count) == 5


def test_a_command_that_prints_nothing_fails_when_output_is_wanted(tmp_path):
    venv, _, _ = fake_venv(tmp_path)
    silent: list[str | Path] = [venv / "bin" / "python", "-c", "pass"]
    assert not tool_venv.answers(venv, *silent, prints=True)
    assert tool_venv.answers(venv, *silent)


def test_a_venv_whose_interpreter_is_gone_is_asked_again(tmp_path):
    venv, tool, count = fake_venv(tmp_path)
    assert tool_venv.answers(venv, tool, "--version")
    (venv / "bin" / "python").unlink()
    (venv / "bin" / "python").symlink_to(tmp_path / "no-such-python")
    assert tool_venv.answers(venv, tool, "--version")
    assert runs(count) == 2


def test_a_missing_tool_does_not_answer(tmp_path):
    venv, _, _ = fake_venv(tmp_path)
    assert not tool_venv.answers(venv, venv / "bin" / "missing", "--version")


def test_a_tool_writes_its_bytecode_and_sees_none_of_our_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("OS_CLOUD", "theirs")
    monkeypatch.setenv("VIRTUAL_ENV", str(tmp_path))
    venv = tmp_path / "tool"
    venv.mkdir()
    (venv / "mod.py").write_text("VALUE = 1\n")
    # An interpreter started as the tools are: it writes the bytecode of what it imports.
    subprocess.run(
        [sys.executable, "-c", "import mod"],
        cwd=venv,
        env=tool_venv.clean_env({"PYTHONPATH": str(venv)}),
        check=True,
    )
    assert list((venv / "__pycache__").glob("mod.*.pyc"))
    env = tool_venv.clean_env()
    assert "OS_CLOUD" not in env and "VIRTUAL_ENV" not in env
    assert env["PYTHONWARNINGS"] == "ignore"
