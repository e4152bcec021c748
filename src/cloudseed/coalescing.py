"""uvicorn's httptools protocol with the listener's limits (head sizes, deadlines, connections
per source address), one ``send()`` per HTTP response instead of two (``transport.py``), and
answers written at once for the apps that have them (``at_once.py``).

Head limits (``head_limits.py``): the request line, each header line and the whole head are
counted on the bytes as they arrive, before the parser sees them, and refused at the first
limit passed. A head that arrives whole in one read shorter than every limit (nearly every
request) is not counted.

Deadlines (issue 30): ``protocol_deadlines.py``.

Replays (``replay.py``): a read that is exactly one whole GET head, arriving at a message
boundary with nothing of the connection's under way, is looked up first by (peer address,
head bytes) in the app's ``replays``; an entry still valid for its caller is written at once
(with a fresh Date) and counted, and neither the parser nor the app sees the request. A read
of that shape answered at once with a replayable answer leaves an entry.

Source addresses (``[metadata] max_connections_per_address``): a ``ConnectionCap`` counts the
connections each address has open on the listener; one over the cap is answered 503 at once,
before anything of it is read, and closed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from uvicorn.protocols.http import httptools_impl

from cloudseed.at_once import SOCKET_EXTENSION, AtOnce, RespondNow
from cloudseed.connection_limits import ConnectionCap, Deadlines
from cloudseed.head_limits import OVER_CAP, HeadLimits, HeadScan
from cloudseed.protocol_deadlines import (
    DEFAULT_DEADLINES,
    DeadlineHttpToolsProtocol,
    no_report,
)
from cloudseed.replay import MakeReplayable, Replays, refilled
from cloudseed.transport import CoalescingTransport
from cloudseed.uvicorn_internals import require_tested_uvicorn

log = logging.getLogger(__name__)

# Checked here, at import: a changed uvicorn stops the start, naming what changed.
require_tested_uvicorn()
STATUS_LINE: dict[int, bytes] = httptools_impl.STATUS_LINE
# What uvicorn's path adds after the app's headers when the request asked to close.
CONNECTION_CLOSE = b"connection: close\r\n"


class CoalescingHttpToolsProtocol(DeadlineHttpToolsProtocol):
    """uvicorn's httptools protocol, writing through a CoalescingTransport, with the head
    limits, deadlines and cap of its class attributes (``with_limits`` makes a subclass per
    listener)."""

    limits = HeadLimits()
    cap: ConnectionCap | None = None
    # uvicorn's default headers (a list renewed every second) and their encoding.
    _defaults: tuple[list[tuple[bytes, bytes]], bytes] | None = None

    # A head's count, once a read brought less than a whole head (None before).
    _scan: HeadScan | None = None
    _counted: str | None = None  # the address whose count in ``cap`` this connection holds

    # A head that arrives whole in one read no longer than this passes every limit uncounted.
    _whole_head_max = limits.smallest
    _respond_now: RespondNow | None = None
    _replays: Replays | None = None  # the app's (replay.py), if it keeps any
    # This read, while it is one whole GET head at a message boundary (a replay's key).
    _whole_get: bytes | None = None
    # An answer at once to it that may be kept: (status line, the rest after the Date, how to
    # make its Replayable).
    _to_keep: tuple[bytes, bytes, MakeReplayable] | None = None

    @classmethod
    def with_limits(
        cls,
        limits: HeadLimits,
        *,
        deadlines: Deadlines = DEFAULT_DEADLINES,
        cap: ConnectionCap | None = None,
        timed_out: Callable[[str], None] = no_report,
    ) -> type[CoalescingHttpToolsProtocol]:
        return type(
            cls.__name__,
            (cls,),
            {
                "limits": limits,
                "_whole_head_max": limits.smallest,
                "deadlines": deadlines,
                "_head_deadline": deadlines.head,
                "cap": cap,
                "timed_out": staticmethod(timed_out),
            },
        )

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # asyncio's socket transport or uvloop's, which is alike but no asyncio.Transport.
        super().connection_made(CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]
        self._respond_now = getattr(self.app, "respond_now", None)  # AnswersAtOnce's
        self._replays = getattr(self.app, "replays", None)
        self._peer = peer = self.client[0] if self.client else None
        now = self.loop.time()
        cap = self.cap
        if cap is not None and peer is not None and not cap.exempts(peer):
            if not cap.admit(peer, now):
                self.transport.write(OVER_CAP)
                self.transport.close()
                return
            self._counted = peer
        self._idle_since = now
        self._arm(now + self.deadlines.first_request)

    # -- parser callbacks: uvicorn's, with its scope built only for the ASGI path ----------

    def on_message_begin(self) -> None:
        self.url = b""
        self.expect_100_continue = False
        self.headers = []
        self._answered = False
        self._receiving, self._idle_since, self._served = True, None, True

    def on_headers_complete(self) -> None:
        self._in_head = False  # a pipelined request's head, unscanned, ends here too
        respond_now = self._respond_now
        if respond_now is not None and self._answer_now(respond_now):
            return
        # uvicorn's on_message_begin makes the scope; the URL and headers are kept.
        url, headers, expect_100_continue = self.url, self.headers, self.expect_100_continue
        super().on_message_begin()
        self.url, self.headers, self.expect_100_continue = url, headers, expect_100_continue
        self.scope["headers"] = headers
        if self.parser.get_method() == b"PUT":
            # The metadata service gives a session token's answer the server's own hop limit
            # (2.109) on the connection itself: the one request that needs the socket.
            self.scope["extensions"] = {SOCKET_EXTENSION: self.transport.get_extra_info("socket")}
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self._answered:  # a body sent with a GET answered at once is read and dropped
            super().on_body(body)

    def on_message_complete(self) -> None:
        if not self._answered:
            super().on_message_complete()
        self._answered = False
        self._in_head, self._scan = True, None
        self._receiving, self._request_since = False, None

    def _answer_now(self, respond_now: RespondNow) -> bool:
        """Ask the app for the whole answer and write it, for a request uvicorn's path would
        only hand to the app: a GET or HEAD over HTTP/1.1 with nothing before it on its
        connection still unanswered, for a plain path (no query, escapes or absolute form),
        not waiting to be told to send a body, while the client takes its answers (a client
        pipelining requests without reading them made 8 MB of requests 100 MB of answers
        held in memory; uvicorn's path waits for them to drain, and stops reading). Anything
        else, and whatever the app has no answer for, takes uvicorn's ASGI path.

        A request that asks to close its connection (``Connection: close``) is answered at
        once too, as uvicorn's path answers it (a ``connection: close`` line after the app's
        headers), and the connection is closed after the answer: cloud-init opens a
        connection for every request it makes (its readurl makes a requests.Session each
        time and closes it), and a Neutron proxy in front passes each on as it came."""
        parser = self.parser
        cycle = self.cycle
        if (
            (cycle is not None and not cycle.response_complete)
            or self.pipeline
            or self.flow.write_paused  # unread answers piling up: uvicorn's path waits
            or self.transport.is_closing()  # a request sent after one that asked to close
            or self.expect_100_continue
            or parser.should_upgrade()
            or parser.get_http_version() != "1.1"
        ):
            return False
        method = parser.get_method()
        if method != b"GET" and method != b"HEAD":
            return False
        url = self.url
        if url[:1] != b"/" or b"?" in url or b"%" in url or b"#" in url or not url.isascii():
            return False
        try:
            found = respond_now(
                method.decode("ascii"), url.decode("ascii"), self._peer, self.headers
            )
        except Exception:
            log.exception("respond_now failed; answering the ASGI way")
            return False
        if found is None:
            return False
        self._answered = True
        self._write_at_once(found, closing=not parser.should_keep_alive())
        return True

    def _write_at_once(self, found: AtOnce, *, closing: bool) -> None:
        """What ``RequestResponseCycle.send`` would write for it, then the request completed
        as uvicorn completes one (keep-alive timer, pipelined requests next; ``closing``:
        the connection closed after the answer)."""
        status, header_lines, body, sent, replayable = found
        status_line = STATUS_LINE[status]
        if closing:
            rest = b"".join((header_lines, CONNECTION_CLOSE, b"\r\n", body))
        else:
            rest = b"".join((header_lines, b"\r\n", body))
        self.transport.write_whole(  # type: ignore[attr-defined]
            b"".join((status_line, self._default_lines(), rest))
        )
        if sent is not None:
            sent()
        elif replayable is not None and self._whole_get is not None:
            self._to_keep = (status_line, rest, replayable)  # not kept once closing
        if closing:
            self.transport.close()  # what is written is sent first
        self.on_response_complete()

    def _default_lines(self) -> bytes:
        """uvicorn's default header lines (the date, renewed every second), encoded once."""
        defaults = self.server_state.default_headers
        cached = self._defaults
        if cached is None or cached[0] is not defaults:
            cached = (defaults, b"".join(b"%s: %s\r\n" % pair for pair in defaults))
            type(self)._defaults = cached
        return cached[1]

    def _replayed(self, replays: Replays, data: bytes) -> bool:
        """Write the kept answer to ``data`` (one whole GET head) if there is one for this
        caller, still valid, and nothing of the connection is under way; else False."""
        key = (self._peer, data)
        entry = replays.get(key)
        if entry is None:
            return False
        cycle = self.cycle
        if (
            (cycle is not None and not cycle.response_complete)
            or self.pipeline
            or self.flow.write_paused
            or self.transport.is_closing()
        ):
            return False
        replayable = entry.replayable
        try:
            valid = replayable.still_valid()
        except Exception:
            valid = False
        if not valid:
            replays.forget(key)
            return False
        self._served = True
        rest = entry.rest if replayable.hole is None else refilled(entry.rest, replayable.hole)
        self.transport.write_whole(  # type: ignore[attr-defined]
            b"".join((entry.status_line, self._default_lines(), rest))
        )
        replayable.counted()
        self.on_response_complete()
        return True

    def _unset_keepalive_if_required(self) -> None:
        pass  # uvicorn's cancels its timer on every read; the one timer here stays

    def _unsupported_upgrade_warning(self) -> None:
        pass  # uvicorn logs two warnings for every Upgrade header: one line a request

    def connection_lost(self, exc: Exception | None) -> None:
        try:
            super().connection_lost(exc)
        finally:
            timer = self._timer
            if timer is not None:
                timer.cancel()
                self._timer = None
            counted = self._counted
            if counted is not None:
                self._counted = None
                assert self.cap is not None
                self.cap.release(counted)

    def on_response_complete(self) -> None:
        # uvicorn's, with the one timer of the module's docstring.
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self.flow.resume_reading()
        if self.pipeline:
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
            return
        self._idle_since = now = self.loop.time()
        deadline = now + self.timeout_keep_alive
        if self._timer is None or self._timer_at > deadline:  # once a connection, at most
            self._arm(deadline)

    def data_received(self, data: bytes) -> None:
        replays = self._replays
        if (
            replays is not None
            and self._in_head
            and self._scan is None
            and not self._receiving  # at a message boundary: the parser holds nothing
            and data[:4] == b"GET "
            and len(data) <= self._whole_head_max
            and data.find(b"\r\n\r\n") == len(data) - 4  # one head, nothing after it
        ):
            if self._replayed(replays, data):
                return
            self._whole_get = data
            try:
                self._received(data)
            finally:
                self._whole_get = None
                kept, self._to_keep = self._to_keep, None
            # Kept once the request is complete in this read (a body would make it not).
            if kept is not None and not self._receiving and not self.transport.is_closing():
                replays.keep((self._peer, data), *kept)
            return
        self._received(data)

    def _received(self, data: bytes) -> None:
        if self._in_head:
            scan = self._scan
            if scan is None and len(data) <= self._whole_head_max and b"\r\n\r\n" in data:
                # The usual request: its whole head in one read, shorter than any limit.
                self._in_head = False
            else:
                if scan is None:
                    scan = self._scan = HeadScan(self.limits)
                status = scan.feed(data)
                if status is not None:
                    self._refuse(status)
                    return
                if scan.complete:
                    self._in_head = False
        super().data_received(data)
        if self._receiving and self._request_since is None:
            self._request_started()
