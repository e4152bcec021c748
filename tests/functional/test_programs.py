"""``cloudseed.programs``: the one subprocess runner and the qemu-img wrapper, with real
programs (sh, env, sleep, qemu-img)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cloudseed.errors import ServiceUnavailable
from cloudseed.programs import qemu_img
from cloudseed.programs import run as program
from cloudseed.programs.errors import ImageUnreadable, ProgramFailed

needs_qemu_img = pytest.mark.skipif(
    shutil.which("qemu-img", path=program.PATH) is None, reason="needs qemu-img (qemu-utils)"
)


def test_environment_is_pinned_not_inherited(monkeypatch):
    monkeypatch.setenv("LC_ALL", "de_DE.UTF-8")
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("CLOUDSEED_SECRET_THING", "x")
    out = program.run(["env"]).stdout.decode()
    assert sorted(out.splitlines()) == sorted(
        ["LC_ALL=C", f"PATH={program.PATH}"]
    )  # nothing else from our environment reaches the program


def test_sbin_programs_are_found():
    # debugfs and sfdisk live in /sbin or /usr/sbin, outside an ordinary user's PATH.
    assert "/usr/sbin" in program.PATH.split(":") and "/sbin" in program.PATH.split(":")
    assert program.which("sh") is not None
    assert program.which("no-such-program-here") is None


def test_failure_carries_program_and_stderr_tail():
    with pytest.raises(ProgramFailed) as caught:
        program.run(["sh", "-c", "echo first >&2; echo 'the reason' >&2; exit 3"])
    exc = caught.value
    assert isinstance(exc, ServiceUnavailable)
    assert (exc.program, exc.returncode) == ("sh", 3)
    assert exc.message == "sh failed: exit status 3: first\nthe reason"
    assert exc.stderr.endswith("the reason")


def test_stderr_tail_is_bounded():
    with pytest.raises(ProgramFailed) as caught:
        program.run(["sh", "-c", "head -c 5000 /dev/zero | tr '\\0' a >&2; echo END >&2; exit 1"])
    assert len(caught.value.stderr) == program.STDERR_TAIL
    assert caught.value.stderr.endswith("END")


def test_without_check_the_result_is_returned():
    result = program.run(["sh", "-c", "echo out; exit 4"], check=False)
    assert (result.returncode, result.stdout) == (4, b"out\n")


def test_input_goes_to_stdin_and_stdin_is_otherwise_empty():
    assert program.run(["cat"], input=b"secret\n").stdout == b"secret\n"
    assert program.run(["cat"]).stdout == b""


def test_timeout_and_missing_program():
    with pytest.raises(ProgramFailed, match=r"sleep failed: no answer within 0.2 s"):
        program.run(["sleep", "5"], timeout=0.2)
    with pytest.raises(ProgramFailed, match="no-such-program-here failed: not installed"):
        program.run(["no-such-program-here"])


def test_argv_is_never_a_shell_string(tmp_path: Path):
    marker = tmp_path / "marker"
    result = program.run(["echo", f"; touch {marker}"])
    assert result.stdout.decode().strip() == f"; touch {marker}" and not marker.exists()


@needs_qemu_img
class TestQemuImg:
    def test_info_convert_and_overlay(self, tmp_path: Path):
        raw = tmp_path / "base.raw"
        raw.write_bytes(b"\x01" * 4096 + b"\0" * (1 << 20))
        info = qemu_img.info(raw, "raw")
        assert (info.format, info.virtual_size, info.backing_file) == (
            "raw",
            4096 + (1 << 20),
            None,
        )

        overlay = tmp_path / "disk.qcow2"
        qemu_img.create_overlay(overlay, backing=raw, backing_format="raw")
        info = qemu_img.info(overlay, "qcow2")
        assert info.format == "qcow2" and info.backing_file == str(raw.resolve())

        copy = tmp_path / "disk.raw"
        qemu_img.convert_to_raw(overlay, source_format="qcow2", disk=copy)
        assert copy.read_bytes() == raw.read_bytes()
        assert copy.stat().st_blocks * 512 < copy.stat().st_size  # sparse

    def test_info_never_probes_the_format(self, tmp_path: Path):
        base = tmp_path / "base.raw"
        base.write_bytes(b"\0" * 4096)
        overlay = tmp_path / "disk.qcow2"
        qemu_img.create_overlay(overlay, backing=base, backing_format="raw")
        # A qcow2 file declared raw is read as raw bytes, not as qcow2.
        assert qemu_img.info(overlay, "raw").format == "raw"
        with pytest.raises(ImageUnreadable) as caught:
            qemu_img.info(tmp_path / "missing.qcow2", "qcow2")
        assert caught.value.program == "qemu-img" and "missing.qcow2" in caught.value.stderr

    def test_create_failure_is_a_program_failure(self, tmp_path: Path):
        with pytest.raises(ProgramFailed, match="qemu-img failed: exit status 1: ") as caught:
            qemu_img.create_overlay(
                tmp_path / "no" / "dir" / "d.qcow2", backing=tmp_path, backing_format="raw"
            )
        assert caught.value.returncode == 1

    @pytest.mark.parametrize("fmt", ["raw", "qcow2"])
    def test_grow_grows_and_never_shrinks(self, tmp_path: Path, fmt: str):
        base = tmp_path / "base.raw"
        base.write_bytes(b"\x02" * 4096 + b"\0" * (1 << 20))
        disk = tmp_path / f"disk.{fmt}"
        if fmt == "qcow2":
            qemu_img.create_overlay(disk, backing=base, backing_format="raw")
        else:
            qemu_img.convert_to_raw(base, source_format="raw", disk=disk)
        qemu_img.grow(disk, fmt=fmt, size=8 << 20)
        assert qemu_img.info(disk, fmt).virtual_size == 8 << 20
        with pytest.raises(ProgramFailed, match="qemu-img failed"):
            qemu_img.grow(disk, fmt=fmt, size=1 << 20)  # no --shrink: refused
        assert qemu_img.info(disk, fmt).virtual_size == 8 << 20
        with pytest.raises(ValueError, match="invalid disk size"):
            qemu_img.grow(disk, fmt=fmt, size=0)
