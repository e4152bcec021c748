"""Loading guests from the cell databases, many at a time (runs in a worker thread).

A boot storm is thousands of cache misses at once. Loading them one by one costs a thread hop
and eight queries per guest per worker; a batch of any size costs one hop, one query for the
instance mappings and seven per cell (``records.load_many``), and the fewer, larger temporary
objects also leave less fragmentation behind in the long-lived worker.

``vendordata_request_for`` reads one instance for the compute app's vendordata build check.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import select

from cloudseed.cells.service import CellDatabases
from cloudseed.db.base import utcnow
from cloudseed.db.in_lists import padded
from cloudseed.metadata.delivery import guest_facts
from cloudseed.metadata.documents import GuestDocuments
from cloudseed.metadata.facts import vendordata_request
from cloudseed.servers import records
from cloudseed.servers.models import FixedIP
from cloudseed.vendordata.request import VendordataRequest

BY_ADDRESS = "address"
BY_UUID = "uuid"


@dataclass(frozen=True, slots=True)
class Key:
    """What a guest is looked up by: ``kind`` is BY_ADDRESS or BY_UUID."""

    kind: str
    value: str


def load_guests(
    cells: CellDatabases, keys: Iterable[Key], *, dhcp_domain: str
) -> dict[Key, GuestDocuments | None]:
    """Every key's guest, or None where no live instance answers to it."""
    keys = list(keys)
    found: dict[Key, GuestDocuments | None] = dict.fromkeys(keys)
    uuid_keys = {k.value: k for k in keys if k.kind == BY_UUID}
    addresses = {k.value for k in keys if k.kind == BY_ADDRESS}
    # cell id -> uuids wanted there, and address -> uuid for the addresses found.
    wanted = cells.cells_of(uuid_keys)
    addresses_of: dict[str, list[str]] = {}  # uuid -> the wanted addresses it has
    unresolved = set(addresses)
    now = utcnow()
    # Addresses are looked for in every cell; guests known by id only in their own.
    dbs = cells.all_cells_by_id() if addresses else {i: cells.by_id(i) for i in sorted(wanted)}
    for cell_id, db in dbs.items():
        with db.read() as session:
            if unresolved:
                rows = session.execute(
                    select(FixedIP.address, FixedIP.instance_uuid).where(
                        FixedIP.address.in_(padded(unresolved))
                    )
                ).all()
                for address, uuid in rows:
                    unresolved.discard(address)
                    addresses_of.setdefault(uuid, []).append(address)
                    wanted.setdefault(cell_id, set()).add(uuid)
            uuids = wanted.get(cell_id)
            if not uuids:
                continue
            for record in records.load_live(session, uuids):
                guest = GuestDocuments(
                    guest_facts(record, now),
                    dhcp_domain,
                    generation=record.instance.generation,
                )
                uuid = record.instance.uuid
                if uuid in uuid_keys:
                    found[uuid_keys[uuid]] = guest
                for address in addresses_of.get(uuid, ()):
                    found[Key(BY_ADDRESS, address)] = guest
    return found


def vendordata_request_for(cells: CellDatabases, uuid: str) -> VendordataRequest:
    """What DynamicJSON targets are posted about instance ``uuid``, read from its cell now
    (the build check's ``request_for``; NotFound when the instance is gone)."""
    with cells.for_instance(uuid).read() as session:
        return vendordata_request(guest_facts(records.load(session, uuid), utcnow()))
