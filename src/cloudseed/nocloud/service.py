"""NoCloud seeds in a server's cell database session: show (making the first), rotate, revoke.

Service functions take the Session and never commit; the route owns the transaction. Every
change tells the metadata workers (``records.guest_changed``), which then drop the cached
guest and with it the seed they check tokens against: a rotated or revoked URL stops working
everywhere as a changed key does.
"""

from __future__ import annotations

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from cloudseed.nocloud.errors import SeedRaced, SeedRevoked
from cloudseed.nocloud.seeds import REVOKED, SYSTEM_METADATA_KEY, Seed, new_seed, parse_stored
from cloudseed.servers import records
from cloudseed.servers.models import InstanceSystemMetadata


def shown(session: Session, uuid: str, *, now: float) -> Seed | None:
    """The seed a GET shows without writing: the current one, None when one must be made
    (none yet, or expired). SeedRevoked after a revoke."""
    value = records.load(session, uuid).system_metadata.get(SYSTEM_METADATA_KEY)
    if value == REVOKED:
        raise SeedRevoked(uuid)
    seed = parse_stored(value)
    return None if seed is None or seed.expired(now) else seed


def current(session: Session, uuid: str, *, now: float, lifetime: int) -> Seed:
    """``shown``, making a new seed where it would be None (in the caller's transaction)."""
    seed = shown(session, uuid, now=now)
    return seed if seed is not None else _store(session, uuid, new_seed(now, lifetime))


def for_boot(
    session: Session, uuid: str, *, now: float, lifetime: int, renew_within: int
) -> Seed | None:
    """The seed a guest booting now is given (the compute agent, for an image with
    ``cloudseed_bootstrap=nocloud``): the current one, or a new one when there is none, it
    expired, or it expires within ``renew_within`` seconds (the guest reads it during its
    boot, and again at boots of its own). None after a revoke: the guest boots without one."""
    try:
        seed = shown(session, uuid, now=now)
    except SeedRevoked:
        return None
    if seed is not None and (
        seed.expires_at is None or seed.expires_at - now >= min(renew_within, lifetime)
    ):
        return seed
    return _store(session, uuid, new_seed(now, lifetime))


def rotate(session: Session, uuid: str, *, now: float, lifetime: int) -> Seed:
    """A new seed, whatever the server had (also after a revoke): every earlier URL ends."""
    records.load(session, uuid)  # 404 for a deleted or unknown server
    return _store(session, uuid, new_seed(now, lifetime))


def revoke(session: Session, uuid: str) -> None:
    """No seed, and none made by a GET until a rotate."""
    records.load(session, uuid)
    _put(session, uuid, REVOKED)


def _store(session: Session, uuid: str, seed: Seed) -> Seed:
    _put(session, uuid, seed.stored())
    return seed


def _put(session: Session, uuid: str, value: str) -> None:
    session.execute(
        delete(InstanceSystemMetadata).where(
            InstanceSystemMetadata.instance_uuid == uuid,
            InstanceSystemMetadata.key == SYSTEM_METADATA_KEY,
        )
    )
    session.add(InstanceSystemMetadata(instance_uuid=uuid, key=SYSTEM_METADATA_KEY, value=value))
    try:
        session.flush()
    except IntegrityError as exc:  # a concurrent transaction inserted it after our delete
        raise SeedRaced() from exc
    records.guest_changed(session, uuid)
