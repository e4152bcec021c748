"""Signed identity in the metadata service (docs/identity.md): EC2's
``dynamic/instance-identity/`` tree and the OpenStack tree's ``identity_token``.

``Signatures`` signs an ``identity.claims.InstanceIdentity`` for the guest that asks; it is
shared by this service and the Nova drop-in (``nova_metadata/identity.py``), which differ only
in where the instance's facts come from. ``SignedIdentity`` makes the identity of one of
cloudseed's own servers.

The caller is identified exactly as for every other document (the app hands in its guest);
the token also needs a session token, which the app checks first. Keys come from
``identity.keyring`` (a database, cached briefly); signing runs in a worker thread, so a boot
storm of guests asking for their documents does not stall the event loop, and the signed
forms of a document are kept until it or the signing key changes.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import hashlib
import secrets
from collections.abc import Callable

from cloudseed.cells.service import CellDatabases
from cloudseed.identity import claims
from cloudseed.identity import signing_keys as keys
from cloudseed.identity.host_keys import host_key_fingerprints
from cloudseed.identity.issuer import issuer_of
from cloudseed.identity.keyring import Keyring
from cloudseed.identity.service import KeySet
from cloudseed.metadata import render_ec2
from cloudseed.metadata import versions as v
from cloudseed.metadata.errors import NoSuchDocument
from cloudseed.metadata.facts import GuestFacts
from cloudseed.settings import Settings

INSTANCE_IDENTITY = "instance-identity"
FORMS = ("document", "pkcs7", "rsa2048", "signature")
_SIGNED_MAX = 1024  # signed forms kept per worker (about 2 KB each); emptied when full


class Signatures:
    """The signed forms of instances' identities, with the keys of ``keyring``."""

    def __init__(self, settings: Settings, keyring: Keyring) -> None:
        self.settings = settings
        self.keyring = keyring
        self.region = settings.identity.region
        self.ttl = settings.identity.token_ttl_seconds
        self._signed: dict[tuple[bytes, str, str], bytes] = {}  # (digest, kid, form)

    async def ec2(
        self, rest: tuple[str, ...], instance: Callable[[], claims.InstanceIdentity]
    ) -> bytes:
        """``/<version>/dynamic/<rest>``: listings, the document, or one of its signed forms
        (``instance`` is asked only for those)."""
        if not rest:
            return f"{INSTANCE_IDENTITY}/".encode()
        if rest[0] != INSTANCE_IDENTITY or len(rest) > 2:
            raise NoSuchDocument("no such dynamic data")
        if len(rest) == 1:
            return "\n".join(FORMS).encode()
        form = rest[1]
        if form not in FORMS:
            raise NoSuchDocument("no such instance identity form")
        document = claims.ec2_document(instance(), region=self.region)
        if form == "document":
            return document
        keyset = await self.keyring.keys()
        return await asyncio.to_thread(self._signed_form, keyset, document, form)

    def _signed_form(self, keyset: KeySet, document: bytes, form: str) -> bytes:
        signer = self.keyring.signer(keyset)
        key = (hashlib.sha256(document).digest(), signer.kid, form)
        cached = self._signed.get(key)
        if cached is not None:
            return cached
        if form == "signature":
            signed = base64.b64encode(keys.sign(signer.private_key, document))
        else:
            # pkcs7 and rsa2048 are the same here: EC2 signs pkcs7 with DSA and SHA-1, which
            # cloudseed has no key for (and SHA-1 signatures are deprecated); both are
            # RSA-2048 with SHA-256, attached, as EC2's rsa2048.
            signed = keys.pkcs7_body(signer.private_key, signer.certificate, document).encode()
        if len(self._signed) >= _SIGNED_MAX:
            self._signed.clear()
        self._signed[key] = signed
        return signed

    async def token(
        self, instance: claims.InstanceIdentity, audience: str, host_keys: list[str]
    ) -> bytes:
        """An identity token for ``instance``, for ``audience`` (``claims.audience_of``)."""
        keyset = await self.keyring.keys()
        return await asyncio.to_thread(self._token, keyset, instance, audience, host_keys)

    def _token(
        self,
        keyset: KeySet,
        instance: claims.InstanceIdentity,
        audience: str,
        host_keys: list[str],
    ) -> bytes:
        signer = self.keyring.signer(keyset)
        now = self.keyring.clock()
        payload = claims.token_claims(
            instance,
            issuer=issuer_of(self.settings),  # here, in a worker thread: it may ask DNS
            audience=audience,
            now=int(now.replace(tzinfo=dt.UTC).timestamp()),  # the clock is naive UTC
            ttl=self.ttl,
            jti=secrets.token_urlsafe(16),
            host_keys=host_keys,
        )
        return keys.encode_jwt(payload, signer.private_key, signer.kid).encode()


class SignedIdentity:
    """The identity of cloudseed's own servers, signed."""

    def __init__(self, settings: Settings, keyring: Keyring, cells: CellDatabases) -> None:
        self.signatures = Signatures(settings, keyring)
        self.cells = cells
        self.dhcp_domain = settings.api.dhcp_domain

    def instance(
        self, facts: GuestFacts, version: str, address: str | None
    ) -> claims.InstanceIdentity:
        # The EC2 ids and address exactly as this guest's meta-data tree shows them.
        ec2 = render_ec2.ec2_meta_data(
            facts, version, dhcp_domain=self.dhcp_domain, local_ipv4=address
        )
        return claims.InstanceIdentity(
            uuid=facts.uuid,
            ec2_instance_id=ec2["instance-id"],
            ec2_image_id=ec2["ami-id"],
            image_id=facts.image_ref,
            project_id=facts.project_id,
            flavor=facts.flavor_name,
            availability_zone=facts.availability_zone,
            private_ip=ec2["local-ipv4"],
            created_at=facts.created_at,
        )

    async def ec2(
        self, facts: GuestFacts, version: str, rest: tuple[str, ...], address: str | None
    ) -> bytes:
        """``/<version>/dynamic/<rest>``: listings, the document, or one of its signed forms."""
        return await self.signatures.ec2(rest, lambda: self.instance(facts, version, address))

    async def token(self, facts: GuestFacts, query: bytes) -> bytes:
        """An identity token for ``facts``' instance, for the audience the query names."""
        audience = claims.audience_of(query)  # a 400 before any database is asked
        host_keys = await asyncio.to_thread(host_key_fingerprints, self.cells, facts.uuid)
        instance = self.instance(facts, v.EC2_LATEST, None)
        return await self.signatures.token(instance, audience, host_keys)
