"""cloudseed's own guest source for the guest store (guest_sources.py's ``GuestSource``):
guests loaded from the cells (loading.py), their changes heard from the cells' change feed
(feed.py) and, at once, from the committing process's announcer (``GUEST_CHANGES``), and the
guests that began to boot handed over to be loaded ahead."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from cloudseed.cells.service import CellDatabases
from cloudseed.db.notify import GUEST_CHANGES
from cloudseed.metadata.documents import GuestDocuments
from cloudseed.metadata.feed import ChangeFeed
from cloudseed.metadata.loading import Key, load_guests
from cloudseed.metadata.stats import NO_STATS, StoreStats


class CellGuests:
    """cloudseed's guests: loaded from its cells, changes heard from the cells' change feed
    and from this process's announcer."""

    def __init__(
        self,
        cells: CellDatabases,
        *,
        dhcp_domain: str,
        poll_interval: float,
        fallback_interval: float | None = None,
        ahead_seconds: float = 0.0,
        stats: StoreStats = NO_STATS,
    ) -> None:
        """``poll_interval``, ``fallback_interval``: when the change feed is read (feed.py);
        ``ahead_seconds``: guests that began to boot this recently are loaded ahead, at start
        and as the feed tells of them (0: none, each loads at its first request)."""
        self.cells = cells
        self.dhcp_domain = dhcp_domain
        self._poll_interval = poll_interval
        self._fallback_interval = fallback_interval
        self._ahead_seconds = ahead_seconds
        self._stats = stats
        self._feed: ChangeFeed | None = None
        self._unsubscribe: Callable[[], None] | None = None

    def load(self, keys: list[Key], *, ahead: bool = False) -> dict[Key, GuestDocuments | None]:
        return load_guests(self.cells, keys, dhcp_domain=self.dhcp_domain)

    async def start(
        self,
        *,
        changed: Callable[[str], None],
        heard: Callable[[Iterable[str]], None],
        failed: Callable[[], None],
        ahead: Callable[[list[str]], None],
    ) -> None:
        # Loaded ahead: the guests the feed says began to boot (the compute agent writes that
        # as a build, rebuild, reboot or start finishes), whose first requests come next.
        self._feed = ChangeFeed(
            self.cells,
            changed=changed,
            failed=failed,
            poll_interval=self._poll_interval,
            fallback_interval=self._fallback_interval,
            ahead=ahead if self._ahead_seconds > 0 else None,
            ahead_seconds=self._ahead_seconds,
            stats=self._stats,
        )
        await self._feed.start()

        # Called in the thread that committed, before that thread's caller resumes, so before
        # the change's own answer (a DELETE's 204) is sent.
        self._unsubscribe = self.cells.api_db.announcer.subscribe(GUEST_CHANGES, heard)

    async def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        if self._feed is not None:
            await self._feed.stop()

    async def close(self) -> None:
        if self._feed is not None:
            await self._feed.close()
