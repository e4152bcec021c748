"""Loading instances from Nova's databases, many at a time (runs in a worker thread), as
Nova's metadata API loads one (``Instance.get_by_uuid`` with ec2_ids, flavor, info_cache,
metadata, system_metadata, keypairs, device_metadata and numa_topology; the block device
mappings; the instance mapping that says which cell holds it).

Which rows count is Nova's: a live instance (``deleted = 0``; a soft-deleted one, vm_state
``soft-delete``, still is), its live metadata items, every system metadata item (Nova deletes
those for good), its ``instance_extra`` and info cache rows, its live block device mappings.
An instance without a mapping is looked for in ``[database] connection``, as Nova looks.

EC2 ids are Nova's too: ``instance_id_mappings`` for the instance and ``s3_images`` for its
image, kernel and ramdisk, created on first use as Nova creates them (the only rows written
here besides passwords), so a Nova metadata API beside this one shows the same ids. Neither
table has a unique key: of two rows for one uuid (made by two services at once), the lowest
id is the one both read.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import Table, insert, select
from sqlalchemy.orm import Session

from cloudseed.db.engines import Database
from cloudseed.db.in_lists import padded
from cloudseed.metadata.loading import BY_ADDRESS, BY_UUID, Key
from cloudseed.nova_metadata import schema
from cloudseed.nova_metadata.databases import NovaDatabases
from cloudseed.nova_metadata.facts import Ec2Ids, InstanceFacts, facts_from_rows
from cloudseed.nova_metadata.mappings import InstanceMappings

log = logging.getLogger(__name__)
ACTIVE = "active"  # Nova's vm_states.ACTIVE: the guests a host boots
HOST_LIMIT = 1000  # a host's instances loaded ahead at most (hosts.py)

_INSTANCE_COLUMNS = [
    schema.instances.c[name]
    for name in (
        "id",
        "uuid",
        "project_id",
        "hostname",
        "display_name",
        "launch_index",
        "availability_zone",
        "reservation_id",
        "image_ref",
        "kernel_id",
        "ramdisk_id",
        "key_name",
        "key_data",
        "user_data",
        "root_device_name",
        "default_ephemeral_device",
        "default_swap_device",
        "created_at",  # signed identity's pendingTime (identity.py)
        "host",  # hosts.py
    )
]


class Loader:
    """Instances by uuid or fixed IP (``resolve`` turns an address into an instance uuid:
    Neutron's answer, as Nova's); which cell holds each, from ``mappings`` when it was read
    lately (mappings.py says how a changed mapping is still honoured)."""

    def __init__(
        self,
        databases: NovaDatabases,
        *,
        local: bool,
        resolve: Callable[[str], str | None],
        mappings: InstanceMappings | None = None,
    ) -> None:
        self.databases = databases
        self.local = local
        self.resolve = resolve
        self.mappings = mappings if mappings is not None else InstanceMappings()

    def load(self, keys: list[Key], *, ahead: bool = False) -> dict[Key, InstanceFacts | None]:
        """Every key's instance (None: no live instance answers to it). ``ahead``: loaded
        before any guest asked, so nothing is written: an instance whose EC2 ids are not all
        made yet is left out (None), for its first request to load as Nova would."""
        found: dict[Key, InstanceFacts | None] = dict.fromkeys(keys)
        by_uuid: dict[str, list[Key]] = defaultdict(list)
        for key in keys:
            uuid = key.value if key.kind == BY_UUID else self.resolve(key.value)
            if uuid is not None:
                by_uuid[uuid].append(key)
        loaded: set[str] = set()
        groups, from_cache = self._databases_of(list(by_uuid))
        for _again in range(2):
            for db, uuids in groups:
                for facts in load_instances(db, uuids, create_ids=not ahead):
                    loaded.add(facts.uuid)
                    for key in by_uuid[facts.uuid]:
                        # By address: only an instance that has the address (Neutron said so).
                        if key.kind != BY_ADDRESS or key.value in facts.fixed_addresses:
                            found[key] = facts
            # A mapping from the cache whose cell had no live instance may be out of date
            # (moved, deleted): read it again, once.
            stale = [uuid for uuid in from_cache if uuid not in loaded]
            if not stale:
                break
            self.mappings.forget(stale)
            groups, from_cache = self._databases_of(stale)
        return found

    def host_instances(self, facts: InstanceFacts) -> list[str]:
        """The other active instances on ``facts``' host, in its cell (hosts.py), at most
        ``HOST_LIMIT``, by Nova's ``instances_host_deleted_cleaned_idx``."""
        if not facts.host:
            return []
        c = schema.instances.c
        query = (
            select(c.uuid)
            .where(
                c.host == facts.host,
                c.deleted == 0,
                c.vm_state == ACTIVE,
                c.uuid != facts.uuid,
            )
            .limit(HOST_LIMIT)
        )
        found: list[str] = []
        for db, _uuids in self.databases_of([facts.uuid]):
            with db.read() as session:
                found.extend(session.scalars(query))
        return found

    def databases_of(self, uuids: list[str]) -> list[tuple[Database, list[str]]]:
        """The databases that hold ``uuids``, with the uuids each holds."""
        return self._databases_of(uuids)[0]

    def _databases_of(self, uuids: list[str]) -> tuple[list[tuple[Database, list[str]]], set[str]]:
        """``databases_of``, and the uuids whose cell came from the mapping cache."""
        if not uuids:
            return [], set()
        if self.local:
            return [(self.databases.local(), uuids)], set()
        known, unknown, generation = self.mappings.cached(uuids)
        rows: dict[str, int | None] = dict(known)
        if unknown:
            mappings = schema.instance_mappings
            with self.databases.api.read() as session:
                read = dict(
                    session.execute(
                        select(mappings.c.instance_uuid, mappings.c.cell_id).where(
                            mappings.c.instance_uuid.in_(padded(unknown))
                        )
                    ).all()
                )
            rows.update(read)
        cells = self.databases.cells
        if any(cell_id is not None and cell_id not in cells for cell_id in rows.values()):
            cells = self.databases.refresh_cells()
        if unknown:
            self.mappings.remember(
                {uuid: cell_id for uuid, cell_id in read.items() if cell_id in cells},
                generation,
            )
        grouped: dict[str, tuple[Database, list[str]]] = {}  # by URL
        for uuid in uuids:
            if uuid not in rows:
                if self.databases.default_url is None:
                    continue
                db = self.databases.local()  # Nova's fallback
            else:
                cell_id = rows[uuid]
                cell = cells.get(cell_id) if cell_id is not None else None
                if cell is None:  # not scheduled yet, or cell0
                    continue
                db = cell.db
            grouped.setdefault(db.url, (db, []))[1].append(uuid)
        return list(grouped.values()), set(known)


def load_instances(
    db: Database, uuids: list[str], *, create_ids: bool = True
) -> list[InstanceFacts]:
    """The live instances among ``uuids`` in one cell database, with their EC2 ids (made
    where missing; without ``create_ids``, an instance with an id missing is left out)."""
    with db.read() as session:
        rows = _read(session, uuids)
    if rows["missing_ids"]:
        if not create_ids:
            return [_facts(row, rows) for row in rows["instances"] if _has_ids(row, rows)]
        db.run(lambda session: _create_ids(session, rows), write=True)
    return [_facts(row, rows) for row in rows["instances"]]


def _has_ids(instance: dict[str, Any], rows: dict[str, Any]) -> bool:
    images = (instance[name] for name in ("image_ref", "kernel_id", "ramdisk_id"))
    return instance["uuid"] in rows["instance_ids"] and all(
        image in rows["image_ids"] for image in images if image
    )


def _read(session: Session, uuids: list[str]) -> dict[str, Any]:
    s = schema
    instances = [
        dict(r._mapping)
        for r in session.execute(
            select(*_INSTANCE_COLUMNS).where(
                s.instances.c.uuid.in_(padded(uuids)), s.instances.c.deleted == 0
            )
        )
    ]
    live = [i["uuid"] for i in instances]
    rows: dict[str, Any] = {"instances": instances}
    if not live:
        rows["missing_ids"] = False
        return rows
    extra = s.instance_extra.c
    rows["extra"] = {
        r.instance_uuid: dict(r._mapping)
        for r in session.execute(
            select(
                extra.instance_uuid,
                extra.keypairs,
                extra.flavor,
                extra.device_metadata,
                extra.numa_topology,
            ).where(extra.instance_uuid.in_(padded(live)))
        )
    }
    md = s.instance_metadata.c
    rows["metadata"] = _grouped(
        session.execute(
            select(md.instance_uuid, md.key, md.value)
            .where(md.instance_uuid.in_(padded(live)), md.deleted == 0)
            .order_by(md.id)
        )
    )
    sysmeta = s.instance_system_metadata.c
    rows["system_metadata"] = _grouped(
        session.execute(
            select(sysmeta.instance_uuid, sysmeta.key, sysmeta.value)
            .where(sysmeta.instance_uuid.in_(padded(live)))
            .order_by(sysmeta.id)
        )
    )
    cache = s.instance_info_caches.c
    rows["network_info"] = dict(
        session.execute(
            select(cache.instance_uuid, cache.network_info).where(
                cache.instance_uuid.in_(padded(live))
            )
        ).all()
    )
    bdm = s.block_device_mapping.c
    bdms: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in session.execute(
        select(
            bdm.instance_uuid,
            bdm.source_type,
            bdm.destination_type,
            bdm.guest_format,
            bdm.device_name,
        )
        .where(bdm.instance_uuid.in_(padded(live)), bdm.deleted == 0)
        .order_by(bdm.id)
    ):
        bdms[r.instance_uuid].append(dict(r._mapping))
    rows["bdms"] = bdms
    rows["instance_ids"] = _ids(session, s.instance_id_mappings, live)
    images = {
        i[name] for i in instances for name in ("image_ref", "kernel_id", "ramdisk_id") if i[name]
    }
    rows["image_ids"] = _ids(session, s.s3_images, sorted(images))
    rows["missing_ids"] = bool(
        set(live) - set(rows["instance_ids"]) or images - set(rows["image_ids"])
    )
    rows["images"] = images
    return rows


def _grouped(result: Iterable[Any]) -> dict[str, list[tuple[str, str]]]:
    grouped: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for uuid, key, value in result:
        grouped[uuid].append((key, value))
    return grouped


def _ids(session: Session, table: Table, uuids: list[str]) -> dict[str, int]:
    """uuid -> the lowest id of its rows (deleted rows count, as Nova reads them)."""
    if not uuids:
        return {}
    found: dict[str, int] = {}
    for uuid, row_id in session.execute(
        select(table.c.uuid, table.c.id).where(table.c.uuid.in_(padded(uuids))).order_by(table.c.id)
    ):
        found.setdefault(uuid, row_id)
    return found


def _create_ids(session: Session, rows: dict[str, Any]) -> None:
    """Nova's get-or-create of EC2 ids, for the uuids that have none yet; the ids read
    back after, so two creators settle on the lowest."""
    for table, wanted, key in (
        (schema.instance_id_mappings, [i["uuid"] for i in rows["instances"]], "instance_ids"),
        (schema.s3_images, sorted(rows["images"]), "image_ids"),
    ):
        missing = [u for u in wanted if u not in rows[key]]
        for uuid in missing:
            session.execute(insert(table).values(uuid=uuid))
            log.info("created the EC2 id of %s in %s", uuid, table.name)
        if missing:
            rows[key].update(_ids(session, table, missing))


def _ec2_id(template: str, number: int | None) -> str | None:
    return None if number is None else template % number


def _facts(instance: dict[str, Any], rows: dict[str, Any]) -> InstanceFacts:
    uuid = instance["uuid"]
    image_ids = rows["image_ids"]

    def image(column: str, kind: str) -> str | None:
        value = instance[column]
        return _ec2_id(f"{kind}-%08x", image_ids.get(value)) if value else None

    ec2 = Ec2Ids(
        instance_id=_ec2_id("i-%08x", rows["instance_ids"].get(uuid)) or "",
        ami_id=image("image_ref", "ami"),
        kernel_id=image("kernel_id", "aki"),
        ramdisk_id=image("ramdisk_id", "ari"),
    )
    return facts_from_rows(
        instance,
        extra=rows["extra"].get(uuid),
        metadata=rows["metadata"].get(uuid, ()),
        system_metadata=dict(rows["system_metadata"].get(uuid, ())),
        network_info=rows["network_info"].get(uuid),
        bdms=rows["bdms"].get(uuid, ()),
        ec2=ec2,
    )
