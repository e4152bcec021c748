"""Live keys (2.106): which keys a server has, and what its guest is known to hold.

A server's keys live in ``instance_extra.keypairs`` (a JSON list, in order: the server's own
keys, then its project's). Every change of that list grows ``keys_generation``. The guest proves
it holds a generation in one of three ways, recorded as ``keys_applied_generation`` and
``keys_applied_via``:

- ``metadata``: it read its keys from the metadata service at first boot (cloud-init applies
  keys once per instance, so only the boot generation counts);
- ``login-time check``: sshd's ``AuthorizedKeysCommand`` fetched this generation;
- ``guest agent``: qemu-guest-agent confirmed the change.

The API never says a key is live before one of those happened. The functions that only look at
values are IO-free; the ``mark_*`` ones write in the caller's transaction.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table, bindparam, update
from sqlalchemy.orm import Session

from cloudseed.db.base import utcnow
from cloudseed.servers.models import InstanceExtra

VIA_METADATA = "metadata"
VIA_LOGIN_CHECK = "login-time check"
VIA_GUEST_AGENT = "guest agent"
VIAS = (VIA_METADATA, VIA_LOGIN_CHECK, VIA_GUEST_AGENT)

SOURCE_SERVER = "server"
SOURCE_PROJECT = "project"


def entry_defaults(entry: dict[str, Any]) -> dict[str, Any]:
    """A stored key entry with the 2.106 fields filled in (rows written before 2.106 lack
    them)."""
    return {
        "expires_at": None,
        "source": SOURCE_SERVER,
        "since_generation": 1,
        "type": "ssh",
        **entry,
    }


def parse_time(value: str) -> dt.datetime:
    """A stored ``expires_at`` (ISO 8601, UTC) as a naive UTC datetime, as the database keeps
    times."""
    parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(dt.UTC).replace(tzinfo=None)
    return parsed


def is_expired(entry: dict[str, Any], now: dt.datetime) -> bool:
    expires_at = entry.get("expires_at")
    return expires_at is not None and parse_time(expires_at) <= now


def current(entries: list[dict[str, Any]], now: dt.datetime) -> list[dict[str, Any]]:
    """The keys a guest may use at ``now``: every unexpired one, in order."""
    return [e for e in entries if not is_expired(e, now)]


def next_expiry(entries: list[dict[str, Any]], now: dt.datetime) -> dt.datetime | None:
    """When the served set changes next by itself (the earliest future ``expires_at``)."""
    times = [parse_time(e["expires_at"]) for e in entries if e.get("expires_at")]
    future = [t for t in times if t > now]
    return min(future) if future else None


@dataclass(frozen=True)
class Delivery:
    """What the API says about the delivery of a server's key set."""

    generation: int
    applied_generation: int
    state: str  # "pending" | "applied" | "failed"
    via: str | None
    reason: str | None
    applied_at: dt.datetime | None

    def key_state(self, since_generation: int) -> str:
        if since_generation <= self.applied_generation:
            return "applied"
        return "failed" if self.state == "failed" else "pending"


def delivery_of(extra: InstanceExtra) -> Delivery:
    generation = extra.keys_generation or 1
    applied = extra.keys_applied_generation or 0
    failure = json.loads(extra.keys_failure) if extra.keys_failure else None
    if applied >= generation:
        state, reason = "applied", None
    elif failure is not None and failure.get("generation") == generation:
        state, reason = "failed", failure.get("reason")
    else:
        state, reason = "pending", None
    return Delivery(
        generation=generation,
        applied_generation=applied,
        state=state,
        via=extra.keys_applied_via,
        reason=reason,
        applied_at=extra.keys_applied_at,
    )


def _applied_update() -> Any:
    """The conditional UPDATE of ``mark_applied``, on the table (a Core statement, built once,
    that an executemany can run too)."""
    table = cast(Table, InstanceExtra.__table__)
    return (
        update(table)
        .where(
            table.c.instance_uuid == bindparam("uuid"),
            table.c.keys_applied_generation < bindparam("generation"),
            table.c.keys_generation >= bindparam("generation"),
        )
        .values(
            keys_applied_generation=bindparam("generation"),
            keys_applied_via=bindparam("via"),
            keys_applied_at=bindparam("at"),
        )
    )


_MARK_APPLIED = _applied_update()


def mark_applied(session: Session, instance_uuid: str, *, generation: int, via: str) -> bool:
    """Record that the guest holds ``generation``, unless it is already known to hold it or a
    later one: one conditional UPDATE, so concurrent workers never move it backwards. True if
    this call moved it."""
    if via not in VIAS:
        raise ValueError(f"unknown delivery way {via!r}")
    result = session.connection().execute(
        _MARK_APPLIED,
        {"uuid": instance_uuid, "generation": generation, "via": via, "at": utcnow()},
    )
    return bool(result.rowcount)


def mark_many_applied(session: Session, marks: list[tuple[str, int, str]]) -> None:
    """``mark_applied`` for many guests at once: (instance uuid, generation, via) each, in
    the order given (the caller's lock order), as one executemany of the same conditional
    UPDATE. A metadata worker's batch of first key deliveries in a boot storm."""
    for _, _, via in marks:
        if via not in VIAS:
            raise ValueError(f"unknown delivery way {via!r}")
    if marks:
        now = utcnow()
        session.connection().execute(
            _MARK_APPLIED,
            [{"uuid": u, "generation": g, "via": via, "at": now} for u, g, via in marks],
        )


def mark_failed(session: Session, instance_uuid: str, *, generation: int, reason: str) -> None:
    """Record why ``generation`` could not be delivered (the state says ``failed`` only while
    nothing else delivered it)."""
    failure = {"generation": generation, "reason": reason, "at": utcnow().isoformat()}
    session.execute(
        update(InstanceExtra)
        .where(InstanceExtra.instance_uuid == instance_uuid)
        .values(keys_failure=json.dumps(failure, sort_keys=True))
        .execution_options(synchronize_session=False)
    )
