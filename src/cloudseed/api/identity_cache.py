"""The identities keystonemiddleware vouched for, by token, for ``token_cache_time`` seconds.

keystonemiddleware caches validated tokens itself (in process unless ``memcached_servers`` is
set), but reaching that cache costs a worker thread, a WSGI environ, a webob request and its
whole pipeline on every request: most of a key pair listing's time behind Keystone. This
cache answers a token seen before without any of that. It keeps an entry no longer than
keystonemiddleware would keep its own (``[keystone_authtoken] token_cache_time``, default 300 s;
-1 or 0 turn both off) and never past the token's own expiry, so a token stops working here
when it would stop working there: a revoked token, as with keystonemiddleware's cache, is
believed until its entry ages out.

Only accepted tokens are kept (a refusal always goes to keystonemiddleware), keyed by a hash of
the token headers, and at most ``max_entries`` of them: the least recently used go first.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable

from cloudseed.web.context import RequestContext

DEFAULT_TOKEN_CACHE_TIME = 300
MAX_ENTRIES = 10_000


def token_key(auth_token: bytes, service_token: bytes | None) -> bytes:
    """The cache key of a request's credentials (both headers: a service token adds roles)."""
    digest = hashlib.sha256(auth_token)
    if service_token is not None:
        digest.update(b"\0" + service_token)
    return digest.digest()


def expiry_of(token_info: object) -> float | None:
    """The token's ``expires_at`` (Identity v3's token body) as a Unix time, or None."""
    if not isinstance(token_info, dict):
        return None
    token = token_info.get("token")
    text = token.get("expires_at") if isinstance(token, dict) else None
    if not isinstance(text, str):
        return None
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.timestamp()


class IdentityCache:
    """Used from the event loop only, so it needs no lock."""

    def __init__(
        self,
        *,
        ttl: float,
        max_entries: int = MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._clock = clock
        self._wall_clock = wall_clock
        self._entries: OrderedDict[bytes, tuple[float, RequestContext]] = OrderedDict()

    @classmethod
    def from_options(cls, options: dict[str, str]) -> IdentityCache | None:
        """The cache ``[keystone_authtoken]`` asks for; None when token caching is off."""
        text = options.get("token_cache_time", str(DEFAULT_TOKEN_CACHE_TIME)).strip()
        try:
            ttl = int(text)
        except ValueError:
            return None  # keystonemiddleware refuses it at start-up with its own message
        return cls(ttl=ttl) if ttl > 0 else None

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: bytes) -> RequestContext | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        deadline, identity = entry
        if self._clock() >= deadline:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return identity

    def put(self, key: bytes, identity: RequestContext, *, expires_at: float | None) -> None:
        """Keep ``identity`` for ``ttl`` seconds, or until ``expires_at`` (Unix time) if
        sooner. A token whose expiry is unknown is not kept: nothing would end its entry but
        the ttl, and keystonemiddleware checks the expiry on every use of its own entry."""
        if expires_at is None:
            return
        lifetime = min(self.ttl, expires_at - self._wall_clock())
        if lifetime <= 0:
            return
        self._entries[key] = (self._clock() + lifetime, identity)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
