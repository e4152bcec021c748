"""What a rebuild request asks for, as the route parsed and checked it from the body
(``servers/api/lifecycle.py``): ``Servers.rebuild`` checks it against the image and the quotas
and queues it. The counterpart of a create's ``create_request.CreateRequest``."""

from __future__ import annotations

from dataclasses import dataclass, field

from cloudseed.servers.creation import personality
from cloudseed.servers.history.bootstrap import Actor
from cloudseed.servers.lifecycle.edits import UNSET, Unset
from cloudseed.servers.live_keys.sets import KeyRequest
from cloudseed.settings import QuotaSection


@dataclass(frozen=True)
class RebuildRequest:
    image_ref: str
    actor: Actor
    # An administrator sees every image (others: public, shared and their project's own).
    admin: bool = False
    # None (or UNSET): the server keeps its value.
    name: str | None = None
    metadata: dict[str, str] | None = None
    hostname: str | None = None
    description: str | Unset | None = UNSET
    user_data: str | Unset | None = UNSET
    access_ip_v4: str | None = None
    access_ip_v6: str | None = None
    # The server's own keys as the rebuild leaves them (2.106 ``key_names``; ``key_name`` is
    # a one-element list, a null one none: ``own_keys``); None: the server keeps its own.
    key_names: tuple[KeyRequest, ...] | None = None
    # For the new config drive, through the operation's payload, which drops them when the
    # operation ends.
    admin_password: str | None = None
    files: personality.Encoded = ()
    # The limits personality files are checked against (``[quota]``).
    quota: QuotaSection = field(default_factory=QuotaSection)
    # Seconds of notice the guest gets (2.111, servers/notices/): the request's or its
    # project's default; 0: none.
    notice_seconds: int = 0


def own_keys(
    key_name: str | Unset | None, key_names: tuple[KeyRequest, ...] | None
) -> tuple[KeyRequest, ...] | None:
    """The server's own keys a rebuild body names: ``key_names`` (2.106) when given, else
    ``key_name`` as a one-element list (null: no key); None when it names neither."""
    if key_names is not None or key_name is UNSET:
        return key_names
    return () if key_name is None else (KeyRequest(name=key_name),)
