"""Quota errors, with Nova's messages.

QuotaExceeded ─ TooManyInstances   instances, cores or ram over the limit      (403)
InvalidInput ── InvalidQuotaLimit  a PUT limit below -1 or usage, or above the  (400)
                                   room or the column's range
"""

from __future__ import annotations

from cloudseed.errors import InvalidInput, QuotaExceeded


class TooManyInstances(QuotaExceeded):
    """Nova's ``TooManyInstances``: each list is joined with ", " as Nova does."""

    def __init__(
        self, *, overs: list[str], requested: list[str], used: list[str], allowed: list[str]
    ) -> None:
        over = ", ".join(overs)
        super().__init__(
            f"Quota exceeded for {over}: Requested {', '.join(requested)}, but already used "
            f"{', '.join(used)} of {', '.join(allowed)} {over}",
            resource=over,
            limit=int(allowed[0]),
        )


class InvalidQuotaLimit(InvalidInput):
    pass
