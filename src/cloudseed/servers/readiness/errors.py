"""Boot report errors, in the root families (``web/faults.py`` gives both apps their statuses).

InvalidInput ── InvalidBootEvent   a webhook body cloudseed cannot take: not JSON, not an
                                   object, a field missing, of the wrong type or too long,
                                   NUL or a lone surrogate in a string (400)
Conflict ────── BootNotBegun       the server's build or rebuild has not finished: the event
                                   would belong to no boot, or to the old disk's (409)

A refused event changes nothing.
"""

from __future__ import annotations

from cloudseed.errors import Conflict, InvalidInput


class InvalidBootEvent(InvalidInput):
    """A boot report event that cannot be taken; the message says which field and why."""


class BootNotBegun(Conflict):
    def __init__(self, uuid: str, why: str) -> None:
        super().__init__(f"Server {uuid} {why}: its boot is reported once it has.")
        self.uuid = uuid
