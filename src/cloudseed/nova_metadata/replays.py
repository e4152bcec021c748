"""Which of the drop-in's answers at once the listener may replay (``cloudseed/replay.py``),
and how each is checked and counted again: the drop-in's side of replays, as
``metadata/replays.py`` is cloudseed's own app's.

What may be kept: a document drawn from the instance alone (``render.cacheable``: the same
bytes until the instance changes), meta_data.json with its random seed made afresh at each
replay (a ``Hole``), vendor_data.json and vendor_data2.json while the shared
StaticJSON document they are made from is the same object (it is replaced when the file
changes; no DynamicJSON target), and ``/openstack`` until the UTC day ends (Nova hides a
version dated later than today). Not the password (the guest sets it), what shows the
security groups (asked of Neutron, kept for a while) or the caller's address, signed
identity, or ``/`` (answered without identifying the caller).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable

from cloudseed.metadata.identify import Claim
from cloudseed.nova_metadata import paths, render
from cloudseed.nova_metadata.callers import NovaCallers
from cloudseed.nova_metadata.guests import NovaGuest
from cloudseed.replay import Replayable
from cloudseed.vendordata import Vendordata

_SHARED = (paths.VENDOR_DATA, paths.VENDOR_DATA2)


def shared_vendordata(target: paths.Target, vendordata: Vendordata | None) -> bytes | None:
    """For vendor_data.json and vendor_data2.json, the shared document as it is before the
    answer is made: a reload of the StaticJSON file in between leaves a replay that its first
    check finds stale, never one checked against the newer file."""
    if vendordata is None or target.kind != paths.OPENSTACK or target.rest[0] not in _SHARED:
        return None
    return _shared_now(target, vendordata)()


def replayable(
    claim: Claim,
    guest: NovaGuest,
    target: paths.Target,
    shared: bytes | None,
    *,
    callers: NovaCallers,
    vendordata: Vendordata | None,
) -> Replayable | None:
    """How the answer to ``claim`` for ``target`` from ``guest`` (asked without a session
    token) is replayed, or None if it may not be: valid while the claim still names this very
    guest object in the worker's cache (a change, a reload or an eviction makes another), the
    shared vendordata document is still ``shared`` and, for ``/openstack``, the UTC day is
    the same; counted as a cache hit, as answering it is."""
    facts = guest.facts
    checks: list[Callable[[], bool]] = []
    hole = None
    if target.kind == paths.OPENSTACK and target.rest[0] == paths.META_DATA:
        hole = guest.meta_data(target.version).seed_hole()
    elif target.kind == paths.OPENSTACK_VERSIONS:
        checks.append(_until_the_day_ends())
    elif target.kind == paths.OPENSTACK and target.rest[0] in _SHARED:
        if shared is None or vendordata is None:
            return None
        shared_now = _shared_now(target, vendordata)
        checks.append(lambda: shared_now() is shared)
    elif not render.cacheable(facts, target) or _is_password(target):
        return None

    def still_valid() -> bool:
        return all(check() for check in checks) and callers.cached(claim) is guest

    return Replayable(facts.uuid, still_valid, callers.store.stats.hit, hole)


def _is_password(target: paths.Target) -> bool:
    return target.kind == paths.OPENSTACK and target.rest[0] == paths.PASSWORD


def _shared_now(target: paths.Target, vendordata: Vendordata) -> Callable[[], bytes | None]:
    if target.rest[0] == paths.VENDOR_DATA:
        return lambda: vendordata.vendor_data_json
    return vendordata.static_only_vendor_data2


def _until_the_day_ends() -> Callable[[], bool]:
    now = dt.datetime.now(dt.UTC)
    midnight = dt.datetime.combine(now.date() + dt.timedelta(days=1), dt.time(), dt.UTC)
    ends = midnight.timestamp()
    return lambda: time.time() < ends
