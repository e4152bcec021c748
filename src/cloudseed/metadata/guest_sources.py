"""What the guest store (store.py) needs of the guests it holds (``Cached``) and of where they
come from (``GuestSource``): cloudseed's own cells (cell_guests.py) or Nova's databases
(``nova_metadata/guests.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol, Self, TypeVar

from cloudseed.metadata.loading import Key


class Cached(Protocol):
    """What the store needs of a guest it holds."""

    @property
    def uuid(self) -> str: ...

    @property
    def addresses(self) -> tuple[str, ...]: ...

    @property
    def refresh_at(self) -> float | None:
        """When (POSIX time) ``at`` would give another object; None: never."""

    def at(self, now: float) -> Self: ...

    def prepare(self) -> None:
        """Make what the guest's first requests ask (a guest loaded ahead, in the loading
        thread, before any request can see it)."""


G = TypeVar("G", bound=Cached)


class GuestSource(Protocol[G]):
    """Where a store's guests come from, and how it hears that one changed."""

    def load(self, keys: list[Key], *, ahead: bool = False) -> dict[Key, G | None]:
        """Every key's guest, or None where no live instance answers to it (runs in a
        worker thread). ``ahead``: nobody has asked for these yet (loaded ahead), so a
        source may leave out what it could only load by writing, and may prepare what
        guests ask first."""

    async def start(
        self,
        *,
        changed: Callable[[str], None],
        heard: Callable[[Iterable[str]], None],
        failed: Callable[[], None],
        ahead: Callable[[list[str]], None],
    ) -> None:
        """Begin telling the store, on its loop, of each changed instance (``changed``), of
        changes that may have been missed (``failed``), and of instances whose guests are
        likely to ask soon (``ahead``, which the store loads when quiet). ``heard`` may be
        called from any thread (a commit's announcement in the committing thread): the
        store applies it before its next lookup."""

    async def stop(self) -> None:
        """Tell nothing more (the store's loads may still be finishing)."""

    async def close(self) -> None:
        """After ``stop`` and the last load: release what ``start`` took."""
