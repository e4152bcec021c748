"""The availability zone a server is pinned to: Nova's request spec ``availability_zone``, the
zone its create asked for (or ``[DEFAULT] default_schedule_zone``), which move operations keep
to in Nova. Shown as ``pinned_availability_zone`` from 2.96; ``PUT /servers/{id}`` unpins or
re-pins it from 2.104. Kept in the instance's system metadata (absent: not pinned). IO-free.
"""

from __future__ import annotations

from cloudseed.servers.errors import NotCurrentZone, PinnedZoneChange

# The system metadata key; its value is the zone's name.
PINNED_AZ = "pinned_availability_zone"


def current_zone(instance_zone: str | None) -> str:
    """The zone a server is in, as ``OS-EXT-AZ:availability_zone`` shows it: its host's,
    recorded when it was placed ("nova" for servers from before cloudseed recorded it)."""
    return instance_zone or "nova"


def repinned(pinned: str | None, requested: str | None, *, current: str) -> str | None:
    """The pin after 2.104's update asks for ``requested``, by Nova's rules: null unpins (also
    when not pinned); a zone re-pins only to the server's current one, and a pinned server must
    be unpinned before it is pinned elsewhere (409 otherwise); the same pin again is a no-op.
    A zone that does not exist is not the server's, so it is the same 409."""
    if requested is None:
        return None
    if pinned is not None:
        if requested != pinned:
            raise PinnedZoneChange()
        return pinned
    if requested != current:
        raise NotCurrentZone(current=current, requested=requested)
    return requested
