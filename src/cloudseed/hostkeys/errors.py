"""Host key errors, in the root families; both apps take their statuses from the one table
(``web/faults.py``), and the CLI prints the same messages.

InvalidInput ─── InvalidReport        a phone_home body cloudseed cannot take: not a form,
                                      a field too long or twice, a key that is no key (400)
Forbidden ────── ReportForAnother     the form's instance_id is not the caller's (403)
NotFound ─────── NoHostKeys           `cloudseed known-hosts`: nothing recorded yet (404)
Conflict ─────┬─ NotLaunched          the server's build or rebuild has not finished (409)
              └─ TooManyReports       a guest reporting again and again in one boot (409)

A refused report stores nothing.
"""

from __future__ import annotations

from cloudseed.errors import Conflict, Forbidden, InvalidInput, NotFound


class InvalidReport(InvalidInput):
    """A phone_home report that cannot be taken; the message says which field and why."""


class ReportForAnother(Forbidden):
    def __init__(self, *, caller: str, claimed: str) -> None:
        super().__init__(
            "instance_id in the report is not the instance making the request: "
            "a guest reports its own host keys only."
        )
        self.caller = caller
        self.claimed = claimed


class NotLaunched(Conflict):
    """Host keys belong to a boot generation, which starts when a build or rebuild has
    finished; before that a report has nothing to belong to (cloud-init retries)."""

    def __init__(self, uuid: str, why: str) -> None:
        super().__init__(f"Server {uuid} {why}: its host keys are taken once it has.")
        self.uuid = uuid


class TooManyReports(Conflict):
    def __init__(self, uuid: str, limit: int) -> None:
        super().__init__(
            f"Server {uuid} reported its host keys {limit} times in this boot; "
            "further reports are not kept."
        )
        self.uuid = uuid


class NoHostKeys(NotFound):
    def __init__(self, uuid: str) -> None:
        super().__init__(
            f"No host keys are recorded for server {uuid} yet: its guest has not phoned home "
            "(cloud-init's phone_home module) and its console shows none."
        )
        self.uuid = uuid
