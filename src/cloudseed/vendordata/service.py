"""``Vendordata``: vendor_data.json and vendor_data2.json for the metadata service and the
config drive, from the providers in ``[api] vendordata_providers``.

One instance per worker process, built from Settings at start-up (everything that can be
wrong in the configuration is found then) and closed with ``aclose()``.

With ``login_check`` (the metadata service's, when ``[keys] login_check`` is set; never a
config drive's) the login-time key check's parts are added to what cloud-init reads: to
vendor_data.json, or to vendor_data2.json's ``cloud-init`` key when there is no
vendor_data.json (``login_check.py``). With ``boot_report`` (the metadata service's too)
``boot_report`` holds readiness's webhook part, which ``metadata/documents_now.py`` adds the
same way for the servers that opt in (``boot_report.py``).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from cloudseed.errors import ConfigError
from cloudseed.settings import Settings, split_list
from cloudseed.vendordata import documents, login_check
from cloudseed.vendordata.boot_report import BootReportParts
from cloudseed.vendordata.cache import (
    DEFAULT_FAILURE_BACKOFF,
    DEFAULT_MAX_ENTRIES,
    Answer,
    AnswerCache,
    Clock,
    Fetch,
    Key,
    NotModified,
    Outcome,
)
from cloudseed.vendordata.errors import VendordataError
from cloudseed.vendordata.request import VendordataRequest as VendordataRequest  # re-export
from cloudseed.vendordata.static import StaticFile
from cloudseed.vendordata.stats import NO_TARGET_STATS, TargetStats
from cloudseed.vendordata.targets import TargetClient, parse_targets, tls_verification

if TYPE_CHECKING:
    from cloudseed.vendordata.service_token import ServiceToken

log = logging.getLogger(__name__)

STATIC_JSON = "StaticJSON"
DYNAMIC_JSON = "DynamicJSON"
STATIC_KEY = "static"  # StaticJSON's key in vendor_data2.json
CLOUD_INIT_KEY = "cloud-init"  # the one key of a vendordata document cloud-init reads


class Vendordata:
    """The vendordata providers of one worker process.

    Its async methods must all run on one event loop (its HTTP clients belong to the loop that
    first uses them); callers in worker threads use ``ThreadedVendordata``.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        max_cache_entries: int = DEFAULT_MAX_ENTRIES,
        failure_backoff: float = DEFAULT_FAILURE_BACKOFF,
        login_check: bool = False,
        boot_report: bool = False,
        stats: TargetStats = NO_TARGET_STATS,
        clock: Clock = time.monotonic,
    ) -> None:
        """``clock``: what the static file's checks and the answers' freshness and back-off
        are timed by (tests move it on instead of waiting)."""
        api = settings.api
        # In the configured order (it is the key order of vendor_data2.json), each once.
        self.providers = tuple(dict.fromkeys(split_list(api.vendordata_providers)))
        self._static = (
            StaticFile(api.vendordata_jsonfile_path, clock=clock)
            if STATIC_JSON in self.providers
            else None
        )
        targets = parse_targets(api.vendordata_dynamic_targets)
        if targets and DYNAMIC_JSON not in self.providers:
            log.warning(
                "[api] vendordata_dynamic_targets is set but DynamicJSON is not in "
                "vendordata_providers: the targets are not called"
            )
            targets = []
        self.has_dynamic = bool(targets)
        self._failure_fatal = api.vendordata_dynamic_failure_fatal
        self._failure_backoff = failure_backoff
        self._token = _service_token(settings) if targets else None
        if targets and self._token is None:
            log.warning(
                "%d DynamicJSON target(s) but [vendordata_dynamic_auth] is not "
                "configured: no token will be sent to them",
                len(targets),
            )
        verify = (
            tls_verification(api.vendordata_dynamic_ssl_certfile)
            if any(t.url.startswith("https:") for t in targets)
            else False
        )
        self._clients = [
            TargetClient(
                target,
                connect_timeout=api.vendordata_dynamic_connect_timeout,
                read_timeout=api.vendordata_dynamic_read_timeout,
                verify=verify,
                token=self._token,
                stats=stats,
            )
            for target in targets
        ]
        self._cache = AnswerCache(
            max_entries=max_cache_entries,
            failure_backoff=failure_backoff,
            clock=clock,
            on_failure=self._report_failure,
        )
        self._static_only: tuple[bytes, bytes] | None = None  # (static content, document)
        self._login_check = login_check
        self._with_check: tuple[bytes, bytes] | None = None  # (static content, with the parts)
        self._check_only: bytes | None = None  # vendor_data2.json of the parts alone
        # Readiness's webhook part for the servers that opt in (the metadata service's only).
        self.boot_report = (
            BootReportParts(
                endpoint=settings.metadata.boot_report_url,
                scope=settings.metadata.boot_report_webhook,
            )
            if boot_report
            else None
        )

    @property
    def vendor_data_json(self) -> bytes | None:
        """vendor_data.json: the static file as compact JSON (``{}`` without a file); None
        when StaticJSON is not a provider (the metadata service answers 404)."""
        if self._static is None:
            return None
        content = self._static.content()
        if not self._login_check:
            return content
        if self._with_check is None or self._with_check[0] is not content:
            merged = login_check.with_parts(documents.parse(content))
            self._with_check = (content, documents.compact(merged))
        return self._with_check[1]

    def vendor_data_json_for(self, metadata: Mapping[str, str]) -> bytes | None:
        """vendor_data.json for a server with ``metadata``: with readiness's webhook part when
        it opted in (``boot_report.py``)."""
        document = self.vendor_data_json
        if document is None or self.boot_report is None or not self.boot_report.wanted(metadata):
            return document
        return self.boot_report.in_vendor_data(document)

    def vendor_data2_for(self, metadata: Mapping[str, str], document: bytes) -> bytes:
        """vendor_data2.json ``document`` for a server with ``metadata``: with the webhook
        part in its ``cloud-init`` key when the server opted in and there is no
        vendor_data.json to carry it."""
        parts = self.boot_report
        if parts is None or self._static is not None or not parts.wanted(metadata):
            return document
        return parts.in_vendor_data2(document)

    def static_only_vendor_data2(self) -> bytes | None:
        """vendor_data2.json when no target is called (the same for every instance), else
        None. Cheap to call per request: it changes only when the static file does."""
        if self.has_dynamic:
            return None
        if self._static is None:
            if self._login_check:
                if self._check_only is None:
                    member = self._check_member(None)
                    self._check_only = documents.join_object([(CLOUD_INIT_KEY, member)])
                return self._check_only
            return documents.EMPTY_OBJECT
        content = self._static.content()
        if self._static_only is None or self._static_only[0] is not content:
            self._static_only = (content, documents.join_object([(STATIC_KEY, content)]))
        return self._static_only[1]

    async def vendor_data2(self, request: VendordataRequest) -> bytes:
        """vendor_data2.json for one instance: "static", then one key per target, in provider
        order. A failed target is ``{}`` (or its last good answer); this never raises for it."""
        static_only = self.static_only_vendor_data2()
        if static_only is not None:
            return static_only
        return self._assemble(await self._outcomes(request))

    async def vendor_data2_for_build(self, request: VendordataRequest) -> bytes:
        """vendor_data2.json for a config drive, each target asked once for the whole drive.
        With ``vendordata_dynamic_failure_fatal`` a target without an answer raises
        VendordataError (the build fails); otherwise it is ``{}`` as for guests."""
        static_only = self.static_only_vendor_data2()
        if static_only is not None:
            return static_only
        outcomes = await self._outcomes(request)
        if self._failure_fatal:
            self._raise_for_missing(outcomes)
        return self._assemble(outcomes)

    def _assemble(self, outcomes: list[Outcome]) -> bytes:
        members: list[tuple[str, bytes]] = []
        for provider in self.providers:
            if provider == STATIC_JSON and self._static is not None:
                members.append((STATIC_KEY, self._static.content()))
            elif provider == DYNAMIC_JSON:
                members.extend(
                    (client.target.name, outcome.value or documents.EMPTY_OBJECT)
                    for client, outcome in zip(self._clients, outcomes, strict=True)
                )
        if self._login_check and self._static is None:
            # No vendor_data.json to carry the parts: vendor_data2.json's cloud-init key does.
            values = dict(members)
            check = self._check_member(values.get(CLOUD_INIT_KEY))
            if CLOUD_INIT_KEY in values:
                members = [(k, check if k == CLOUD_INIT_KEY else v) for k, v in members]
            else:
                members.append((CLOUD_INIT_KEY, check))
        return documents.join_object(members)

    @staticmethod
    def _check_member(value: bytes | None) -> bytes:
        """vendor_data2.json's ``cloud-init`` member with the login check's parts (a target
        named cloud-init answered ``value``; one cloud-init cannot use is left alone)."""
        if value is None:
            return documents.compact(login_check.parts())
        added = login_check.joined(documents.parse(value))
        return value if added is None else documents.compact(added)

    async def check_for_build(self, request: VendordataRequest) -> None:
        """With ``vendordata_dynamic_failure_fatal``: raise VendordataError if a target has no
        answer for this instance (through the cache, so the guest's own requests that follow
        are answered from it). Without it, nothing to check."""
        if not self._failure_fatal or not self.has_dynamic:
            return
        self._raise_for_missing(await self._outcomes(request))

    def _raise_for_missing(self, outcomes: list[Outcome]) -> None:
        for client, outcome in zip(self._clients, outcomes, strict=True):
            if outcome.value is None:
                raise VendordataError(
                    target=client.target.name, reason=outcome.failure or "no answer"
                )

    async def aclose(self) -> None:
        await self._cache.aclose()
        await asyncio.gather(*(client.aclose() for client in self._clients))
        if self._token is not None:
            self._token.close()

    async def _outcomes(self, request: VendordataRequest) -> list[Outcome]:
        body = request.body()
        digest = hashlib.sha256(body).digest()
        # All targets at once: the slowest sets the pace, not the sum.
        return list(
            await asyncio.gather(
                *(
                    self._cache.get(
                        (request.instance_id, client.target.name, digest), _caller(client, body)
                    )
                    for client in self._clients
                )
            )
        )

    def _report_failure(self, key: Key, reason: str, serving_stale: bool) -> None:
        log.warning(
            "vendordata target %r failed for instance %s: %s; serving %s, and not "
            "calling it again for this instance for %g s",
            key[1],
            key[0],
            reason,
            "its last good answer" if serving_stale else "{}",
            self._failure_backoff,
        )


def _caller(client: TargetClient, body: bytes) -> Fetch:
    async def call(etag: str | None) -> Answer | NotModified:
        return await client.call(body, etag)

    return call


def _service_token(settings: Settings) -> ServiceToken | None:
    """keystoneauth's session for ``[vendordata_dynamic_auth]``; None when it has no auth_type
    (then no token is sent, as in Nova)."""
    options = settings.passthrough.get("vendordata_dynamic_auth", {})
    if not options.get("auth_type", "").strip():
        return None
    try:
        from cloudseed.vendordata import service_token
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != "keystoneauth1":
            raise
        raise ConfigError(
            "[vendordata_dynamic_auth] needs keystoneauth1: install cloudseed[keystone]"
        ) from None
    api = settings.api
    return service_token.load_service_token(
        options,
        default_timeout=api.vendordata_dynamic_connect_timeout
        + api.vendordata_dynamic_read_timeout,
    )
