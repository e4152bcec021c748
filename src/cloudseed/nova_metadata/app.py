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
renderer. cloudseed's additions kept here: session tokens, ETags, long-polls and the
recursive view on the OpenStack tree, metrics, and signed identity with ``[cloudseed_metadata]
connection`` (identity.py; its public keys answered before any caller is identified). Left
out: what needs cloudseed's own records (live keys, phone_home, history).
"""

from __future__ import annotations

import asyncio
import logging
import posixpath
from functools import partial
from typing import TYPE_CHECKING

from cloudseed.at_once import AnswersAtOnce, AtOnce
from cloudseed.db.engines import Database
from cloudseed.errors import CloudseedError, InvalidInput
from cloudseed.metadata import asgi, changes, etags
from cloudseed.metadata.answers import JWT, Answer, at_once
from cloudseed.metadata.errors import NoSuchDocument, TokenRefused
from cloudseed.metadata.freshness import Freshness
from cloudseed.metadata.identify import Claim, Identifier
from cloudseed.metadata.store import GuestStore
from cloudseed.metadata.tokens import Tokens
from cloudseed.nova_metadata import identity, paths, render, replays
from cloudseed.nova_metadata.callers import NovaCallers
from cloudseed.nova_metadata.changes import NovaChanges
from cloudseed.nova_metadata.config import NovaMetadataConfig
from cloudseed.nova_metadata.databases import NovaDatabases
from cloudseed.nova_metadata.documents import NovaDocuments, tagged
from cloudseed.nova_metadata.guests import NovaGuest, NovaGuests
from cloudseed.nova_metadata.hosts import HostBoots
from cloudseed.nova_metadata.identity import NovaIdentity
from cloudseed.nova_metadata.loading import Loader
from cloudseed.nova_metadata.mappings import InstanceMappings
from cloudseed.nova_metadata.neutron import Neutron
from cloudseed.nova_metadata.passwords import read_password, store_password
from cloudseed.replay import MakeReplayable, Replays
from cloudseed.servers.errors import PasswordAlreadySet
from cloudseed.types import Receive
from cloudseed.vendordata import Vendordata
from cloudseed.web.errors import MethodNotAllowed

if TYPE_CHECKING:
    from cloudseed.metadata.changes import Query

log = logging.getLogger(__name__)

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
        self.log_every_request = settings.metadata.access_log
        signs = config.identity_database_url is not None  # signed identity (identity.py)
        self.tagger = etags.Tagger(
            etags.fingerprint(
                "nova",
                self.dhcp_domain,
                settings.api.vendordata_providers,
                *(("signed identity",) if signs else ()),
                *(("network template",) if config.network_template else ()),
            )
        )
        m = settings.metadata
        self.waiters = changes.Waiters(per_instance=m.max_waiters_per_instance, total=m.max_waiters)
        self.databases: NovaDatabases | None = None
        self.neutron: Neutron | None = None
        self.store: GuestStore[NovaGuest] | None = None
        self.changes: NovaChanges | None = None
        self.vendordata: Vendordata | None = None
        self.callers: NovaCallers | None = None  # with the store, at start-up
        self.documents: NovaDocuments | None = None  # likewise
        self.identity: NovaIdentity | None = None  # with [cloudseed_metadata] connection
        # Answers the protocol replays (coalescing.py, replay.py); per worker, as the app.
        self.replays = Replays()

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
            dynamic=config.identity_database_url is not None,
            network_template=config.network_template,
        )
        if config.identity_database_url is not None:
            self.identity = NovaIdentity.open(config)

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
        source = NovaGuests(
            loader,
            self.changes,
            dhcp_domain=self.dhcp_domain,
            network_template=config.network_template,
            boots=HostBoots(config.host_boot_misses),
        )
        self.store = GuestStore(source, capacity=capacity, stats=self._store_stats)
        self.callers = NovaCallers(
            self.store,
            neutron,
            self.tokens,
            require_token=config.settings.metadata.require_token,
            provider_ttl=config.metadata_cache_expiration,
        )
        self.store.watch(self.waiters.changed)
        self.store.watch(self.replays.changed)
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
        if self.identity is not None:
            self.identity.close()

    # -- answers written at once (coalescing.py) -----------------------------------------------

    def respond_now(
        self, method: str, path: str, peer: str | None, headers: list[tuple[bytes, bytes]]
    ) -> AtOnce | None:
        """A GET or HEAD of a cached guest's document that takes no IO, answered without an
        ASGI cycle; None for anything else (the ASGI path answers it, refusals included)."""
        if self.log_every_request or self.store is None:
            return None
        self._replayable = None
        try:
            answer = self._answer_now(path, peer, headers)
        except Exception:
            return None
        if answer is None:
            return None
        replayable, self._replayable = self._replayable, None
        return at_once(answer, method, replayable)

    _replayable: MakeReplayable | None = None  # _answer_now's word on its answer, for respond_now

    def _answer_now(
        self, path: str, peer: str | None, headers: list[tuple[bytes, bytes]]
    ) -> Answer | None:
        if paths.is_root(path):
            return self._conditional(
                self._tagged(Answer(200, render.EC2_VERSIONS), None, None), headers
            )
        target = paths.parse(path)
        if target is None or target.kind == paths.IDENTITY_TOKEN or identity.is_dynamic(target):
            return None  # signing takes IO: the ASGI path answers
        claim = self.identifier.claim(peer, headers)
        callers = self.callers
        assert callers is not None
        guest = callers.cached(claim)
        if guest is None:
            return None
        with_token = callers.check_token(guest, headers)
        documents = self.documents
        assert documents is not None
        shared = replays.shared_vendordata(target, self.vendordata)  # before it is made
        answer = documents.now(target, guest, claim.address)
        if answer is None:
            return None
        assert self.store is not None
        self.store.stats.hit()  # here, once answered: a request left to the ASGI path counts there
        if not with_token:  # a session token runs out: never replayed
            # Made only if the answer is kept (replay.py): most of a storm's are not.
            self._replayable = partial(
                replays.replayable,
                claim,
                guest,
                target,
                shared,
                callers=callers,
                vendordata=self.vendordata,
            )
        return self._conditional(
            self._tagged(answer, guest, (target, self._address_part(guest, target, claim))), headers
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
        public = identity.public_path(path) if self.identity is not None else None
        if public is not None:  # the public keys, for anyone: no caller to identify
            _allowed(method, GET_HEAD)
            assert self.identity is not None
            return await self.identity.public(public, headers)
        target = paths.parse(path)
        if _normal(path) == TOKEN_PATH and method == "PUT":
            return await self._issue_token(peer, headers)
        is_password = (
            target is not None
            and target.kind == paths.OPENSTACK
            and target.rest == (paths.PASSWORD,)
        )
        _allowed(method, PASSWORD_METHODS if is_password else GET_HEAD)
        callers = self.callers
        assert callers is not None
        claim = self.identifier.claim(peer, headers)
        guest = await callers.guest(claim)
        callers.check_token(guest, headers)
        if target is None:
            raise NoSuchDocument("no such path")
        if method == "POST":
            return await self._post_password(guest, target, receive, headers)
        if self.identity is not None:
            if target.kind == paths.IDENTITY_TOKEN:
                return await self._identity_token(guest, peer, headers, query)
            if identity.is_dynamic(target):
                body = await self.identity.ec2(guest.facts, target.rest[1:], claim.address)
                return self._conditional(self._tagged(Answer(200, body), guest, None), headers)
        ask = self._query(target, query)

        async def current(guest: NovaGuest = guest) -> Answer:
            assert self.documents is not None
            if ask.recursive:
                recursive = self.documents.recursive(guest, target.version)
                return self._tagged(recursive, guest, (target, True))
            answer = await self.documents.get(target, guest, claim.address)
            return self._tagged(answer, guest, (target, self._address_part(guest, target, claim)))

        if not ask.wait:
            return self._conditional(await current(), headers)
        latest = [guest]

        async def again() -> Answer:
            guest = latest[0] = await callers.guest(claim)
            callers.check_token(guest, headers)
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
        if ask.recursive and target.rest[0] != paths.LISTING:
            raise InvalidInput("recursive=true is only for /openstack/<version>/.")
        return ask

    async def _identity_token(
        self, guest: NovaGuest, peer: str | None, headers: list[tuple[bytes, bytes]], query: bytes
    ) -> Answer:
        """As cloudseed's own: never through a forwarder inside a guest, and only with a
        session token, whatever the settings say for other documents. Not tagged, not kept."""
        if self.identifier.relayed_by_guest(peer, headers):
            raise TokenRefused("Identity tokens through a proxy are not allowed.")
        callers, signer = self.callers, self.identity
        assert callers is not None and signer is not None
        callers.check_token(guest, headers, required=True)
        token = await signer.token(guest.facts, query)
        return Answer(200, token, JWT, headers=((b"cache-control", b"no-store"),))

    async def _issue_token(self, peer: str | None, headers: list[tuple[bytes, bytes]]) -> Answer:
        if self.identifier.relayed_by_guest(peer, headers):
            raise TokenRefused("Token requests through a proxy are not allowed.")
        callers = self.callers
        assert callers is not None
        guest = await callers.guest(self.identifier.claim(peer, headers))
        return callers.issue_token(guest, headers)

    # -- documents -----------------------------------------------------------------------------

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

    # -- ETags -----------------------------------------------------------------------------------

    @staticmethod
    def _address_part(guest: NovaGuest, target: paths.Target, claim: Claim) -> str | None:
        return claim.address if render.depends_on_address(guest.facts, target) else None

    def _tagged(self, answer: Answer, guest: NovaGuest | None, document: object) -> Answer:
        return tagged(self.tagger, answer, guest, document)

    _conditional = staticmethod(Freshness.conditional)


def _allowed(method: str, allowed: tuple[str, frozenset[str]]) -> None:
    if method not in allowed[1]:
        raise MethodNotAllowed(allowed[0])


def _normal(path: str) -> str:
    return posixpath.normpath("/" + path.lstrip("/"))


def create_app(config: NovaMetadataConfig) -> NovaMetadataApp:
    return NovaMetadataApp(config)
