"""One cached Nova instance: its facts, the documents rendered from them (each at most once
per change of the instance, since a change replaces the whole object), and its security
groups from Neutron, kept as long as Nova keeps them (``[api] metadata_cache_expiration``).

``NovaGuests`` is the guest store's source (metadata/guest_sources.py ``GuestSource``): it loads
instances from Nova's databases (loading.py) and hears their changes (changes.py). The
instances the watch reports changed (Nova building one writes its row several times, seconds
before its guest boots) and, at start, those updated in the last ``[cloudseed_metadata]
load_recent_seconds``, are handed to the store to load ahead; a guest loaded ahead has the
documents its cloud-init asks first already made (ahead.py), so its first request is a hit.
So are the other active instances of a host whose guests have begun to miss together (a host
that rebooted: hosts.py). Every reported change also forgets the instance's cached cell
mapping (mappings.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from sqlalchemy.exc import InterfaceError, OperationalError

from cloudseed.errors import DatabaseUnavailable
from cloudseed.metadata.loading import Key
from cloudseed.metadata.render import SeededJSON
from cloudseed.nova_metadata import ahead, render
from cloudseed.nova_metadata.changes import NovaChanges
from cloudseed.nova_metadata.facts import InstanceFacts
from cloudseed.nova_metadata.hosts import HostBoots
from cloudseed.nova_metadata.loading import Loader

T = TypeVar("T")
log = logging.getLogger(__name__)


class NovaGuest:
    __slots__ = (
        "_documents",
        "_groups",
        "_groups_until",
        "_meta",
        "dhcp_domain",
        "facts",
        "network_template",
    )

    def __init__(
        self, facts: InstanceFacts, dhcp_domain: str, *, network_template: bool = False
    ) -> None:
        self.facts = facts
        self.dhcp_domain = dhcp_domain
        self.network_template = network_template  # render.meta_data's network_config
        self._meta: dict[str, SeededJSON] = {}
        self._documents: dict[object, Any] = {}
        self._groups: tuple[str, ...] | None = None
        self._groups_until = 0.0

    # What the store knows a cached guest by.
    @property
    def uuid(self) -> str:
        return self.facts.uuid

    @property
    def addresses(self) -> tuple[str, ...]:
        return self.facts.fixed_addresses

    @property
    def refresh_at(self) -> float | None:
        return None  # nothing of it expires on its own (security groups are asked anew)

    def at(self, now: float) -> NovaGuest:
        return self

    @property
    def version(self) -> str:
        return self.facts.version

    def meta_data(self, version: str) -> SeededJSON:
        variant = render.meta_data_variant(version)
        doc = self._meta.get(variant)
        if doc is None:
            doc = self._meta[variant] = render.meta_data(
                self.facts,
                variant,
                dhcp_domain=self.dhcp_domain,
                network_template=self.network_template,
            )
        return doc

    def document(self, key: object, make: Callable[[], T]) -> T:
        """The document known by ``key``, made by ``make`` the first time (what ``make``
        raises is raised again each time: not remembered)."""
        body: T | None = self._documents.get(key)
        if body is None:
            body = self._documents[key] = make()
        return body

    def prepare(self) -> None:
        """Make the documents cloud-init asks first (ahead.py), before the guest is shared:
        in the thread that loaded it, while no request can see it yet."""
        for version in ahead.meta_data_versions():
            self.meta_data(version)
        for target, document in ahead.documents(self.facts, self.dhcp_domain):
            self._documents.setdefault(target, document)

    def security_groups(self, now: float) -> tuple[str, ...] | None:
        """The names last read from Neutron, while they are fresh; None: ask again."""
        return self._groups if now < self._groups_until else None

    def remember_security_groups(self, names: tuple[str, ...], ttl: float) -> None:
        self._groups, self._groups_until = names, time.monotonic() + ttl


class NovaGuests:
    """Where the store's guests come from: Nova's databases, watched for changes."""

    def __init__(
        self,
        loader: Loader,
        changes: NovaChanges,
        *,
        dhcp_domain: str,
        network_template: bool = False,
        boots: HostBoots | None = None,
    ) -> None:
        self.loader = loader
        self.changes = changes
        self.dhcp_domain = dhcp_domain
        self.network_template = network_template
        self.boots = boots if boots is not None else HostBoots(0)
        # The store's load_ahead, called on its loop from the loading thread (start()).
        self._wake: Callable[[list[str]], None] | None = None

    def load(self, keys: list[Key], *, ahead: bool = False) -> dict[Key, NovaGuest | None]:
        try:
            found = self.loader.load(keys, ahead=ahead)
        except (OperationalError, InterfaceError) as exc:
            # A database that does not answer, whatever its driver's words for it: 503,
            # and the next load tries again (the pool pre-pings its connections).
            log.warning("loading instances failed: %s", str(exc.orig).splitlines()[0])
            raise DatabaseUnavailable() from exc
        guests: dict[str, NovaGuest] = {}  # one object per instance, whatever its keys
        result: dict[Key, NovaGuest | None] = {}
        for key, facts in found.items():
            if facts is None:
                result[key] = None
                continue
            guest = guests.get(facts.uuid)
            if guest is None:
                guest = guests[facts.uuid] = NovaGuest(
                    facts, self.dhcp_domain, network_template=self.network_template
                )
                if not ahead and self.boots.missed(facts.host, facts.uuid):
                    self._wake_host(facts)
            result[key] = guest
        return result

    def _wake_host(self, facts: InstanceFacts) -> None:
        """Hand ``facts``' host's other active instances to the store to load ahead."""
        wake = self._wake
        if wake is None:
            return
        try:
            uuids = self.loader.host_instances(facts)
        except (OperationalError, InterfaceError) as exc:
            log.warning("reading the instances of host %s failed: %s", facts.host, exc.orig)
            return
        if uuids:
            log.info("host %s is booting its guests: loading %d ahead", facts.host, len(uuids))
            wake(uuids)

    async def start(
        self,
        *,
        changed: Callable[[str], None],
        heard: Callable[[Iterable[str]], None],
        failed: Callable[[], None],
        ahead: Callable[[list[str]], None],
    ) -> None:
        # ``heard`` stays unused: Nova's commits happen in Nova's processes, read by polling.
        mappings = self.loader.mappings
        loop = asyncio.get_running_loop()

        def wake(uuids: list[str]) -> None:
            loop.call_soon_threadsafe(ahead, uuids)

        self._wake = wake

        def forgotten(uuid: str) -> None:
            mappings.forget((uuid,))
            changed(uuid)

        def missed() -> None:
            mappings.forget_all()
            failed()

        await self.changes.start(changed=forgotten, failed=missed, ahead=ahead)

    async def stop(self) -> None:
        await self.changes.stop()

    async def close(self) -> None:
        await self.changes.close()
