"""Who is asking, and whether they may: the guest a caller's claim names (identify.py makes
the claim from the request), found in the worker's cache or loaded by the store, and held to
the claim; session tokens (tokens.py) issued to that guest and checked, a request without one
counted in the token-less access audit. The metadata app's two paths, the ASGI one and the
answers written at once, ask the same questions here."""

from __future__ import annotations

from cloudseed.errors import InvalidInput
from cloudseed.metadata.access_audit import AccessAudit, document_of
from cloudseed.metadata.answers import Answer
from cloudseed.metadata.documents import GuestDocuments
from cloudseed.metadata.errors import EndpointDisabled, TokenRequired, UnknownCaller
from cloudseed.metadata.identify import ByInstance, ByProvider, Claim, Identifier
from cloudseed.metadata.store import GuestStore
from cloudseed.metadata.tokens import TOKEN_HEADER, TTL_HEADER, Tokens

Headers = list[tuple[bytes, bytes]]


class Callers:
    def __init__(
        self, store: GuestStore[GuestDocuments], tokens: Tokens, *, require_token: bool
    ) -> None:
        self.store = store
        self.tokens = tokens
        self.require_token = require_token

    async def guest(self, claim: Claim) -> GuestDocuments:
        """The guest ``claim`` names, loaded if it is not cached."""
        if isinstance(claim, ByInstance):
            guest = await self.store.by_uuid(claim.instance_id)
        else:
            guest = await self.store.by_address(claim.address)
        return self.claimed(claim, guest)

    def cached_guest(self, claim: Claim) -> GuestDocuments | None:
        """``guest`` from the cache alone: None when the guest is not cached."""
        if isinstance(claim, ByInstance):
            guest = self.store.cached_by_uuid(claim.instance_id)
        else:
            guest = self.store.cached_by_address(claim.address)
        return None if guest is None else self.claimed(claim, guest)

    def cached_endpoint_disabled(
        self, identifier: Identifier, peer: str | None, headers: Headers
    ) -> bool:
        """Whether the caller of "/" is a cached guest whose metadata endpoint is off. "/" is
        the static list of versions, answered as Nova answers it, without looking the caller
        up (health checks ask it): only a guest already cached is refused it."""
        try:
            self.cached_guest(identifier.claim(peer, headers))
        except EndpointDisabled:
            return True
        except Exception:
            return False
        return False

    @staticmethod
    def claimed(claim: Claim, guest: GuestDocuments | None) -> GuestDocuments:
        """``guest`` (found for ``claim``) if the claim holds for it and its metadata
        endpoint is on (2.109's ``http_endpoint``: EndpointDisabled, 403, otherwise)."""
        if isinstance(claim, ByInstance):
            if guest is None:
                raise UnknownCaller(f"no instance {claim.instance_id}")
            if guest.facts.project_id != claim.tenant_id:
                raise UnknownCaller(f"tenant {claim.tenant_id} does not own {claim.instance_id}")
            if guest.facts.endpoint_disabled:
                raise EndpointDisabled()
            return guest
        if guest is None:
            raise UnknownCaller(f"no instance has address {claim.address}")
        if isinstance(claim, ByProvider) and not any(
            claim.address in p.addresses and claim.provider == p.network_id
            for p in guest.facts.ports
        ):
            raise InvalidInput(
                f"Expected a single port matching provider {claim.provider} "
                f"and IP {claim.address}. Found 0."
            )
        if guest.facts.endpoint_disabled:
            raise EndpointDisabled()
        return guest

    def issue_token(self, guest: GuestDocuments, headers: Headers) -> Answer:
        ttl_header = None
        for name, value in headers:
            if name == TTL_HEADER:
                ttl_header = value
        token, ttl = self.tokens.issue(guest.facts.uuid, ttl_header)
        return Answer(200, token.encode(), headers=((TTL_HEADER, str(ttl).encode()),))

    def check_token(
        self, guest: GuestDocuments, headers: Headers, *, required: bool = False
    ) -> bool:
        """Whether the request carried a session token (checked: TokenRequired, 401, for a bad
        one); False for a request without one that may go on (the token-less audit counts
        it). Without one where one is needed (``required``, the server's http_tokens, the
        cloud's require_token): TokenRequired (401)."""
        for name, value in headers:
            if name == TOKEN_HEADER:
                self.tokens.check(guest.facts.uuid, value)
                return True
        if required or guest.facts.requires_token(self.require_token):
            raise TokenRequired()
        return False

    def check_token_audited(
        self,
        guest: GuestDocuments,
        headers: Headers,
        kind: str,
        method: str,
        access: AccessAudit,
        *,
        required: bool = False,
    ) -> None:
        """``check_token``, counting a request without a token in the ``access`` audit,
        whether it goes on or is refused (401) for want of one."""
        try:
            with_token = self.check_token(guest, headers, required=required)
        except TokenRequired:
            if not has_token(headers):
                access.counted(guest.facts, document_of(kind, method))
            raise
        if not with_token:
            access.counted(guest.facts, document_of(kind, method))


def has_token(headers: Headers) -> bool:
    """Whether a request names a session token at all (valid or not)."""
    return any(name == TOKEN_HEADER for name, _ in headers)
