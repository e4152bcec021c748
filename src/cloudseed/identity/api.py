"""What relying parties verify signed identities with, on the compute API, without
authentication (they may have no cloudseed account; these are public keys):

- ``GET /v2.1/instance-identity/certificates``: the X.509 certificates of the published keys
  (JSON; ``Accept: application/x-pem-file`` gives the PEM bundle for ``openssl -certfile``);
- ``GET /v2.1/instance-identity/jwks``: the same keys as a JWK Set;
- ``GET /.well-known/openid-configuration``: OpenID discovery, pointing at the JWKS.

They exist at every microversion (an extension, like bootstrap-history). Each answer may be
cached for ``[identity] key_cache_seconds``: a rotated key signs only after twice that, so a
relying party that honours the header has fetched it before any token carries its ``kid``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cloudseed.identity import publication
from cloudseed.identity.issuer import issuer_of
from cloudseed.identity.keyring import Keyring, PublishedKey
from cloudseed.identity.publication import CERTIFICATES, DISCOVERY, JWKS, PEM
from cloudseed.settings import Settings
from cloudseed.web.links import base_url
from cloudseed.web.requests import settings_of
from cloudseed.web.responses import JSONResponse
from cloudseed.web.state import fragment_of

PUBLIC_PATHS = frozenset({CERTIFICATES, JWKS, DISCOVERY})


@dataclass(frozen=True)
class IdentityState:
    """The identity routes' fragment of the app's state (``web/state.py``): the signing keys,
    read from the API database and cached briefly."""

    keyring: Keyring


def keyring_of(request: Request) -> Keyring:
    return fragment_of(request, IdentityState).keyring


def _cache_headers(request: Request) -> dict[str, str]:
    return {
        "Cache-Control": publication.cache_control(settings_of(request).identity.key_cache_seconds)
    }


async def _published(request: Request) -> tuple[list[PublishedKey], str]:
    keyring = keyring_of(request)
    keyset = await keyring.keys()
    signing = keyset.signing(keyring.clock())
    return keyring.published(keyset), signing.kid if signing else ""


async def certificates(request: Request) -> Response:
    published, signing = await _published(request)
    headers = _cache_headers(request)
    if PEM in request.headers.get("accept", ""):
        return Response(publication.certificates_pem(published), media_type=PEM, headers=headers)
    return JSONResponse(publication.certificates(published, signing), headers=headers)


async def jwks(request: Request) -> Response:
    published, _ = await _published(request)
    return JSONResponse(publication.jwks(published), headers=_cache_headers(request))


def jwks_uri(request: Request, settings: Settings) -> str:
    """The JWKS's URL in the discovery document. Relying parties fetch the keys they trust
    from it, so it comes from configuration whenever there is some: ``[identity] issuer``
    (the API's public URL, where discovery itself is found), else ``[api]
    compute_link_prefix``. Only with neither is it where this request reached the API, which
    a client chooses with its ``Host`` header (docs/identity.md says to set the issuer)."""
    if settings.identity.issuer:
        return settings.identity.issuer.rstrip("/") + JWKS
    return base_url(request, settings.api.compute_link_prefix) + JWKS


async def discovery(request: Request) -> Response:
    settings = settings_of(request)
    # The issuer is the configured one, the same the tokens carry. In a worker thread:
    # without [identity] issuer it may ask DNS for this host's name.
    issuer = await asyncio.to_thread(issuer_of, settings)
    body = publication.discovery(issuer, jwks_uri(request, settings))
    return JSONResponse(body, headers=_cache_headers(request))


routes = [
    Route(CERTIFICATES, certificates, methods=["GET"]),
    Route(JWKS, jwks, methods=["GET"]),
    Route(DISCOVERY, discovery, methods=["GET"]),
]
