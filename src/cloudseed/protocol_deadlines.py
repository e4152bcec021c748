"""The deadlines of the listener's HTTP protocol (``coalescing.py``), in a base class of it.

Deadlines (issue 30; ``connection_limits.py``): uvicorn arms a timer only after a response,
so a connection that never sent a whole request was kept for ever (one guest held 6,000). Here
one timer per connection stays armed for the nearest deadline of the connection's state, and
looks, when it fires, at where the connection stands (re-arming for the rest if it is early):
idle since it opened (``first_request``: closed without an answer), receiving a request
(``header`` until its head ends, ``request`` until its last byte: then 408 if nothing of it
was answered, and closed), answering (no deadline: the response arms it again), or idle since
its last response (uvicorn's keep-alive timeout). The clock of a request starts when a read
leaves it incomplete, so a request whose head and body arrive in one read (nearly all) costs
no clock reading and no timer: the same timer, armed once per connection, serves them all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from uvicorn.protocols.http import httptools_impl

from cloudseed.connection_limits import Deadlines
from cloudseed.head_limits import refusal

DEFAULT_DEADLINES = Deadlines()


def no_report(deadline: str) -> None:
    pass


class DeadlineHttpToolsProtocol(httptools_impl.HttpToolsProtocol):
    """uvicorn's httptools protocol with one timer for the deadlines of its class
    attributes; the subclass keeps ``_in_head``, ``_receiving``, ``_request_since``,
    ``_idle_since``, ``_served`` and ``_answered`` as its requests come and go."""

    deadlines = DEFAULT_DEADLINES
    # Told the deadline ("first_request", "header", "request") each time one passes.
    timed_out: Callable[[str], None] = staticmethod(no_report)
    _in_head = True  # inside a head
    _answered = False  # the request under way was answered without uvicorn's cycle

    # The deadlines' state (the module's docstring): the one timer and when it fires; a
    # request begun and not yet whole, and since when (None until a read leaves it
    # incomplete); idle since when (None while a request is under way); a request begun yet.
    _timer: asyncio.TimerHandle | None = None
    _timer_at = 0.0
    _receiving = False
    _request_since: float | None = None
    _idle_since: float | None = None
    _served = False
    _head_deadline = deadlines.head

    def _arm(self, at: float) -> None:
        """Have the timer fire at loop time ``at`` (instead of later, if it was armed)."""
        timer = self._timer
        if timer is not None:
            timer.cancel()
        self._timer_at = at
        self._timer = self.loop.call_at(at, self._on_timer)

    def _request_started(self) -> None:
        """A read left a request incomplete: its clock starts, and the timer fires by its
        deadline."""
        self._request_since = now = self.loop.time()
        limit = self._head_deadline if self._in_head else self.deadlines.request
        if limit is not None and (self._timer is None or self._timer_at > now + limit):
            self._arm(now + limit)

    def _on_timer(self) -> None:
        self._timer = None
        if self.transport.is_closing():
            return
        now = self.loop.time()
        if self._receiving:
            since = self._request_since
            in_head = self._in_head
            limit = self._head_deadline if in_head else self.deadlines.request
            if since is None or limit is None:
                return  # no deadline for this body: its response arms the timer again
            if since + limit > now:
                self._arm(since + limit)
            else:
                self._request_timed_out(in_head)
            return
        idle_since = self._idle_since
        if idle_since is None:
            return  # answering: the response arms the timer again
        served = self._served
        deadline = idle_since + (
            self.timeout_keep_alive if served else self.deadlines.first_request
        )
        if deadline > now:
            self._arm(deadline)
            return
        if not served:
            self.timed_out("first_request")
        self.timeout_keep_alive_handler()  # closes

    def _request_timed_out(self, in_head: bool) -> None:
        """408 if nothing of the request was answered (a response before it may still be
        under way: then only the close), and close."""
        self.timed_out("header" if in_head else "request")
        cycle = self.cycle
        if self.pipeline:
            untouched = False
        elif in_head:  # the cycle, if any, is the previous request's
            untouched = cycle is None or cycle.response_complete
        else:
            untouched = not self._answered and cycle is not None and not cycle.response_started
        if cycle is not None and not cycle.response_complete:
            # The app reading the body hears the client has gone, and what it sends is
            # dropped: nothing it does with part of a body is answered or kept.
            cycle.disconnected = True
            cycle.message_event.set()
        if untouched:
            self._refuse(408)
        else:
            self.transport.close()

    def _refuse(self, status: int) -> None:
        self._in_head = False
        self.transport.write(refusal(status))
        self.transport.close()
