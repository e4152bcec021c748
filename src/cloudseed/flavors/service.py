"""Flavor registry operations (API database)."""

from __future__ import annotations

from sqlalchemy import or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from cloudseed.errors import Conflict, InvalidInput
from cloudseed.flavors.errors import FlavorNotFound
from cloudseed.flavors.models import Flavor
from cloudseed.flavors.snapshots import FlavorSnapshot


def add_flavor(
    session: Session,
    *,
    name: str,
    vcpus: int,
    ram: int,
    disk: int,
    flavorid: str | None = None,
    ephemeral: int = 0,
    swap: int = 0,
    is_public: bool = True,
    description: str | None = None,
) -> Flavor:
    if vcpus < 1 or ram < 1 or disk < 0 or ephemeral < 0 or swap < 0:
        raise InvalidInput("vcpus and ram must be at least 1; disk, ephemeral and swap at least 0")
    flavor = Flavor(
        flavorid=flavorid or name,
        name=name,
        vcpus=vcpus,
        memory_mb=ram,
        root_gb=disk,
        ephemeral_gb=ephemeral,
        swap=swap,
        is_public=is_public,
        description=description,
    )
    session.add(flavor)
    try:
        session.flush()
    except IntegrityError as exc:
        raise Conflict(f"Flavor with name {name} or id {flavor.flavorid} already exists.") from exc
    return flavor


def get_flavor(session: Session, flavor_ref: str) -> Flavor:
    """By flavor id, or (for operators' convenience) by name."""
    flavor = session.scalar(
        select(Flavor)
        .where(or_(Flavor.flavorid == flavor_ref, Flavor.name == flavor_ref), ~Flavor.disabled)
        .order_by(Flavor.flavorid != flavor_ref)
        .limit(1)
    )
    if flavor is None:
        raise FlavorNotFound(flavor_ref)
    return flavor


def list_flavors(session: Session) -> list[Flavor]:
    return list(
        session.scalars(
            select(Flavor).where(~Flavor.disabled).order_by(Flavor.memory_mb, Flavor.flavorid)
        )
    )


def snapshot(flavor: Flavor) -> FlavorSnapshot:
    """The flavor as an instance keeps it (later edits of the flavor do not change it)."""
    return FlavorSnapshot(
        flavorid=flavor.flavorid,
        name=flavor.name,
        vcpus=flavor.vcpus,
        memory_mb=flavor.memory_mb,
        root_gb=flavor.root_gb,
        ephemeral_gb=flavor.ephemeral_gb,
        swap=flavor.swap,
    )
