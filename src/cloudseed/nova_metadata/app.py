"""The drop-in's ASGI app: Nova's metadata API on cloudseed's metadata listener.

A request goes as in Nova's handler (nova/api/metadata/handler.py): ``/`` is answered without
asking who calls; any other path first identifies the caller (the proxy's signed
X-Instance-ID, X-Metadata-Provider resolved through Neutron, or the source address resolved
through Neutron in direct mode: 400, 403 and 404 as Nova answers them), then the path is read
(404 where Nova finds nothing). Instances come from the guest store (metadata/store.py, a
dict hit once cached, dropped within a poll when Nova changes them), documents from
render.py, each rendered at most once per change of the instance.

Why a second app beside ``metadata/app.py`` rather than that one with another guest source:
the two trees differ in what they are (Nova's paths, listings and quirks against cloudseed's
live keys, identity documents, phone_home and authorized_keys), so they share what does not
depend on the documents (the listener and its answer-at-once path, the store, identification,
session tokens, ETags, long-polls, refusals, vendordata) and each keeps its own tree and
renderer. cloudseed's additions kept here: session tokens (PUT /latest/api/token), ETags with
If-None-Match, ``wait_for_change`` long-polls on the OpenStack tree, metrics. Left out: what
needs cloudseed's own records (live keys, signed identity, phone_home, history).
"""

from __future__ import annotations

import asyncio
import logging
import posixpath
import time
from typing import TYPE_CHECKING

from cloudseed.coalescing import AnswersAtOnce, AtOnce
from cloudseed.db.engines import Database
from cloudseed.errors import CloudseedError, InvalidInput
from cloudseed.metadata import asgi, changes, etags
from cloudseed.metadata.answers import Answer, at_once
from cloudseed.metadata.errors import NoSuchDocument, TokenRefused, TokenRequired, UnknownCaller
from cloudseed.metadata.freshness import Freshness
from cloudseed.metadata.identify import ByInstance, ByProvider, Claim, Identifier
from cloudseed.metadata.store import GuestStore
from cloudseed.metadata.tokens import TOKEN_HEADER, TTL_HEADER, Tokens
from cloudseed.nova_metadata import documents, paths, render
from cloudseed.nova_metadata.changes import NovaChanges
from cloudseed.nova_metadata.config import NovaMetadataConfig
from cloudseed.nova_metadata.databases import NovaDatabases
from cloudseed.nova_metadata.documents import NovaDocuments
from cloudseed.nova_metadata.guests import NovaGuest, NovaGuests
from cloudseed.nova_metadata.loading import Loader
from cloudseed.nova_metadata.mappings import InstanceMappings
from cloudseed.nova_metadata.neutron import Neutron
from cloudseed.nova_metadata.passwords import read_password, store_password
from cloudseed.servers.errors import PasswordAlreadySet
from cloudseed.types import Receive
from cloudseed.vendordata import Vendordata
from cloudseed.web.errors import MethodNotAllowed

if TYPE_CHECKING:
    from cloudseed.metadata.changes import Query

log = logging.getLogger(__name__)

PROVIDERS_MAX = 65536  # provider answers kept at most (emptied when full)
TOKEN_PATH = "/latest/api/token"
GET_HEAD = ("GET, HEAD", frozenset({"GET", "HEAD"}))
PASSWORD_METHODS = ("POST, GET, HEAD", frozenset({"POST", "GET", "HEAD"}))
# The OpenStack tree's documents a guest may long-poll (wait_for_change).
WAITABLE = frozenset(
    {
        paths.META_DATA,
        paths.USER_DATA,
        paths.PASSWORD,
        paths.NETWORK_DATA,
        paths.VENDOR_DATA,
        paths.VENDOR_DATA2,
        paths.LISTING,
    }
)


class NovaMetadataApp(asgi.MetadataASGI, AnswersAtOnce):
    what = "the Nova metadata service"

    def __init__(self, config: NovaMetadataConfig) -> None:
        self.config = config
        settings = config.settings
        self.dhcp_domain = settings.api.dhcp_domain
        self.identifier = Identifier(settings)
        self.tokens = Tokens(settings.metadata.token_secret)
        self.require_token = settings.metadata.require_token
        self.log_every_request = settings.metadata.access_log
        self.tagger = etags.Tagger(
            etags.fingerprint("nova", self.dhcp_domain, settings.api.vendordata_providers)
        )
        m = settings.metadata
        self.waiters = changes.Waiters(per_instance=m.max_waiters_per_instance, total=m.max_waiters)
        self.databases: NovaDatabases | None = None
        self.neutron: Neutron | None = None
        self.store: GuestStore[NovaGuest] | None = None
        self.changes: NovaChanges | None = None
        self.vendordata: Vendordata | None = None
        self.documents: NovaDocuments | None = None
        # (provider, address) -> (instance, tenant, until): X-Metadata-Provider's answers.
        self._providers: dict[tuple[str, str], tuple[str, str, float]] = {}

    async def startup(self) -> None:
        config = self.config
        databases = self.databases = NovaDatabases.open(
            config.api_database_url, config.database_url
        )
        local = config.local_metadata_per_cell
        await asyncio.to_thread(databases.check, local=local)
        neutron = self.neutron = Neutron(config.conf, retries=config.neutron_retries)
        vendordata = self.vendordata = Vendordata(config.settings, stats=self._target_stats)
        self.documents = NovaDocuments(
            dhcp_domain=self.dhcp_domain,
            vendordata=vendordata,
            neutron=neutron,
            security_groups_ttl=config.security_groups_ttl,
        )

        def watched() -> list[Database]:
            if local:
                return [databases.local()]
            return [cell.db for cell in databases.refresh_cells().values()]

        capacity = config.settings.metadata.cache_size
        self.changes = NovaChanges(
            watched,
            interval=config.change_poll_interval,
            recent=config.load_recent,
            recent_limit=capacity,
        )
        loader = Loader(
            databases,
            local=local,
            resolve=neutron.instance_of_address,
            mappings=InstanceMappings(size=capacity),
        )
        source = NovaGuests(loader, self.changes, dhcp_domain=self.dhcp_domain)
        self.store = GuestStore(source, capacity=capacity, stats=self._store_stats)
        self.store.watch(self.waiters.changed)
        await self.store.start()

    def drain(self) -> None:
        """The server is stopping (serve.py, on SIGTERM): long-polls answer now."""
        self.waiters.drain()

    async def shutdown(self) -> None:
        self.waiters.drain()
        if self.store is not None:
            await self.store.stop()
        if self.vendordata is not None:
            await self.vendordata.aclose()
        if self.databases is not None:
            self.databases.dispose()

    # -- answers written at once (coalescing.py) -----------------------------------------------

    def respond_now(
        self, method: str, path: str, peer: str | None, headers: list[tuple[bytes, bytes]]
    ) -> AtOnce | None:
        """A GET or HEAD of a cached guest's document that takes no IO, answered without an
        ASGI cycle; None for anything else (the ASGI path answers it, refusals included)."""
        if self.log_every_request or self.store is None:
            return None
        try:
            answer = self._answer_now(path, peer, headers)
        except Exception:
            return None
        return None if answer is None else at_once(answer, method)

    def _answer_now(
        self, path: str, peer: str | None, headers: list[tuple[bytes, bytes]]
    ) -> Answer | None:
        if paths.is_root(path):
            return self._conditional(
                self._tagged(Answer(200, render.EC2_VERSIONS), None, None), headers
            )
        target = paths.parse(path)
        if target is None:
            return None
        claim = self.identifier.claim(peer, headers)
        guest = self._cached(claim)
        if guest is None:
            return None
        self._check_token(guest, headers)
        answer = self._documents().now(target, guest, claim)
        if answer is None:
            return None
        assert self.store is not None
        self.store.stats.hit()  # here, once answered: a request left to the ASGI path counts there
        return self._conditional(
            self._tagged(answer, guest, (target, documents.address_part(guest, target, claim))),
            headers,
        )

    # -- one request ---------------------------------------------------------------------------

    async def answer(
        self,
        method: str,
        path: str,
        peer: str | None,
        headers: list[tuple[bytes, bytes]],
        receive: Receive,
        query: bytes = b"",
    ) -> Answer:
        if paths.is_root(path):
            _allowed(method, GET_HEAD)
            return self._conditional(
                self._tagged(Answer(200, render.EC2_VERSIONS), None, None), headers
            )
        target = paths.parse(path)
        if _normal(path) == TOKEN_PATH and method == "PUT":
            return await self._issue_token(peer, headers)
        is_password = (
            target is not None
            and target.kind == paths.OPENSTACK
            and target.rest == (paths.PASSWORD,)
        )
        _allowed(method, PASSWORD_METHODS if is_password else GET_HEAD)
        claim = self.identifier.claim(peer, headers)
        guest = await self._guest(claim)
        self._check_token(guest, headers)
        if target is None:
            raise NoSuchDocument("no such path")
        if method == "POST":
            return await self._post_password(guest, target, receive, headers)
        ask = self._query(target, query)

        async def current(guest: NovaGuest = guest) -> Answer:
            answer = await self._documents().fetch(target, guest, claim)
            return self._tagged(
                answer, guest, (target, documents.address_part(guest, target, claim))
            )

        if not ask.wait:
            return self._conditional(await current(), headers)
        latest = [guest]

        async def again() -> Answer:
            guest = latest[0] = await self._guest(claim)
            self._check_token(guest, headers)
            return await current(guest)

        found = await changes.long_poll(
            self.waiters,
            guest.uuid,
            ask,
            receive,
            current=again,
            tag_of=lambda answer: answer.etag,
            expiry=lambda: None,
        )
        return self._conditional(found, headers)

    def _query(self, target: paths.Target, query: bytes) -> Query:
        if not query or target.kind != paths.OPENSTACK or target.rest[0] not in WAITABLE:
            return changes.NO_QUERY
        m = self.config.settings.metadata
        ask = changes.parse_query(
            query, default_timeout=m.wait_timeout_sec, max_timeout=m.max_wait_timeout_sec
        )
        if ask.recursive:
            raise InvalidInput("recursive=true is not served by the Nova drop-in.")
        return ask

    def _documents(self) -> NovaDocuments:
        documents = self.documents
        assert documents is not None  # set at startup, before any request
        return documents

    # -- the caller ----------------------------------------------------------------------------

    async def _guest(self, claim: Claim) -> NovaGuest:
        store = self.store
        assert store is not None
        if isinstance(claim, ByProvider):
            uuid, tenant = await self._provider_port(claim)
            claim = ByInstance(uuid, tenant, claim.address)
        if isinstance(claim, ByInstance):
            guest = await store.by_uuid(claim.instance_id)
        else:
            guest = await store.by_address(claim.address)
        return _held_to(claim, guest)

    async def _provider_port(self, claim: ByProvider) -> tuple[str, str]:
        """(instance, tenant) of a provider's caller, asked of Neutron and kept as long as
        Nova keeps it (``[api] metadata_cache_expiration``)."""
        key = (claim.provider, claim.address)
        now = time.monotonic()
        known = self._providers.get(key)
        if known is not None and now < known[2]:
            return known[0], known[1]
        neutron = self.neutron
        assert neutron is not None
        uuid, tenant = await asyncio.to_thread(
            neutron.instance_of_provider, claim.provider, claim.address
        )
        ttl = self.config.metadata_cache_expiration
        if ttl > 0:
            if len(self._providers) >= PROVIDERS_MAX:
                self._providers.clear()
            self._providers[key] = (uuid, tenant, now + ttl)
        return uuid, tenant

    def _cached(self, claim: Claim) -> NovaGuest | None:
        store = self.store
        assert store is not None
        if isinstance(claim, ByInstance):
            guest = store.cached_by_uuid(claim.instance_id)
        elif isinstance(claim, ByProvider):
            return None
        else:
            guest = store.cached_by_address(claim.address)
        return None if guest is None else _held_to(claim, guest)

    def _check_token(self, guest: NovaGuest, headers: list[tuple[bytes, bytes]]) -> None:
        for name, value in headers:
            if name == TOKEN_HEADER:
                self.tokens.check(guest.uuid, value)
                return
        if self.require_token or guest.facts.tokens_required:
            raise TokenRequired()

    async def _issue_token(self, peer: str | None, headers: list[tuple[bytes, bytes]]) -> Answer:
        if self.identifier.relayed_by_guest(peer, headers):
            raise TokenRefused("Token requests through a proxy are not allowed.")
        guest = await self._guest(self.identifier.claim(peer, headers))
        ttl_header = next((value for name, value in headers if name == TTL_HEADER), None)
        token, ttl = self.tokens.issue(guest.uuid, ttl_header)
        return Answer(200, token.encode(), headers=((TTL_HEADER, str(ttl).encode()),))

    # -- the password ----------------------------------------------------------------------------

    async def _post_password(
        self,
        guest: NovaGuest,
        target: paths.Target,
        receive: Receive,
        headers: list[tuple[bytes, bytes]],
    ) -> Answer:
        if target.version < "2013-04-04":
            raise NoSuchDocument("no password before 2013-04-04")
        if guest.facts.password:
            raise PasswordAlreadySet()
        body = await read_password(receive, headers)
        store, databases = self.store, self.databases
        assert store is not None and databases is not None
        try:
            await asyncio.to_thread(
                store_password,
                databases,
                guest.uuid,
                body,
                local=self.config.local_metadata_per_cell,
            )
        except CloudseedError:
            raise
        except Exception:
            # Nova's answer when its write fails (a read-only database user): its WSGI
            # server's 500.
            log.exception("storing the password of %s failed", guest.uuid)
            return Answer(500, asgi.UNKNOWN_ERROR)
        store.changed(guest.uuid)  # this worker answers from the new value at once
        return Answer(200, b"", render.HTML)

    def _tagged(self, answer: Answer, guest: NovaGuest | None, document: object) -> Answer:
        return documents.tagged(self.tagger, answer, guest, document)

    _conditional = staticmethod(Freshness.conditional)


def _held_to(claim: Claim, guest: NovaGuest | None) -> NovaGuest:
    """``guest`` if the claim holds for it (Nova: an instance of another tenant is a 404)."""
    if guest is None:
        raise UnknownCaller(f"no instance for {claim}")
    if isinstance(claim, ByInstance) and guest.facts.project_id != claim.tenant_id:
        raise UnknownCaller(f"tenant {claim.tenant_id} does not own {claim.instance_id}")
    return guest


def _allowed(method: str, allowed: tuple[str, frozenset[str]]) -> None:
    if method not in allowed[1]:
        raise MethodNotAllowed(allowed[0])


def _normal(path: str) -> str:
    return posixpath.normpath("/" + path.lstrip("/"))


def create_app(config: NovaMetadataConfig) -> NovaMetadataApp:
    return NovaMetadataApp(config)
