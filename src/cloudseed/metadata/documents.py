"""One cached guest: its facts and the documents rendered from them, each rendered at most
once (per change of the instance, since a change replaces the whole object).

``generation`` is the instance record's (``instances.generation``, bumped by every change a
guest could see): the same in every worker, so the documents' ETags (etags.py) are too."""

from __future__ import annotations

from cloudseed.metadata import render
from cloudseed.metadata.facts import GuestFacts


class GuestDocuments:
    __slots__ = ("_meta", "_network", "dhcp_domain", "facts", "generation")

    def __init__(self, facts: GuestFacts, dhcp_domain: str, *, generation: int = 0) -> None:
        self.facts = facts
        self.dhcp_domain = dhcp_domain
        self.generation = generation
        # Rendered on first use: most guests only ever ask for one version.
        self._meta: dict[str, render.SeededJSON] | None = None
        self._network: bytes | None = None

    def meta_data(self, version: str) -> render.SeededJSON:
        variant = render.meta_data_variant(version)
        if self._meta is None:
            self._meta = {}
        doc = self._meta.get(variant)
        if doc is None:
            doc = render.meta_data(self.facts, variant, dhcp_domain=self.dhcp_domain)
            self._meta[variant] = doc
        return doc

    def network_data(self) -> bytes:
        if self._network is None:
            self._network = render.network_data(self.facts)
        return self._network
