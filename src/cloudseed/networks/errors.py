"""Network registry errors.

NotFound ── NetworkNotFound   no network with this id or name   (404)
Conflict ── AddressTaken      a concurrent transaction reserved the same address (409; a
                              create runs its reservation again before giving up with it)
"""

from __future__ import annotations

from cloudseed.errors import Conflict, NotFound


class NetworkNotFound(NotFound):
    def __init__(self, ref: str) -> None:
        super().__init__(f"Network {ref} could not be found.")


class AddressTaken(Conflict):
    def __init__(self) -> None:
        super().__init__("A fixed IP address for the new ports was taken by a concurrent request.")
