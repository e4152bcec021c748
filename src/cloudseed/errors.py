"""The root of every error cloudseed raises on purpose.

Domain packages subclass one of the families below in their own ``errors.py``;
nothing here knows about HTTP. Both HTTP apps map each family to a status
code and Nova's fault name in one table (``cloudseed.web.faults``), and the
CLI prints the same messages, so the tree is the contract between them::

    CloudseedError                 message for humans, context as attributes
    ├── InvalidInput               the request itself is wrong          (400)
    ├── Unauthorized               no valid credentials                 (401)
    ├── Forbidden                  not allowed for this caller          (403)
    │   └── QuotaExceeded          a limit would be passed              (403)
    ├── NotFound                   the thing does not exist (for you)   (404)
    ├── Conflict                   the current state does not allow it  (409)
    │   └── WriteContended         concurrent writers kept winning      (409)
    ├── TooLarge                   more than a limit allows in one go   (413)
    ├── ServiceUnavailable         a backend we depend on is down       (503)
    │   └── DatabaseUnavailable
    └── ConfigError                settings are invalid; start-up stops
"""

from __future__ import annotations


class CloudseedError(Exception):
    """Base class; ``message`` is what an API client or CLI user reads."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def public_message(self) -> str:
        """What anyone who may see the affected resource may read, such as a server's owner
        reading its fault: the message, unless a subclass's may name the host's files."""
        return self.message


# Nova's column for a fault's message holds 255 characters.
FAULT_MESSAGE_LENGTH = 255


def fault_message(exc: BaseException) -> str:
    """A server fault's message as its owner reads it, as Nova makes it: an error of ours says
    what happened; any other exception (a bug, an OSError naming a host path) only its class
    name. The whole text and traceback go to the fault's details, which only administrators
    see."""
    if isinstance(exc, CloudseedError):
        return exc.public_message[:FAULT_MESSAGE_LENGTH]
    return type(exc).__name__


class InvalidInput(CloudseedError):
    pass


class Unauthorized(CloudseedError):
    """The request lacks valid credentials (a metadata session token, for example)."""


class Forbidden(CloudseedError):
    pass


class QuotaExceeded(Forbidden):
    def __init__(self, message: str, *, resource: str, limit: int) -> None:
        super().__init__(message)
        self.resource = resource
        self.limit = limit


class NotFound(CloudseedError):
    pass


class Conflict(CloudseedError):
    pass


class WriteContended(Conflict):
    def __init__(
        self, message: str = "Concurrent requests changed the same records; try again."
    ) -> None:
        super().__init__(message)


class TooLarge(CloudseedError):
    """A request's content passes a size or count limit (an image upload over the cap)."""


class ServiceUnavailable(CloudseedError):
    pass


class DatabaseUnavailable(ServiceUnavailable):
    def __init__(self, message: str = "The database is unavailable; try again later.") -> None:
        super().__init__(message)


class ConfigError(CloudseedError):
    pass
