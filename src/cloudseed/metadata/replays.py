"""Which answers at once the listener may replay (``cloudseed/replay.py``), and how each is
checked and counted again: the metadata app's side of replays."""

from __future__ import annotations

from cloudseed.metadata import tree
from cloudseed.metadata.access_audit import AccessAudit, document_of
from cloudseed.metadata.callers import Callers
from cloudseed.metadata.documents import GuestDocuments
from cloudseed.metadata.identify import Claim
from cloudseed.replay import Replayable
from cloudseed.vendordata import Vendordata

# What a replay may answer again (replay.py): documents that are a function of the guest
# alone, the same bytes until it changes (meta_data.json with its random seed made afresh at
# each replay: a Hole), and vendor_data2.json without dynamic targets (also while the
# StaticJSON file, reloaded when it changes, is the same). Not vendor_data.json, the password
# (set by the guest), events (2.111, they come and go), the EC2 tree of a guest with events,
# or "/" (answered without identifying the caller).
REPLAYABLE = frozenset(
    {
        tree.META_DATA,
        tree.VENDOR_DATA2,
        tree.OPENSTACK_INDEX,
        tree.OPENSTACK_VERSION,
        tree.USER_DATA,
        tree.NETWORK_DATA,
        tree.EC2_INDEX_IDENTIFIED,
        tree.EC2_VERSION,
        tree.EC2_USER_DATA,
        tree.EC2_META_DATA,
    }
)


def shared_vendordata(target: tree.Target, vendordata: Vendordata | None) -> bytes | None:
    """For vendor_data2.json, the shared document as it is before the answer is made: a
    reload of the StaticJSON file in between leaves a replay that its first check finds
    stale, never one checked against the newer file."""
    if target.kind != tree.VENDOR_DATA2 or vendordata is None:
        return None
    return vendordata.static_only_vendor_data2()


def replayable(
    claim: Claim,
    guest: GuestDocuments,
    target: tree.Target,
    shared: bytes | None,
    *,
    callers: Callers,
    access: AccessAudit | None,
    vendordata: Vendordata | None,
) -> Replayable | None:
    """How the answer to ``claim`` for ``target`` from ``guest`` (asked without a session
    token) is replayed, or None if it may not be: valid while the claim still names this
    very guest object in the worker's cache (a change, a reload, an eviction or an expiry
    makes another) and, for vendor_data2.json, ``shared`` is still the shared document (the
    same object until the file changes); counted as answering it counts (the cache hit, the
    token-less access audit)."""
    kind = target.kind
    if kind not in REPLAYABLE or (kind == tree.EC2_META_DATA and guest.facts.events):
        return None
    if access is None or (kind == tree.VENDOR_DATA2 and (shared is None or vendordata is None)):
        return None
    facts, document, hit = guest.facts, document_of(kind, "GET"), callers.store.stats.hit
    shared_now = vendordata.static_only_vendor_data2 if vendordata is not None else None

    def still_valid() -> bool:
        if shared_now is not None and shared is not None and shared_now() is not shared:
            return False
        return callers.cached_guest(claim) is guest

    def counted() -> None:
        access.counted(facts, document)
        hit()

    hole = guest.meta_data(target.version).seed_hole() if kind == tree.META_DATA else None
    return Replayable(facts.uuid, still_valid, counted, hole)
