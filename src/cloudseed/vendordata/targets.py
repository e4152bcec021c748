"""DynamicJSON targets: one HTTP client each, and what a call and its answer mean.

Each target gets its own ``httpx.AsyncClient`` and therefore its own connection pool: a slow
or dead target fills its own pool and nobody else's, so other targets (and other instances'
requests to them) go on at full speed.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Protocol

import httpx

from cloudseed.errors import ConfigError
from cloudseed.vendordata import documents
from cloudseed.vendordata.cache import Answer, NotModified
from cloudseed.vendordata.cache_control import parse_cache_control
from cloudseed.vendordata.errors import NotJSON, TargetFailure
from cloudseed.vendordata.stats import NO_TARGET_STATS, TargetStats

USER_AGENT = "cloudseed-vendordata"  # Nova sends openstack-nova-vendordata
# The largest answer we accept. Vendordata is a few KB of cloud-config; an answer this big is a
# target's bug, and every answer is held in memory for every instance.
MAX_ANSWER_BYTES = 256 * 1024
# A longer ETag is not kept (the next call is then unconditional): entries stay small.
MAX_ETAG_LENGTH = 256
# Connections per target; more concurrent calls wait (the pool timeout) for one to free up.
MAX_CONNECTIONS = 100


@dataclass(frozen=True)
class Target:
    name: str  # the key of its answer in vendor_data2.json
    url: str


def parse_targets(value: str) -> list[Target]:
    """``name@url`` entries, split at the first ``@`` (a URL may hold one, a name may not)."""
    targets = []
    for item in (part.strip() for part in value.split(",")):
        if item:
            name, _, url = item.partition("@")
            targets.append(Target(name=name, url=url))
    return targets


class TokenSource(Protocol):
    """Where the service token comes from (``service_token.ServiceToken``)."""

    async def headers(self) -> Mapping[str, str]:
        """Headers that carry the token; raises TargetFailure when none can be had."""
        ...

    async def invalidate(self) -> bool:
        """Forget the token after a 401; True if a new one may differ (worth a retry)."""
        ...


def tls_verification(certfile: str) -> ssl.SSLContext:
    """Verification for https targets: the operator's CA bundle, else the system's CAs."""
    try:
        return ssl.create_default_context(cafile=certfile or None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"[api] vendordata_dynamic_ssl_certfile {certfile}: "
            f"{getattr(exc, 'strerror', None) or exc}"
        ) from None


def _no_cookies() -> httpx.Cookies:
    # Cookies set by a target must not ride along with the next instance's request.
    return httpx.Cookies(CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])))


def _etag(response: httpx.Response) -> str | None:
    etag = response.headers.get("etag")
    return etag if etag and len(etag) <= MAX_ETAG_LENGTH else None


class TargetClient:
    """Calls one target: POST the request body, read and check its answer."""

    def __init__(
        self,
        target: Target,
        *,
        connect_timeout: float,
        read_timeout: float,
        verify: ssl.SSLContext | bool,
        token: TokenSource | None,
        stats: TargetStats = NO_TARGET_STATS,
    ) -> None:
        self.target = target
        self._stats = stats
        self._token = token
        self._timeouts = (connect_timeout, read_timeout)
        # The whole call, token included, gets at most this long, so a target that trickles
        # its answer byte by byte (each read within read_timeout) still cannot hold a guest.
        self._deadline = connect_timeout + read_timeout
        self._client = httpx.AsyncClient(
            # Writing the small body is as quick as connecting; waiting for a free
            # connection of this target's pool is bounded like connecting too.
            timeout=httpx.Timeout(
                connect=connect_timeout,
                read=read_timeout,
                write=connect_timeout,
                pool=connect_timeout,
            ),
            limits=httpx.Limits(
                max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_CONNECTIONS // 5
            ),
            verify=verify,
            cookies=_no_cookies(),
            follow_redirects=False,
            # Proxies come from settings or not at all: nothing in cloudseed reads the
            # environment after start-up.
            trust_env=False,
            headers={
                "Content-Type": "application/json",
                "Accept": "application/json",
                "User-Agent": USER_AGENT,
            },
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def call(self, body: bytes, etag: str | None) -> Answer | NotModified:
        """One call; ``etag`` makes it conditional. Raises TargetFailure with the reason."""
        started = time.perf_counter()
        try:
            answer = await self._call(body, etag)
        except TargetFailure:
            self._stats.target_called(self.target.name, time.perf_counter() - started, failed=True)
            raise
        self._stats.target_called(self.target.name, time.perf_counter() - started, failed=False)
        return answer

    async def _call(self, body: bytes, etag: str | None) -> Answer | NotModified:
        try:
            async with asyncio.timeout(self._deadline):
                response, content = await self._send(body, etag)
                if (
                    response.status_code == 401
                    and self._token is not None
                    and await self._token.invalidate()
                ):
                    # A revoked or expired token: keystoneauth fetches a new one, once.
                    response, content = await self._send(body, etag)
        except TimeoutError:
            raise TargetFailure(f"no complete answer within {self._deadline:g} s") from None
        except httpx.ConnectTimeout:
            raise TargetFailure(f"connection timed out after {self._timeouts[0]:g} s") from None
        except httpx.ReadTimeout:
            raise TargetFailure(f"no answer within {self._timeouts[1]:g} s") from None
        except httpx.PoolTimeout:
            raise TargetFailure(
                f"all {MAX_CONNECTIONS} connections busy for {self._timeouts[0]:g} s"
            ) from None
        except httpx.HTTPError as exc:
            raise TargetFailure(f"{type(exc).__name__}: {exc}") from None
        return _interpret(response, content, etag)

    async def _send(self, body: bytes, etag: str | None) -> tuple[httpx.Response, bytes]:
        headers = dict(await self._token.headers()) if self._token is not None else {}
        if etag is not None:
            headers["If-None-Match"] = etag
        request = self._client.build_request("POST", self.target.url, content=body, headers=headers)
        response = await self._client.send(request, stream=True)
        try:
            content = bytearray()
            async for chunk in response.aiter_bytes():
                content += chunk
                if len(content) > MAX_ANSWER_BYTES:
                    raise TargetFailure(f"answer larger than {MAX_ANSWER_BYTES} bytes")
        finally:
            await response.aclose()
        return response, bytes(content)


def _interpret(response: httpx.Response, content: bytes, etag: str | None) -> Answer | NotModified:
    status = response.status_code
    cache_control = response.headers.get_list("cache-control")
    # For a POST, RFC 9110 says a matching If-None-Match gets 412 rather than 304; both mean
    # "what you hold is still right" here, since If-None-Match is the only condition we send.
    if etag is not None and status in (304, 412):
        return NotModified(
            policy=parse_cache_control(cache_control) if cache_control else None,
            etag=_etag(response),
        )
    if not 200 <= status < 300:
        raise TargetFailure(f"HTTP {status} {response.reason_phrase}".rstrip())
    try:
        value = documents.normalise(content)
    except NotJSON as exc:
        raise TargetFailure(f"answer is not JSON: {exc}") from None
    return Answer(value, parse_cache_control(cache_control), _etag(response))
