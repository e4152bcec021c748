"""head_limits.py: a head counted read by read, whatever the reads' boundaries."""

from __future__ import annotations

import pytest

from cloudseed.head_limits import OVER_CAP, HeadLimits, HeadScan, refusal

SMALL = HeadLimits(max_request_line=32, max_header_line=40, max_header_size=100)


def fed(data: bytes, piece: int) -> tuple[HeadScan, int | None]:
    scan = HeadScan(SMALL)
    for start in range(0, len(data), piece):
        status = scan.feed(data[start : start + piece])
        if status is not None or scan.complete:
            return scan, status
    return scan, None


@pytest.mark.parametrize("piece", [1, 3, 7, 1000])
def test_a_head_within_the_limits_completes_at_its_empty_line(piece: int) -> None:
    scan, status = fed(b"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\nbody" + b"x" * 500, piece)
    assert status is None and scan.complete


@pytest.mark.parametrize("piece", [1, 5, 1000])
@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"GET /" + b"a" * 40 + b" HTTP/1.1\r\n\r\n", 414),
        (b"GET / HTTP/1.1\r\nX: " + b"b" * 40 + b"\r\n\r\n", 431),
        (b"GET / HTTP/1.1\r\n" + b"X: 12345678901234567890\r\n" * 4 + b"\r\n", 431),
    ],
)
def test_the_first_limit_passed_names_the_refusal(head: bytes, expected: int, piece: int) -> None:
    scan, status = fed(head, piece)
    assert status == expected and not scan.complete


def test_an_unfinished_head_is_neither_complete_nor_refused() -> None:
    scan, status = fed(b"GET / HTTP/1.1\r\nHost: a\r\n", 4)
    assert status is None and not scan.complete


def test_refusals_are_whole_answers_that_close() -> None:
    for status in (408, 414, 431):
        answer = refusal(status)
        head, body = answer.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 %d " % status)
        assert b"connection: close" in head and b"content-length: %d" % len(body) in head
    assert OVER_CAP.startswith(b"HTTP/1.1 503 ") and b"retry-after: 1" in OVER_CAP
