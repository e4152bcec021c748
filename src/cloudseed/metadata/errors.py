"""What the metadata service refuses, in the root error families; ``app`` takes their
statuses from the one table (``web/faults.py``).

InvalidInput ─┬─ BadProxyRequest      proxy headers missing or malformed     (400)
              └─ PasswordTooLarge     a posted password over the limit       (400)
TooLarge ────── AcknowledgementTooLarge  an events.json POST over its limit  (413)
Unauthorized ─── TokenRequired        no session token, and one is needed    (401)
Forbidden ────┬─ BadSignature         the proxy's instance id signature      (403)
              ├─ TokenRefused         a bad or expired token, or relayed     (403)
              └─ EndpointDisabled     the server's http_endpoint is disabled (403)
NotFound ─────┬─ UnknownCaller        no instance matches the caller         (404)
              └─ NoSuchDocument       the caller is known; nothing at the path (404)
Conflict ─────── PasswordAlreadySet   the guest posts its password once      (409)
ServiceUnavailable ─ TooManyWaiters   long-polls over a cap (changes.py)     (503)

UnknownCaller and NoSuchDocument answer with the same body, so a caller cannot tell from the
answer whether it was recognised; ``why`` (for the log) says which.
"""

from __future__ import annotations

from cloudseed.errors import (
    Forbidden,
    InvalidInput,
    NotFound,
    ServiceUnavailable,
    TooLarge,
    Unauthorized,
)


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


class NoSuchDocument(NotFound):
    """The caller is known but there is nothing at this path (404, same body as UnknownCaller)."""

    def __init__(self, why: str) -> None:
        super().__init__("The resource could not be found.")
        self.why = why


class TokenRequired(Unauthorized):
    def __init__(self, why: str = "A session token is required.") -> None:
        super().__init__(why)


class TokenRefused(Forbidden):
    pass


class EndpointDisabled(Forbidden):
    """The caller's server has its metadata endpoint turned off (2.109's ``http_endpoint``):
    403 for every path and method, the token PUT included, as EC2."""

    def __init__(self) -> None:
        super().__init__("The instance metadata endpoint is disabled for this instance.")


class TooManyWaiters(ServiceUnavailable):
    """One long-poll more than ``[metadata] max_waiters_per_instance`` or ``max_waiters``."""


class AcknowledgementTooLarge(TooLarge):
    """An acknowledgement (``POST /openstack/latest/events.json``) over its size limit."""

    def __init__(self) -> None:
        super().__init__("The acknowledgement is too large.")
