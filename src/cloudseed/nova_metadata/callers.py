"""Who is asking the drop-in, and whether they may: the instance a caller's claim names
(metadata/identify.py makes the claim from the request, as Nova's handler reads it), found in
the worker's cache or loaded by the store, and held to the claim (Nova: an instance of another
tenant is a 404); an ``X-Metadata-Provider``'s caller resolved through Neutron, as Nova
resolves it; session tokens issued to that instance and checked. The app's two paths, the
ASGI one and the answers written at once, ask the same questions here.
"""

from __future__ import annotations

import asyncio
import time

from cloudseed.metadata.answers import Answer
from cloudseed.metadata.errors import TokenRequired, UnknownCaller
from cloudseed.metadata.identify import ByInstance, ByProvider, Claim
from cloudseed.metadata.store import GuestStore
from cloudseed.metadata.tokens import TOKEN_HEADER, TTL_HEADER, Tokens
from cloudseed.nova_metadata.guests import NovaGuest
from cloudseed.nova_metadata.neutron import Neutron

Headers = list[tuple[bytes, bytes]]
PROVIDERS_MAX = 65536  # provider answers kept at most (emptied when full)


class NovaCallers:
    def __init__(
        self,
        store: GuestStore[NovaGuest],
        neutron: Neutron,
        tokens: Tokens,
        *,
        require_token: bool,
        provider_ttl: float,
    ) -> None:
        self.store = store
        self.neutron = neutron
        self.tokens = tokens
        self.require_token = require_token
        self.provider_ttl = provider_ttl  # [api] metadata_cache_expiration, as Nova keeps them
        # (provider, address) -> (instance, tenant, until): X-Metadata-Provider's answers.
        self._providers: dict[tuple[str, str], tuple[str, str, float]] = {}

    async def guest(self, claim: Claim) -> NovaGuest:
        """The instance ``claim`` names, loaded if it is not cached."""
        if isinstance(claim, ByProvider):
            uuid, tenant = await self._provider_port(claim)
            claim = ByInstance(uuid, tenant, claim.address)
        if isinstance(claim, ByInstance):
            guest = await self.store.by_uuid(claim.instance_id)
        else:
            guest = await self.store.by_address(claim.address)
        return held_to(claim, guest)

    def cached(self, claim: Claim) -> NovaGuest | None:
        """``guest`` from the cache alone: None when it is not cached (or takes Neutron)."""
        if isinstance(claim, ByInstance):
            guest = self.store.cached_by_uuid(claim.instance_id)
        elif isinstance(claim, ByProvider):
            return None
        else:
            guest = self.store.cached_by_address(claim.address)
        return None if guest is None else held_to(claim, guest)

    async def _provider_port(self, claim: ByProvider) -> tuple[str, str]:
        """(instance, tenant) of a provider's caller, asked of Neutron and kept as long as
        Nova keeps it (``[api] metadata_cache_expiration``)."""
        key = (claim.provider, claim.address)
        now = time.monotonic()
        known = self._providers.get(key)
        if known is not None and now < known[2]:
            return known[0], known[1]
        uuid, tenant = await asyncio.to_thread(
            self.neutron.instance_of_provider, claim.provider, claim.address
        )
        if self.provider_ttl > 0:
            if len(self._providers) >= PROVIDERS_MAX:
                self._providers.clear()
            self._providers[key] = (uuid, tenant, now + self.provider_ttl)
        return uuid, tenant

    def check_token(self, guest: NovaGuest, headers: Headers, *, required: bool = False) -> bool:
        """A session token, if one came, must be this instance's (True: one came); without
        one, 401 where tokens are required (``required``: by the document, whatever the
        settings say)."""
        for name, value in headers:
            if name == TOKEN_HEADER:
                self.tokens.check(guest.uuid, value)
                return True
        if required or self.require_token or guest.facts.tokens_required:
            raise TokenRequired()
        return False

    def issue_token(self, guest: NovaGuest, headers: Headers) -> Answer:
        ttl_header = next((value for name, value in headers if name == TTL_HEADER), None)
        token, ttl = self.tokens.issue(guest.uuid, ttl_header)
        return Answer(200, token.encode(), headers=((TTL_HEADER, str(ttl).encode()),))


def held_to(claim: Claim, guest: NovaGuest | None) -> NovaGuest:
    """``guest`` if the claim holds for it (Nova: an instance of another tenant is a 404)."""
    if guest is None:
        raise UnknownCaller(f"no instance for {claim}")
    if isinstance(claim, ByInstance) and guest.facts.project_id != claim.tenant_id:
        raise UnknownCaller(f"tenant {claim.tenant_id} does not own {claim.instance_id}")
    return guest
