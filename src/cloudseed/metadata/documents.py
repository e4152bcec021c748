"""One cached guest: its facts and the documents rendered from them, each rendered at most
once (per change of the instance, since a change replaces the whole object)."""

from __future__ import annotations

from cloudseed.metadata import render
from cloudseed.metadata.facts import GuestFacts


class GuestDocuments:
    __slots__ = ("_meta", "_network", "dhcp_domain", "facts")

    def __init__(self, facts: GuestFacts, dhcp_domain: str) -> None:
        self.facts = facts
        self.dhcp_domain = dhcp_domain
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
