"""Errors that only exist at the HTTP edge (both apps; no domain raises them).

InvalidInput ─┬─ MalformedRequestBody     not JSON                        (400)
              ├─ ValidationFailed         JSON Schema said no             (400)
              ├─ IncompleteBody           the client left mid-body        (400)
              └─ InvalidAPIVersionString  bad microversion header         (400)
CloudseedError ┬ UnsupportedAPIVersion    microversion out of range       (406)
               ├ NotAuthenticated         no or bad credentials           (401)
               ├ MethodNotAllowed                                          (405)
               ├ RequestTooLarge          body over max_request_body_size (413)
               ├ RangeNotSatisfiable      a Range header outside the data (416)
               └ UnsupportedMediaType     Content-Type not JSON           (415)
Forbidden ──── PolicyNotAuthorized        policy rule denied the action   (403)
NotFound ───── ResourceNotFound           no such URL                     (404)
Exception ──── InvalidName                Nova's ``name`` format check said no; only inside
                                          validation, which turns it into ValidationFailed
"""

from __future__ import annotations

from cloudseed.errors import CloudseedError, Forbidden, InvalidInput, NotFound


class MalformedRequestBody(InvalidInput):
    def __init__(self) -> None:
        super().__init__("Malformed request body")


class ValidationFailed(InvalidInput):
    pass


class IncompleteBody(InvalidInput):
    """The request's body ended before its end: the client went away, or took longer than
    the listener's deadline (the answer is never delivered; it is for the log)."""

    def __init__(self) -> None:
        super().__init__("The request body was not received whole.")


class InvalidAPIVersionString(InvalidInput):
    def __init__(self, version: str) -> None:
        super().__init__(
            f"API Version String {version} is of invalid format. Must be of "
            "format MajorNum.MinorNum."
        )


class UnsupportedAPIVersion(CloudseedError):
    def __init__(self, *, requested: str, minimum: str, maximum: str) -> None:
        super().__init__(
            f"Version {requested} is not supported by the API. Minimum is "
            f"{minimum} and maximum is {maximum}."
        )


class NotAuthenticated(CloudseedError):
    def __init__(self, message: str = "Authentication required") -> None:
        super().__init__(message)


class MethodNotAllowed(CloudseedError):
    """The one 405 of both apps; ``allow`` is the ``Allow`` header's value when known."""

    def __init__(self, allow: str | None = None) -> None:
        super().__init__("The method is not allowed for the requested URL.")
        self.allow = allow


class RequestTooLarge(CloudseedError):
    def __init__(self) -> None:
        super().__init__("Request is too large.")


class RangeNotSatisfiable(CloudseedError):
    """A download's ``Range`` that the data of ``size`` bytes cannot serve (Glance's 416);
    the answer names the size (``Content-Range: bytes */SIZE``)."""

    def __init__(self, size: int) -> None:
        super().__init__("Requested range not satisfiable")
        self.size = size


class UnsupportedMediaType(CloudseedError):
    def __init__(self) -> None:
        super().__init__("Unsupported Content-Type")


class PolicyNotAuthorized(Forbidden):
    def __init__(self, action: str) -> None:
        super().__init__(f"Policy doesn't allow {action} to be performed.")
        self.action = action


class ResourceNotFound(NotFound):
    def __init__(self) -> None:
        super().__init__("The resource could not be found.")


class InvalidName(Exception):
    """Raised by the ``name`` format check; its message is Nova's whole fault message."""


class InvalidUserData(Exception):
    """Raised by the ``user-data`` format check for gzip that is not a gzip stream; its
    message is the whole fault message."""
