"""Live keys (2.106), IO-free: what a request asks for, and the stored list it makes.

A server's keys are one ordered list (``instance_extra.keypairs``, /work/spec17.md's stored
form): the server's own key pairs in the order the user gave them, then its project's, each
entry a snapshot of its key pair plus ``expires_at``, ``source`` and ``since_generation``. The
functions here check request values, build and merge entries, and say what changed; the
database side (``live_keys``) and the views call them. ``key_delivery`` reads the same list.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from cloudseed.errors import InvalidInput
from cloudseed.keypairs import key_material as keys
from cloudseed.keypairs.errors import InvalidKeypair
from cloudseed.servers.live_keys.delivery import SOURCE_PROJECT, SOURCE_SERVER, entry_defaults


@dataclass(frozen=True)
class KeyRequest:
    """One key a request names: a key pair's name (the caller's, or ``user_id``'s for project
    keys) and its expiry as stored (ISO 8601 UTC with ``Z``), or None."""

    name: str
    expires_at: str | None = None
    user_id: str | None = None


class KeyPairLike(Protocol):
    """What an entry is made from (``keypairs.models.KeyPair``, kept out of this module)."""

    @property
    def name(self) -> str: ...
    @property
    def user_id(self) -> str: ...
    @property
    def fingerprint(self) -> str: ...
    @property
    def fingerprint_sha256(self) -> str | None: ...
    @property
    def public_key(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def created_at(self) -> dt.datetime: ...


# RFC 3339's shape (ASCII digits, a date and a time, an optional offset), checked before
# fromisoformat, which also takes bare dates, week dates and other forms nobody means here.
_TIMESTAMP = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,6})?)?"
    r"([Zz]|[+-][0-9]{2}:?[0-9]{2})?"
)


def parse_expiry(value: str, *, now: dt.datetime, field: str = "expires_at") -> str:
    """A requested ``expires_at`` as stored: UTC, ``Z``-suffixed. A timestamp without an
    offset is UTC. Anything else, or a time not after ``now`` (naive UTC), is a 400."""
    if _TIMESTAMP.fullmatch(value) is None:
        raise InvalidInput(
            f"Invalid input for field/attribute {field}. Value: {_shown(value)}. "
            "Not an ISO 8601 date and time (YYYY-MM-DDTHH:MM[:SS[.ffffff]], with Z, an "
            "offset, or none for UTC)."
        )
    try:
        parsed = dt.datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
        if parsed.tzinfo is not None:
            # The year 1 or 9999 with an offset can leave the representable range.
            parsed = parsed.astimezone(dt.UTC).replace(tzinfo=None)
    except (ValueError, OverflowError):
        raise InvalidInput(
            f"Invalid input for field/attribute {field}. Value: {_shown(value)}. "
            "Not a valid date and time."
        ) from None
    if parsed <= now:
        raise InvalidInput(
            f"Invalid input for field/attribute {field}. Value: {_shown(value)}. "
            "The time is in the past: a key must expire in the future."
        )
    return format_time(parsed)


def format_time(value: dt.datetime) -> str:
    """A naive UTC time as the stored form and the API show it."""
    return value.isoformat() + "Z"


def _shown(value: str) -> str:
    return value if len(value) <= 64 else f"{value[:64]}..."


def key_requests(
    items: Sequence[Any], *, now: dt.datetime, limit: int, field: str = "key_names"
) -> tuple[KeyRequest, ...]:
    """``key_names`` (the schema checked each item's form: a name, or ``{"name",
    "expires_at"}``) as requests, in order. More than ``limit`` keys, a name given twice or a
    bad ``expires_at`` are 400s."""
    if len(items) > limit:
        raise InvalidInput(
            f"Invalid input for field/attribute {field}. {len(items)} keys given; a server may "
            f"have at most {limit} ([api] max_keys_per_server)."
        )
    requests: list[KeyRequest] = []
    seen: set[str] = set()
    for item in items:
        name = item if isinstance(item, str) else item["name"]
        expires = None if isinstance(item, str) else item.get("expires_at")
        if name in seen:
            raise InvalidInput(
                f"Invalid input for field/attribute {field}. Duplicate key name: {_shown(name)}."
            )
        seen.add(name)
        requests.append(
            KeyRequest(
                name=name, expires_at=None if expires is None else parse_expiry(expires, now=now)
            )
        )
    return tuple(requests)


def project_key_requests(
    items: Sequence[dict[str, Any]], *, now: dt.datetime, limit: int
) -> tuple[KeyRequest, ...]:
    """``project_keys`` of ``PUT /os-project-keys/{id}``: ``{"name", "user_id",
    "expires_at"}`` items, each key pair once."""
    if len(items) > limit:
        raise InvalidInput(
            f"Invalid input for field/attribute project_keys. {len(items)} keys given; a "
            f"project may have at most {limit} ([api] max_keys_per_server)."
        )
    requests: list[KeyRequest] = []
    seen: set[tuple[str, str]] = set()
    for item in items:
        identity = (item["user_id"], item["name"])
        if identity in seen:
            raise InvalidInput(
                "Invalid input for field/attribute project_keys. Duplicate key pair: "
                f"{_shown(item['name'])} of user {_shown(item['user_id'])}."
            )
        seen.add(identity)
        expires = item.get("expires_at")
        requests.append(
            KeyRequest(
                name=item["name"],
                user_id=item["user_id"],
                expires_at=None if expires is None else parse_expiry(expires, now=now),
            )
        )
    return tuple(requests)


def entry(
    keypair: KeyPairLike, *, source: str, expires_at: str | None, generation: int
) -> dict[str, Any]:
    """The stored snapshot of ``keypair`` on a server."""
    return {
        "name": keypair.name,
        "user_id": keypair.user_id,
        "fingerprint": keypair.fingerprint,
        "fingerprint_sha256": keypair.fingerprint_sha256,
        "public_key": keypair.public_key,
        "type": keypair.type,
        "created_at": keypair.created_at.isoformat(),
        "expires_at": expires_at,
        "source": source,
        "since_generation": generation,
    }


def fingerprint_sha256(entry: dict[str, Any]) -> str | None:
    """The entry's SHA-256 fingerprint. Entries stored before 2.106 have none: it is
    computed from the public key (None if that cannot be parsed any more)."""
    stored = entry.get("fingerprint_sha256")
    if stored:
        return str(stored)
    try:
        return keys.parse_public_key(
            entry["public_key"], entry.get("type", "ssh")
        ).fingerprint_sha256
    except (InvalidKeypair, KeyError, TypeError, ValueError):
        return None


def own(entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The server's own entries (``key_names``), in order."""
    return [e for e in map(entry_defaults, entries) if e["source"] == SOURCE_SERVER]


def of_project(entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in map(entry_defaults, entries) if e["source"] == SOURCE_PROJECT]


def merge(server: list[dict[str, Any]], project: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The server's keys, then the project's that are not already among them (the same key
    pair, or the same public key: one line in authorized_keys is enough)."""
    pairs = {(e["user_id"], e["name"]) for e in server}
    material = {fingerprint_sha256(e) for e in server} - {None}
    return [*server] + [
        e
        for e in project
        if (e["user_id"], e["name"]) not in pairs and fingerprint_sha256(e) not in material
    ]


def _identity(entry: dict[str, Any]) -> tuple[str, str, str]:
    return entry["user_id"], entry["name"], entry["public_key"]


def with_generations(
    old: list[dict[str, Any]], new: list[dict[str, Any]], generation: int
) -> list[dict[str, Any]]:
    """``new`` with each entry's ``since_generation``: kept from ``old`` for a key the guest
    already has with the same expiry (whichever its source), else ``generation``."""
    before = {_identity(e): e for e in map(entry_defaults, old)}
    result = []
    for e in new:
        previous = before.get(_identity(e))
        unchanged = previous is not None and previous["expires_at"] == e.get("expires_at")
        since = previous["since_generation"] if previous is not None and unchanged else generation
        result.append({**e, "since_generation": since})
    return result


def _comparable(entries: Iterable[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (e["user_id"], e["name"], e["public_key"], e["expires_at"], e["source"])
        for e in map(entry_defaults, entries)
    ]


def same(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> bool:
    """True when ``new`` is ``old`` (keys, order, expiry and source): nothing to deliver."""
    return _comparable(old) == _comparable(new)


def describe(entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """A key set as the bootstrap history records it: no key material."""
    return [
        {
            "name": e["name"],
            "fingerprint_sha256": fingerprint_sha256(e),
            "expires_at": e["expires_at"],
            "source": e["source"],
        }
        for e in map(entry_defaults, entries)
    ]


def first_key(entries: list[dict[str, Any]]) -> tuple[str | None, str | None]:
    """``instance.key_name`` and ``key_data`` (Nova's columns): the first entry's."""
    if not entries:
        return None, None
    return entries[0]["name"], entries[0]["public_key"]


__all__ = [
    "KeyPairLike",
    "KeyRequest",
    "describe",
    "entry",
    "fingerprint_sha256",
    "first_key",
    "format_time",
    "key_requests",
    "merge",
    "of_project",
    "own",
    "parse_expiry",
    "project_key_requests",
    "same",
    "with_generations",
]
