"""The console log's bound (compute/console_log.py): rotation once past max_size, as virtlogd,
with QEMU's O_APPEND writer still writing, and the tail read across both files."""

from __future__ import annotations

import os
from pathlib import Path

from cloudseed.compute.console_log import ConsoleLogRotator, backup_of, read_tail, rotate


def appender(path: Path) -> int:
    # What QEMU's -chardev file,append=on holds.
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)


def test_rotation_keeps_the_last_max_size_bytes_and_the_writer_goes_on(tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    fd = appender(log)
    try:
        os.write(fd, b"a" * 600 + b"b" * 400)
        assert not rotate(log, 1000)  # not larger than the bound yet
        os.write(fd, b"c" * 100)
        assert rotate(log, 1000)
        assert backup_of(log).read_bytes() == b"a" * 500 + b"b" * 400 + b"c" * 100
        assert log.stat().st_size == 0
        os.write(fd, b"new\n")  # O_APPEND: lands at the start of the truncated file
        assert log.read_bytes() == b"new\n"
        assert read_tail(log, 10) == b"cccccc" + b"new\n"
        assert read_tail(log, 3) == b"ew\n"
        os.write(fd, b"d" * 1500)
        assert rotate(log, 1000)  # the previous backup is replaced: one backup only
        assert backup_of(log).read_bytes() == b"d" * 1000
        assert not (tmp_path / "console.log.0.tmp").exists()
    finally:
        os.close(fd)


def test_no_log_no_rotation_no_text(tmp_path: Path) -> None:
    assert not rotate(tmp_path / "console.log", 10)
    assert read_tail(tmp_path / "console.log", 10) == b""


def test_zero_means_never_rotated(tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    log.write_bytes(b"x" * 100)
    assert not rotate(log, 0)
    rotator = ConsoleLogRotator(tmp_path, max_size=0)
    rotator.start()  # nothing to run
    assert not rotator._loop.running


def test_the_rotator_bounds_every_instance(tmp_path: Path) -> None:
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "console.log").write_bytes(b"x" * 5000)
    (tmp_path / "three").mkdir()  # no log yet
    rotator = ConsoleLogRotator(tmp_path, max_size=4096)
    assert rotator.run_once() == 2
    assert rotator.run_once() == 0
    assert (tmp_path / "one" / "console.log.0").stat().st_size == 4096
