"""web/gzip_stream.py: which gzip user data is a whole stream, with bounded work."""

from __future__ import annotations

import gzip
import os

import pytest

from cloudseed.web.gzip_stream import gzip_problem, is_gzip

PACKED = gzip.compress(b"#cloud-config\nruncmd: [true]\n" * 50, mtime=0)


def test_a_whole_stream_and_what_gzip_itself_accepts_pass() -> None:
    assert is_gzip(PACKED)
    assert gzip_problem(PACKED) is None
    assert gzip_problem(PACKED + PACKED) is None  # two members, as `cat a.gz b.gz`
    assert gzip_problem(PACKED + b"\x00" * 8) is None  # zero padding at the end
    gzip.decompress(PACKED + PACKED)  # the same cases Python's own reader takes


@pytest.mark.parametrize(
    ("broken", "reason"),
    [
        (PACKED[:-4], "truncated"),
        (PACKED[:12], "truncated"),
        (b"\x1f\x8b", "truncated"),
        (PACKED + b"trailing", "data after the end"),
        (b"\x1f\x8b\x07" + PACKED[3:], "corrupt"),  # compression method 7
    ],
)
def test_broken_streams_say_why(broken: bytes, reason: str) -> None:
    problem = gzip_problem(broken)
    assert problem is not None and reason in problem
    with pytest.raises((EOFError, OSError, gzip.BadGzipFile)):
        gzip.decompress(broken)  # the guest's reader fails on them too


def test_a_flipped_byte_fails_the_crc_or_the_inflate() -> None:
    corrupt = bytearray(PACKED)
    corrupt[len(PACKED) // 2] ^= 0xFF
    problem = gzip_problem(bytes(corrupt))
    assert problem is not None and "corrupt" in problem


def test_work_stops_at_the_cap_and_the_stream_is_taken() -> None:
    # 4 MiB of zeros inflate from a few KiB; with a 1 MiB cap the rest is not looked at, so
    # even a cut-off tail passes (documented: the cap bounds a request's work).
    bomb = gzip.compress(bytes(4 * 1024 * 1024), mtime=0)
    assert gzip_problem(bomb[:-4], max_inflated=1024 * 1024) is None
    assert gzip_problem(bomb[:-4]) is not None  # under the default cap it is checked whole


def test_plain_data_is_not_gzip() -> None:
    assert not is_gzip(b"#!/bin/sh\n")
    assert not is_gzip(os.urandom(1)[:0])
