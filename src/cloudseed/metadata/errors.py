"""What the metadata service refuses, in the root error families; ``app`` maps them to
statuses in one table."""

from __future__ import annotations

from cloudseed.errors import Forbidden, InvalidInput, NotFound, Unauthorized


class BadProxyRequest(InvalidInput):
    """A proxy request without the headers it needs (400, Nova's messages)."""


class BadSignature(Forbidden):
    def __init__(self) -> None:
        super().__init__("Invalid proxy request signature.")


class UnknownCaller(NotFound):
    """No live instance matches the request (404, as Nova, so callers learn nothing)."""

    def __init__(self, why: str) -> None:
        super().__init__("The resource could not be found.")
        self.why = why


class TokenRequired(Unauthorized):
    def __init__(self, why: str = "A session token is required.") -> None:
        super().__init__(why)


class TokenRefused(Forbidden):
    pass
