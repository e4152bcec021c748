"""NoCloud seed URLs on the metadata listener: ``GET /nocloud/<token>/<file>`` (docs/metadata.md).

No proxy headers, no source address, no session token: the token in the path is all that
identifies the server (``nocloud/seeds.py``), so bare metal on a provisioning network, with no
metadata proxy, reads its seed like a VM. The path is read as the client sent it (the raw
path, before percent-decoding): exactly ``/nocloud/``, 64 token characters, ``/`` and one of
the four file names, nothing normalised, so ``..``, ``//``, ``%2F`` and the like name nothing.
Every refusal is the same 404, whichever part was wrong (shape, server, MAC, expiry, a
revoked or deleted server's seed), written to the access log as a warning with the token left
out (``redacted``): a log line must not be a working URL.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from cloudseed.metadata import asgi, nocloud
from cloudseed.metadata.answers import BINARY, Answer
from cloudseed.metadata.documents import GuestDocuments
from cloudseed.metadata.errors import EndpointDisabled, NoSuchDocument, UnknownCaller
from cloudseed.metadata.facts import vendordata_request
from cloudseed.metadata.store import GuestStore
from cloudseed.nocloud import seeds
from cloudseed.types import Receive, Scope, Send
from cloudseed.vendordata import Vendordata
from cloudseed.web.errors import MethodNotAllowed

PREFIX = "/nocloud/"
_PATH = re.compile(
    rb"/nocloud/(?P<token>[A-Za-z0-9_-]{64})/"
    rb"(?P<file>meta-data|user-data|vendor-data|network-config)"
)
ROUTE = "/nocloud/{token}/{file}"  # the metrics label (metrics/_routes.py)
YAML = b"text/yaml; charset=utf-8"
# A capability's documents: no cache between the guest and us keeps a copy.
NO_STORE = ((b"cache-control", b"no-store"),)


def is_seed_path(path: str) -> bool:
    """Whether the seed tree answers ``path`` (the decoded path; every other tree's 404s
    stay theirs)."""
    return path == "/nocloud" or path.startswith(PREFIX)


def seed_file(raw_path: bytes) -> str | None:
    """The file a well-formed seed path names, else None."""
    match = _PATH.fullmatch(raw_path)
    return match["file"].decode() if match else None


def redacted(raw_path: bytes) -> str:
    """The path as logs show it: never the token."""
    name = seed_file(raw_path)
    return f"/nocloud/<token>/{name}" if name else "/nocloud/<not a seed path>"


@dataclass
class SeedFiles:
    """The seed tree of one metadata app (built at its start-up)."""

    store: GuestStore[GuestDocuments]
    vendordata: Vendordata
    key: bytes
    dhcp_domain: str

    async def serve(
        self, scope: Scope, receive: Receive, send: Send, *, log_every_request: bool
    ) -> None:
        """Answer one HTTP request for a seed path (``is_seed_path``), the ASGI way: read
        from the raw path, logged with the token left out."""
        raw_path: bytes = scope.get("raw_path") or scope["path"].encode()

        async def answering(method: str, *_: object) -> Answer:
            return await self.answer(method, raw_path)

        shown = {**scope, "path": redacted(raw_path)}
        await asgi.respond(shown, receive, send, answering, log_every_request=log_every_request)

    async def answer(self, method: str, raw_path: bytes) -> Answer:
        if method not in ("GET", "HEAD"):
            raise MethodNotAllowed("GET, HEAD")
        answer = await self._file(raw_path)
        return answer._replace(headers=NO_STORE)

    async def _file(self, raw_path: bytes) -> Answer:
        match = _PATH.fullmatch(raw_path)
        if match is None:
            raise NoSuchDocument("not a seed path")
        presented = seeds.read_token(match["token"].decode())
        if presented is None:  # pragma: no cover - the path's pattern is the token's
            raise NoSuchDocument("not a seed token")
        guest = await self.store.by_uuid(presented.server)
        if guest is None:
            # Checked against a seed all the same: an unknown server takes as long as a
            # wrong MAC (seeds.valid compares whatever it is given).
            seeds.valid(self.key, presented, None, time.time())
            raise UnknownCaller("seed token of no live server")
        facts = guest.facts
        if not seeds.valid(self.key, presented, facts.nocloud_seed, time.time()):
            raise UnknownCaller("seed token not valid: wrong, expired, rotated or revoked")
        if facts.endpoint_disabled:  # 2.109: the server's metadata endpoint is off
            raise EndpointDisabled()
        file = match["file"].decode()
        if file == nocloud.META_DATA:
            return Answer(200, nocloud.meta_data(facts, dhcp_domain=self.dhcp_domain), YAML)
        if file == nocloud.USER_DATA:
            return Answer(200, nocloud.user_data(facts), BINARY)
        if file == nocloud.VENDOR_DATA:
            vendor_data2 = await self.vendordata.vendor_data2(vendordata_request(facts))
            body = nocloud.vendor_data(self.vendordata.vendor_data_json, vendor_data2)
            return Answer(200, body, BINARY)
        network = nocloud.network_config(facts)
        if network is None:
            raise NoSuchDocument("no ports: no network-config")
        return Answer(200, network, YAML)
