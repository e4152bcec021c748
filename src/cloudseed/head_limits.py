"""The listener's bounds on a request's head, counted on the bytes as they arrive, and the
answers that refuse a connection before the app sees anything of it (IO-free: the protocol in
``coalescing.py`` feeds the bytes and writes what this module says).

httptools buffers a header until its line ends and uvicorn sets no bound, so one 100 MB
header line was held in memory whole (four at once took a worker from 84 to 316 MB).
``HeadScan`` bounds the request line (414), each header line and the whole head (431); the
protocol answers and closes at the first limit passed, so at most one limit's worth of a head
is ever held.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HeadLimits:
    """Sizes in bytes, line endings included (``[wsgi]`` in settings.py)."""

    max_request_line: int = 8192
    max_header_line: int = 16384
    max_header_size: int = 65536

    @property
    def smallest(self) -> int:
        return min(self.max_request_line, self.max_header_line, self.max_header_size)


class HeadScan:
    """One request's head counted read by read: ``feed`` says which status refuses it once a
    limit is passed; ``complete`` turns true at the head's first empty line (what follows is
    the body, not counted)."""

    __slots__ = ("complete", "limits", "line", "line_no", "size")

    def __init__(self, limits: HeadLimits) -> None:
        self.limits = limits
        self.complete = False
        self.line = 0  # the current line's length so far
        self.line_no = 0  # 0: the request line
        self.size = 0  # the head's size so far

    def feed(self, data: bytes) -> int | None:
        limits = self.limits
        start = 0
        while True:
            end = data.find(b"\n", start)
            taken = (len(data) if end < 0 else end + 1) - start
            self.line += taken
            self.size += taken
            if self.line_no == 0 and self.line > limits.max_request_line:
                return 414
            if self.line_no > 0 and self.line > limits.max_header_line:
                return 431
            if self.size > limits.max_header_size:
                return 431
            if end < 0:
                return None
            if self.line <= 2 and self.line_no > 0:  # "\r\n" or "\n": the head is complete
                self.complete = True
                return None
            if self.line > 2 or self.line_no > 0:
                self.line_no += 1  # empty lines before the request line are skipped
            self.line = 0
            start = end + 1


_REASONS = {
    408: b"Request Timeout",
    414: b"URI Too Long",
    431: b"Request Header Fields Too Large",
}


def refusal(status: int) -> bytes:
    """The whole answer that refuses a request for its head or its deadline; the connection
    is closed after it."""
    reason = _REASONS[status]
    body = reason + b"\n"
    return (
        b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\n"
        b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (status, reason, len(body), body)
    )


# One address's connections over [metadata] max_connections_per_address: written before
# anything of the request is read. Retry-After: when one of its others is done.
_OVER_CAP_BODY = b"Too many connections from this address.\n"
OVER_CAP = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"retry-after: 1\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
    % (len(_OVER_CAP_BODY), _OVER_CAP_BODY)
)
