"""StaticFile: checked at start, re-read when it changes, never broken by a bad edit."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from cloudseed.errors import ConfigError
from cloudseed.vendordata import VendordataFileError
from cloudseed.vendordata.static import StaticFile


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def write(path: Path, text: str, *, bump: int = 0) -> None:
    path.write_text(text)
    if bump:  # a distinct mtime even on filesystems with coarse timestamps
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + bump * 1_000_000_000))


def test_no_path_is_an_empty_object() -> None:
    assert StaticFile("").content() == b"{}"


def test_content_is_compact_json(tmp_path: Path) -> None:
    path = tmp_path / "vd.json"
    write(path, '{\n  "cloud-init": "#cloud-config\\n",  "n": [1, 2]\n}\n')
    assert StaticFile(str(path)).content() == b'{"cloud-init":"#cloud-config\\n","n":[1,2]}'


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (None, "No such file or directory"),
        ("{", "not valid JSON: Expecting property name"),
        ('{"a": NaN}', "not valid JSON: NaN is not valid JSON"),
        ("", "not valid JSON: Expecting value"),
    ],
)
def test_bad_file_stops_start_up(tmp_path: Path, text: str | None, reason: str) -> None:
    path = tmp_path / "vd.json"
    if text is not None:
        write(path, text)
    with pytest.raises(VendordataFileError) as raised:
        StaticFile(str(path))
    assert isinstance(raised.value, ConfigError)
    assert raised.value.message.startswith(f"[api] vendordata_jsonfile_path {path}: {reason}")


def test_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(VendordataFileError, match="Is a directory"):
        StaticFile(str(tmp_path))


def test_edits_are_picked_up_at_most_once_per_interval(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "cloudseed.vendordata")
    path = tmp_path / "vd.json"
    write(path, '{"v": 1}')
    clock = Clock()
    static = StaticFile(str(path), clock=clock)
    write(path, '{"v": 2}', bump=1)
    clock.now += 0.9
    assert static.content() == b'{"v":1}'  # not checked yet
    clock.now += 0.1
    assert static.content() == b'{"v":2}'
    assert "reloaded" in caplog.text


def test_a_bad_edit_keeps_the_last_good_content(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "vd.json"
    write(path, '{"v": 1}')
    clock = Clock()
    static = StaticFile(str(path), clock=clock)

    write(path, '{"v": ', bump=1)
    for _ in range(3):
        clock.now += 1
        assert static.content() == b'{"v":1}'
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1  # once per broken version, not once per check
    assert "not valid JSON" in errors[0].getMessage()

    path.unlink()
    clock.now += 1
    assert static.content() == b'{"v":1}'
    clock.now += 1
    static.content()
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2 and "No such file" in errors[1].getMessage()

    write(path, '{"v": 3}', bump=2)
    clock.now += 1
    assert static.content() == b'{"v":3}'


def test_a_file_replaced_by_rename_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "vd.json"
    write(path, '{"v": 1}')
    clock = Clock()
    static = StaticFile(str(path), clock=clock)
    mtime = path.stat().st_mtime_ns
    replacement = tmp_path / "vd.json.new"
    write(replacement, '{"v": 2}')
    os.utime(replacement, ns=(mtime, mtime))  # same mtime, same size: a new inode
    os.replace(replacement, path)
    clock.now += 1
    assert static.content() == b'{"v":2}'
