"""Instance records on every backend: the task claim that serialises operations, and address
allocation."""

from __future__ import annotations

import concurrent.futures
import re

import pytest
from sqlalchemy import event, update
from sqlalchemy.orm import Session

from cloudseed.db.engines import Database
from cloudseed.errors import Conflict, InvalidInput
from cloudseed.networks import service as networks
from cloudseed.servers import records
from cloudseed.servers.errors import InstanceInvalidState
from cloudseed.servers.lifecycle import console_tails
from cloudseed.servers.models import Instance
from tests.support.instances import add_instance


@pytest.fixture()
def cell(clean_cell_db: Database) -> Database:
    return clean_cell_db


def test_claim_task_exactly_one_of_many_wins(cell):
    uid = add_instance(cell)

    def attempt(_: int) -> str:
        try:
            cell.run(
                lambda session: records.claim_task(
                    session, uid, operation="rebuild", task_state="rebuilding"
                ),
                write=True,
            )
            return "won"
        except InstanceInvalidState:
            return "409"

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        outcomes = sorted(pool.map(attempt, range(8)))
    assert outcomes == ["409"] * 7 + ["won"]


def test_claim_task_messages(cell):
    uid = add_instance(cell, vm_state="stopped")
    with pytest.raises(InstanceInvalidState) as info:
        cell.run(
            lambda session: records.claim_task(
                session, uid, operation="reboot_soft", task_state="rebooting"
            ),
            write=True,
        )
    assert info.value.message == (
        f"Cannot 'reboot_soft' instance {uid} while it is in vm_state stopped"
    )
    cell.run(
        lambda session: records.claim_task(
            session, uid, operation="start", task_state="powering-on"
        ),
        write=True,
    )
    with pytest.raises(InstanceInvalidState, match="task_state powering-on"):
        cell.run(
            lambda session: records.claim_task(
                session, uid, operation="rebuild", task_state="rebuilding"
            ),
            write=True,
        )


def test_address_allocation(api_db, clean_api_db):
    def work(session: Session) -> None:
        net = networks.add_network(
            session, name="n1", cidr="10.9.0.0/29", gateway="10.9.0.1", dns=["10.9.0.2"], mtu=1450
        )
        first = networks.allocate(session, network=net, instance_uuid="i1")
        assert first.address == "10.9.0.3"  # .1 is the gateway, .2 the DNS server
        assert first.mac_address.startswith("fa:16:3e:") and first.mtu == 1450
        fixed = networks.allocate(session, network=net, instance_uuid="i2", fixed_ip="10.9.0.6")
        assert fixed.address == "10.9.0.6"
        with pytest.raises(Conflict, match="already in use"):
            networks.allocate(session, network=net, instance_uuid="i3", fixed_ip="10.9.0.6")
        with pytest.raises(InvalidInput, match="not a valid ip address for network"):
            networks.allocate(session, network=net, instance_uuid="i3", fixed_ip="10.8.0.6")
        for n in range(2):
            networks.allocate(session, network=net, instance_uuid=f"x{n}")
        with pytest.raises(Conflict, match="No more fixed IP addresses"):
            networks.allocate(session, network=net, instance_uuid="full")
        networks.release(session, instance_uuid="i1")
        assert networks.allocate(session, network=net, instance_uuid="again").address == "10.9.0.3"

    api_db.run(work, write=True)
    with pytest.raises(InvalidInput):
        api_db.run(
            lambda session: networks.add_network(session, name="bad", cidr="10.9.0.1/24"),
            write=True,
        )


def test_overlapping_networks_are_refused(api_db, clean_api_db):
    api_db.run(
        lambda session: networks.add_network(session, name="n1", cidr="10.9.0.0/24"), write=True
    )
    for cidr in ("10.9.0.0/24", "10.9.0.64/26", "10.0.0.0/8"):
        with pytest.raises(InvalidInput, match=r"overlaps with network n1 \(10.9.0.0/24\)"):
            api_db.run(
                lambda session, cidr=cidr: networks.add_network(session, name="n2", cidr=cidr),
                write=True,
            )

    def work2(session: Session) -> None:
        networks.add_network(session, name="n2", cidr="10.9.1.0/24")
        networks.add_network(session, name="n3", cidr="fd00::/64")
        assert [n.name for n in networks.list_networks(session)] == ["n1", "n2", "n3"]

    api_db.run(work2, write=True)


def test_console_tails_stored_together(cell):
    """The mirror's pass stores its tails in one go: an existing tail replaced, a new one
    added, none for an instance deleted meanwhile (and nothing else touched)."""
    kept, new, gone, other = (add_instance(cell) for _ in range(4))
    first = [(kept, console_tails.pack("boot 1"), "s1"), (other, console_tails.pack("x"), "s0")]
    assert cell.run(lambda s: console_tails.store(s, first), write=True) == set()
    cell.run(
        lambda s: s.execute(update(Instance).where(Instance.uuid == gone).values(deleted=1)),
        write=True,
    )
    tails = [
        (kept, console_tails.pack("boot 2"), "s2"),
        (new, console_tails.pack("hello"), "n1"),
        (gone, console_tails.pack("late"), "g1"),
    ]
    assert cell.run(lambda s: console_tails.store(s, tails), write=True) == {gone}
    with cell.read() as session:
        assert console_tails.read(session, kept) == "boot 2"
        assert console_tails.read(session, new) == "hello"
        assert console_tails.read(session, gone) is None
        assert console_tails.read(session, other) == "x"
        assert console_tails.stamps_of(session, [kept, new, gone, other]) == {
            kept: "s2",
            new: "n1",
            other: "s0",
        }


def test_batch_loads_of_any_size_share_a_few_statement_texts(cell):
    """A batch's IN list is padded to one of a few sizes (db/in_lists.py): loads of 1 to 40
    servers find exactly the servers asked for, duplicates and all, with at most one text per
    statement and power of two, where one text per size was prepared and kept before."""
    uuids = [add_instance(cell, name=f"s{i}") for i in range(40)]
    texts: set[str] = set()

    def seen(_conn, _cursor, statement, *_args) -> None:
        texts.add(statement)

    event.listen(cell.engine, "before_cursor_execute", seen)
    try:
        for count in range(1, 41):
            wanted = [*uuids[:count], "not-there"]
            loaded = cell.run(lambda s, w=wanted: records.load_live(s, w))
            assert sorted(r.instance.uuid for r in loaded) == sorted(uuids[:count])
    finally:
        event.remove(cell.engine, "before_cursor_execute", seen)
    # Sizes 1, 2, 4, ... 64: 7 (without the padding, 40 per statement).
    statements = {re.sub(r" IN \((?:[^()]|\([^()]*\))*\)", " IN (...)", text) for text in texts}
    assert statements and len(texts) <= 7 * len(statements), sorted(texts)
