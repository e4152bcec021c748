"""The metadata service: a plain ASGI app, because it is the hot path of a boot storm.

A request is: parse the path (no IO), identify the caller (a dict lookup once cached), check
the session token, send bytes rendered at most once per change of the instance. Errors are
plain text, as Nova's metadata API (``refusals.py``). An answer that delivers the guest's keys
is recorded after it is sent (``delivery.py``: at most one write per guest and key generation
in a worker). What a guest posts is taken in ``posts.py``; the NoCloud seed tree is answered
by ``seeds.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial

from cloudseed.at_once import AnswersAtOnce, AtOnce
from cloudseed.cells.service import CellDatabases
from cloudseed.db.engines import Database
from cloudseed.identity.keyring import Keyring
from cloudseed.metadata import asgi, recursive, render_ec2, replays, seeds, token_hops, tree
from cloudseed.metadata.access_audit import (
    NO_ACCESS_STATS,
    AccessAudit,
    AccessStats,
    document_of,
)
from cloudseed.metadata.answers import JSON, JWT, Answer, at_once
from cloudseed.metadata.callers import Callers
from cloudseed.metadata.cell_guests import CellGuests
from cloudseed.metadata.delivery import VIA_LOGIN_CHECK, Deliveries
from cloudseed.metadata.documents import GuestDocuments
from cloudseed.metadata.documents_now import document_now
from cloudseed.metadata.errors import EndpointDisabled, NoSuchDocument, TokenRefused
from cloudseed.metadata.facts import vendordata_request
from cloudseed.metadata.freshness import Freshness
from cloudseed.metadata.identify import Identifier
from cloudseed.metadata.posts import GuestPosts
from cloudseed.metadata.signed_identity import SignedIdentity
from cloudseed.metadata.store import GuestStore
from cloudseed.metadata.tokens import Tokens
from cloudseed.replay import MakeReplayable, Replays
from cloudseed.settings import Settings
from cloudseed.types import Receive, Scope, Send
from cloudseed.vendordata import Vendordata
from cloudseed.web.errors import MethodNotAllowed

# What respond_now leaves to the ASGI path: tokens (the proxy checks, the PUT), reports, login
# checks, signed documents.
NOT_AT_ONCE = frozenset(
    {tree.TOKEN, tree.IDENTITY_TOKEN, tree.PHONE_HOME, tree.AUTHORIZED_KEYS, tree.EC2_DYNAMIC}
) | {tree.BOOT_REPORT}
GET_HEAD = ("GET, HEAD", frozenset({"GET", "HEAD"}))
ALLOWED = {
    tree.PASSWORD: ("POST, GET, HEAD", frozenset({"POST", "GET", "HEAD"})),
    tree.TOKEN: ("PUT", frozenset({"PUT"})),
    tree.PHONE_HOME: ("POST", frozenset({"POST"})),
    tree.BOOT_REPORT: ("POST", frozenset({"POST"})),
    tree.EVENTS: ("POST, GET, HEAD", frozenset({"POST", "GET", "HEAD"})),  # 2.111: event_acks
}


class MetadataApp(asgi.MetadataASGI, AnswersAtOnce):
    def __init__(self, settings: Settings, *, api_db: Database | None = None) -> None:
        self.settings = settings
        self.dhcp_domain = settings.api.dhcp_domain
        self.identifier = Identifier(settings)
        self.tokens = Tokens(settings.metadata.token_secret)
        self.log_every_request = settings.metadata.access_log
        self._api_db = api_db
        self._own_db: Database | None = None
        self.store: GuestStore[GuestDocuments] | None = None
        self.cells: CellDatabases | None = None  # the store's, at start-up
        self.callers: Callers | None = None  # with the store, at start-up
        self.vendordata: Vendordata | None = None
        self.identity: SignedIdentity | None = None
        self.freshness = Freshness(settings)  # ETags, 304s and long-polls
        self.deliveries: Deliveries | None = None
        self.posts: GuestPosts | None = None  # what guests post, at start-up
        self.seeds: seeds.SeedFiles | None = None  # NoCloud seed URLs, at start-up
        self.access: AccessAudit | None = None  # the token-less access audit, at start-up
        self._access_stats: AccessStats = NO_ACCESS_STATS
        # Answers the protocol replays (coalescing.py, replay.py); per worker, as the app.
        self.replays = Replays()

    async def startup(self) -> None:
        db = self._api_db
        if db is None:
            db = self._own_db = Database.connect("api", self.settings.api_database_url)
        self.vendordata = Vendordata(
            self.settings,
            login_check=self.settings.keys.login_check,
            boot_report=True,
            stats=self._target_stats,
        )
        cells = self.cells = CellDatabases(db)
        self.deliveries = Deliveries(cells)
        source = CellGuests(
            cells,
            dhcp_domain=self.dhcp_domain,
            poll_interval=self.settings.metadata.change_poll_interval_ms / 1000,
            fallback_interval=self.settings.metadata.change_fallback_interval_ms / 1000,
            ahead_seconds=self.settings.metadata.load_ahead_seconds,
            stats=self._store_stats,
        )
        self.store = GuestStore(
            source, capacity=self.settings.metadata.cache_size, stats=self._store_stats
        )
        await self.store.start()
        self.posts = GuestPosts(self.store, cells)
        self.callers = Callers(
            self.store, self.tokens, require_token=self.settings.metadata.require_token
        )
        self.store.watch(self.freshness.waiters.changed)
        self.store.watch(self.replays.changed)
        self.access = AccessAudit(
            cells, interval=self.settings.metadata.access_audit_interval, stats=self._access_stats
        )
        self.access.start()
        keyring = Keyring(db, self.settings.identity)
        self.identity = SignedIdentity(self.settings, keyring, cells)
        self.seeds = seeds.SeedFiles(
            self.store,
            self.vendordata,
            key=self.settings.metadata.nocloud_seed_secret.encode(),
            dhcp_domain=self.dhcp_domain,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and seeds.is_seed_path(scope["path"]):
            # The seed tree reads the raw path, and nothing logs the token (seeds.py).
            assert self.seeds is not None
            await self.seeds.serve(scope, receive, send, log_every_request=self.log_every_request)
            return
        if scope["type"] == "http" and scope["method"] == "PUT":
            token_hops.note_socket(scope)
        await super().__call__(scope, receive, send)

    def observe_access(self, stats: AccessStats) -> None:
        """Report the token-less access audit's counts (metrics/); before start-up."""
        self._access_stats = stats

    def waiting(self, uuid: str | None = None) -> int:
        """Long-polls waiting in this app now: for instance ``uuid``, or (None) in all; what
        tests wait for before they change something or hold that a waiter still waits."""
        return self.freshness.waiters.count(uuid)

    def drain(self) -> None:
        """The server is stopping (serve.py, on SIGTERM): long-polls answer now."""
        self.freshness.waiters.drain()

    async def shutdown(self) -> None:
        self.freshness.waiters.drain()
        if self.deliveries is not None:
            await self.deliveries.aclose()
        if self.access is not None:
            await asyncio.to_thread(self.access.close)
        if self.store is not None:
            await self.store.stop()
        if self.cells is not None:
            self.cells.dispose()
        if self.vendordata is not None:
            await self.vendordata.aclose()
        if self._own_db is not None:
            self._own_db.dispose()

    def respond_now(
        self, method: str, path: str, peer: str | None, headers: list[tuple[bytes, bytes]]
    ) -> AtOnce | None:
        """The answer to a request that can be answered at once, for the HTTP protocol to
        write without an ASGI cycle (coalescing.py, which asks only for a GET or HEAD of a
        plain path, without a query): from a cached guest, for a document that takes no IO,
        refused by nothing. None for any other request, and for anything this path does not
        expect: the ASGI path then answers it as ever (refusals, their logging, loads,
        long-polls)."""
        if self.log_every_request or self.store is None:
            return None
        target = tree.parse(path)
        if target is None or target.kind in NOT_AT_ONCE:
            return None
        self._replayable = None
        try:
            answer = self._answer_now(target, peer, headers)
        except Exception:
            return None
        if answer is None:
            return None
        replayable, self._replayable = self._replayable, None
        return at_once(answer, method, replayable)

    _replayable: MakeReplayable | None = None  # _answer_now's word on its answer, for respond_now

    def _answer_now(
        self, target: tree.Target, peer: str | None, headers: list[tuple[bytes, bytes]]
    ) -> Answer | None:
        """``answer`` for a GET of ``target`` without waiting; None where it would wait."""
        callers, store = self.callers, self.store
        assert callers is not None and store is not None
        if target.kind == tree.EC2_INDEX:
            if callers.cached_endpoint_disabled(self.identifier, peer, headers):
                return None  # the ASGI path refuses it
            index = self.freshness.tagged(Answer(200, render_ec2.EC2_INDEX), None)
            return self.freshness.conditional(index, headers)
        claim = self.identifier.claim(peer, headers)
        guest = callers.cached_guest(claim)
        if guest is None:
            return None
        with_token = callers.check_token(guest, headers)
        shared = replays.shared_vendordata(target, self.vendordata)  # before it is made
        answer = self._document_now(target, guest, claim.address)
        if answer is None:
            return None
        if not with_token:
            assert self.access is not None
            self.access.counted(guest.facts, document_of(target.kind, "GET"))
        store.stats.hit()  # here, once answered: a request left to the ASGI path counts there
        tagged = self.freshness.tagged(answer, guest, (target, False), claim.address)
        if not with_token:  # a session token runs out: never replayed
            # Made only if the answer is kept (replay.py): most of a storm's are not.
            self._replayable = partial(
                replays.replayable,
                claim,
                guest,
                target,
                shared,
                callers=callers,
                access=self.access,
                vendordata=self.vendordata,
            )
        return self.freshness.conditional(tagged, headers)

    # -- one request -------------------------------------------------------------------------

    async def answer(
        self,
        method: str,
        path: str,
        peer: str | None,
        headers: list[tuple[bytes, bytes]],
        receive: Receive,
        query: bytes = b"",
    ) -> Answer:
        target = tree.parse(path)
        kind = target.kind if target is not None else None
        allowed = ALLOWED.get(kind, GET_HEAD)  # type: ignore[arg-type]
        if method not in allowed[1]:
            raise MethodNotAllowed(allowed[0])
        if target is None:
            raise NoSuchDocument("no such path")
        if target.kind == tree.EC2_INDEX:
            # Nova answers "/" without asking who calls; a cached guest whose endpoint is off
            # gets its 403 here too (2.109).
            assert self.callers is not None
            if self.callers.cached_endpoint_disabled(self.identifier, peer, headers):
                raise EndpointDisabled()
            index = self.freshness.tagged(Answer(200, render_ec2.EC2_INDEX), None)
            return self.freshness.conditional(index, headers)
        callers, access = self.callers, self.access
        assert callers is not None and access is not None
        claim = self.identifier.claim(peer, headers)
        guest = await callers.guest(claim)
        if target.kind == tree.TOKEN:
            if self.identifier.relayed_by_guest(peer, headers):
                raise TokenRefused("Token requests through a proxy are not allowed.")
            answer = callers.issue_token(guest, headers)
            token_hops.limit_hops(guest)
            return answer
        if target.kind == tree.IDENTITY_TOKEN:
            # Like a session token, never handed out through a forwarder inside a guest; and
            # only with a session token, whatever the settings say for other documents.
            if self.identifier.relayed_by_guest(peer, headers):
                raise TokenRefused("Identity tokens through a proxy are not allowed.")
            callers.check_token_audited(guest, headers, target.kind, method, access, required=True)
            assert self.identity is not None
            token = await self.identity.token(guest.facts, query)
            return Answer(200, token, JWT, headers=((b"cache-control", b"no-store"),))
        callers.check_token_audited(guest, headers, target.kind, method, access)
        if method == "POST":  # only where ALLOWED lets one through: posts.py
            assert self.posts is not None
            return await self.posts.take(target.kind, guest.facts.uuid, receive, headers)
        if target.kind == tree.AUTHORIZED_KEYS:
            # ``user`` is for per-user keys to come: every login name gets the guest's keys.
            tree.login_user(query)
            keys = Answer(
                200, guest.authorized_keys(), sent=self._delivered(guest, VIA_LOGIN_CHECK)
            )
            return self.freshness.conditional(
                self.freshness.tagged(keys, guest, (target, False)), headers
            )
        ask = self.freshness.query(target, query)

        async def current(guest: GuestDocuments = guest) -> Answer:
            if ask.recursive:
                answer = Answer(200, self._recursive(guest, target.version), JSON)
            else:
                answer = await self._document(target, guest, claim.address)
            return self.freshness.tagged(answer, guest, (target, ask.recursive), claim.address)

        if not ask.wait:
            return self.freshness.conditional(await current(), headers)

        latest = [guest]

        async def again() -> Answer:
            # Identified and checked again, exactly as a new request: the instance behind an
            # address may have changed, and a token may have run out while waiting.
            guest = latest[0] = await callers.guest(claim)
            callers.check_token(guest, headers)
            return await current(guest)

        def expiry() -> float | None:
            return latest[0].facts.keys_refresh_at

        found = await self.freshness.wait(guest.facts.uuid, ask, receive, again, expiry)
        return self.freshness.conditional(found, headers)

    def _recursive(self, guest: GuestDocuments, version: str) -> bytes:
        assert self.vendordata is not None
        return recursive.instance_data(
            version,
            meta_data=guest.meta_data(version),
            user_data=guest.facts.user_data,
            network_data=guest.network_data(),
            vendor_data_json=self.vendordata.vendor_data_json_for(dict(guest.facts.meta)),
        )

    def _delivered(self, guest: GuestDocuments, via: str) -> Callable[[], None] | None:
        """What to call once ``guest`` has been sent its keys ``via`` one of the ways the
        metadata service sees; None when there is nothing to record."""
        deliveries = self.deliveries
        if deliveries is None or not deliveries.wanted(guest, via):
            return None  # the usual case: known, or this worker already recorded it
        return lambda: deliveries.served(guest, via)

    async def _document(
        self, target: tree.Target, guest: GuestDocuments, address: str | None
    ) -> Answer:
        """The GET of ``target`` for ``guest``: at once where it takes no IO, else loaded."""
        facts = guest.facts
        kind = target.kind
        now = self._document_now(target, guest, address)
        if now is not None:
            return now
        if kind == tree.VENDOR_DATA2:
            assert self.vendordata is not None
            assembled = await self.vendordata.vendor_data2(vendordata_request(facts))
            return Answer(200, self.vendordata.vendor_data2_for(dict(facts.meta), assembled), JSON)
        if kind == tree.EC2_DYNAMIC:
            assert self.identity is not None
            return Answer(200, await self.identity.ec2(facts, target.version, target.rest, address))
        raise NoSuchDocument("nothing at this path")  # content: no network template here

    def _document_now(
        self, target: tree.Target, guest: GuestDocuments, address: str | None
    ) -> Answer | None:
        assert self.vendordata is not None
        return document_now(
            target,
            guest,
            address,
            vendordata=self.vendordata,
            dhcp_domain=self.dhcp_domain,
            delivered=self._delivered,
        )


def create_metadata_app(settings: Settings, *, api_db: Database | None = None) -> MetadataApp:
    return MetadataApp(settings, api_db=api_db)
