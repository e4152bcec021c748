"""One cached guest: its facts and the documents rendered from them, meta_data.json and the
authorized keys each rendered at most once (per change of the instance, since a change
replaces the whole object, and per expiry of one of its keys, which replaces it too: ``at``);
network_data.json at each ask.

``generation`` is the instance record's (``instances.generation``, bumped by every change a
guest could see): the same in every worker, so the documents' ETags (etags.py) are too;
``version`` adds how many keys are still served, as an expiry changes the documents without
a new generation."""

from __future__ import annotations

from cloudseed.metadata import render
from cloudseed.metadata import versions as v
from cloudseed.metadata.facts import GuestFacts, shared


class GuestDocuments:
    __slots__ = (
        "_keys",
        "_meta",
        "_meta_variant",
        "_other_meta",
        "_second_meta",
        "_second_variant",
        "dhcp_domain",
        "facts",
        "generation",
        "marked",
    )

    def __init__(
        self,
        facts: GuestFacts,
        dhcp_domain: str,
        *,
        marked: int | None = None,
        generation: int = 0,
    ) -> None:
        self.facts = facts
        self.dhcp_domain = dhcp_domain
        self.generation = generation
        # Rendered on first use. Most guests only ever ask for one version or two (a guest
        # loaded ahead has both of versions.FIRST_ASKED made): each is held on its own, and a
        # dict (some 200 bytes a guest) only made for the others.
        self._meta_variant: str | None = None
        self._meta: render.SeededJSON | None = None
        self._second_variant: str | None = None
        self._second_meta: render.SeededJSON | None = None
        self._other_meta: dict[str, render.SeededJSON] | None = None
        self._keys: bytes | None = None
        # The key generation this worker knows the guest holds, or is recording that it does
        # (metadata/delivery.py): nothing is written for it again.
        self.marked = facts.keys_applied_generation if marked is None else marked

    def at(self, now: float) -> GuestDocuments:
        """This guest at POSIX time ``now``: itself, or, once a key it serves has expired, a
        new object without that key (documents rendered afresh)."""
        facts = self.facts.at(now)
        if facts is self.facts:
            return self
        return GuestDocuments(
            facts, self.dhcp_domain, marked=self.marked, generation=self.generation
        )

    # What the store (store.py) knows a cached guest by.
    @property
    def uuid(self) -> str:
        return self.facts.uuid

    @property
    def addresses(self) -> tuple[str, ...]:
        return self.facts.addresses

    @property
    def refresh_at(self) -> float | None:
        return self.facts.keys_refresh_at

    @property
    def version(self) -> str:
        """What the documents' ETags are derived from: the record's generation and, since keys
        only ever leave a generation's documents by expiring, how many are left."""
        return f"{self.generation}.{len(self.facts.keys)}"

    def meta_data(self, version: str) -> render.SeededJSON:
        variant = render.meta_data_variant(version, self.facts)
        if variant == self._meta_variant and self._meta is not None:
            return self._meta
        if variant == self._second_variant and self._second_meta is not None:
            return self._second_meta
        if self._other_meta is not None and variant in self._other_meta:
            return self._other_meta[variant]
        doc = render.meta_data(self.facts, variant, dhcp_domain=self.dhcp_domain)
        # One copy of what most guests have in common: the metadata items and keys (cut out
        # by render.meta_data), and what follows the seed. Not the rest, which names the
        # guest: a copy of it shared with nobody would only take a place in the table.
        head, tail = doc.head, doc.tail
        if self._meta is not None:
            # Versions differ in their last members only: one copy of what they share.
            if head == self._meta.head:
                head = self._meta.head
            if tail == self._meta.tail:
                tail = self._meta.tail
        doc = render.SeededJSON(
            head,
            shared(doc.alike),
            tail,
            None if doc.suffix is None else shared(doc.suffix),
        )
        if self._meta is None:
            self._meta_variant, self._meta = variant, doc
        elif self._second_meta is None:
            self._second_variant, self._second_meta = variant, doc
        else:
            if self._other_meta is None:
                self._other_meta = {}
            self._other_meta[variant] = doc
        return doc

    def prepare(self) -> None:
        """Render what cloud-init asks first and this object keeps (meta_data.json at the
        versions it asks first): for a guest loaded ahead of its boot, in the loading thread,
        so that its first requests in a boot storm find them made."""
        for version in v.FIRST_ASKED:
            self.meta_data(version)

    def network_data(self) -> bytes:
        # Not kept: most guests ask for it once a boot, and the copy cost 570 bytes a guest
        # (a replay keeps the answer of one asked again and again).
        return render.network_data(self.facts)

    def authorized_keys(self) -> bytes:
        if self._keys is None:
            self._keys = render.authorized_keys(self.facts)
        return self._keys
