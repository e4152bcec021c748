"""The signing keys as one process uses them: read from the API database, kept for
``[identity] key_cache_seconds``, parsed (and decrypted) once per key.

Every process (API and metadata workers, on every host) reads the same rows and decides from
them and the time alone which key signs and which are published (``service.KeySet``), so they
agree without talking to each other. A process that finds no key creates the first one; two
doing it at once collide on the unique current slot, and the loser reads the winner's.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy.exc import IntegrityError

from cloudseed.db.base import utcnow
from cloudseed.db.engines import Database
from cloudseed.identity import service
from cloudseed.identity import signing_keys as keys
from cloudseed.identity.errors import KeyUnreadable
from cloudseed.settings import IdentitySection


@dataclass(frozen=True, slots=True)
class Signer:
    kid: str
    private_key: rsa.RSAPrivateKey
    certificate: x509.Certificate


@dataclass(frozen=True, slots=True)
class PublishedKey:
    kid: str
    certificate: x509.Certificate
    certificate_pem: str
    created_at: dt.datetime
    retired_at: dt.datetime | None
    published_until: dt.datetime | None

    @property
    def public_key(self) -> rsa.RSAPublicKey:
        key = self.certificate.public_key()
        assert isinstance(key, rsa.RSAPublicKey)
        return key


class Keyring:
    def __init__(
        self,
        db: Database,
        settings: IdentitySection,
        *,
        clock: Callable[[], dt.datetime] = utcnow,
    ) -> None:
        self.db = db
        self.clock = clock  # naive UTC, as the database stores times
        self._secret = settings.key_encryption_secret
        self._cache_seconds = settings.key_cache_seconds
        self._grace = dt.timedelta(seconds=settings.key_grace_seconds)
        self._activation = dt.timedelta(seconds=2 * settings.key_cache_seconds)
        self._lock = threading.Lock()
        self._keyset: service.KeySet | None = None
        self._loaded_at = 0.0  # time.monotonic() of the last read
        self._private: dict[str, rsa.RSAPrivateKey] = {}
        self._certificates: dict[str, x509.Certificate] = {}

    # -- reading ----------------------------------------------------------------------------

    def cached(self) -> service.KeySet | None:
        """The keys read less than ``key_cache_seconds`` ago, or None."""
        keyset = self._keyset
        if keyset is not None and time.monotonic() - self._loaded_at < self._cache_seconds:
            return keyset
        return None

    def load(self) -> service.KeySet:
        """The keys from the database (blocking; creates the first key if there is none)."""
        with self._lock:
            keyset = self.cached()
            if keyset is not None:
                return keyset  # another thread read them while this one waited
            stored = self._read()
            if not any(k.current for k in stored):
                stored = self._create_first()
            keyset = service.KeySet(tuple(stored), self._grace, self._activation)
            kids = {k.kid for k in stored}
            for parsed in (self._private, self._certificates):
                for kid in [kid for kid in parsed if kid not in kids]:
                    del parsed[kid]  # deleted keys are forgotten here too
            self._keyset, self._loaded_at = keyset, time.monotonic()
            return keyset

    async def keys(self) -> service.KeySet:
        keyset = self.cached()
        if keyset is None:
            keyset = await asyncio.to_thread(self.load)
        return keyset

    def _read(self) -> list[service.StoredKey]:
        with self.db.read() as session:
            return service.stored_keys(session)

    def _create_first(self) -> list[service.StoredKey]:
        # IntegrityError: another process created it first; read theirs.
        with contextlib.suppress(IntegrityError):
            self.db.run(
                lambda session: service.ensure_key(session, now=self.clock(), secret=self._secret),
                write=True,
            )
        return self._read()

    # -- using ------------------------------------------------------------------------------

    def signer(self, keyset: service.KeySet) -> Signer:
        stored = keyset.signing(self.clock())
        assert stored is not None  # load() made sure there is a current key
        private = self._private.get(stored.kid)
        if private is None:
            try:
                private = keys.load_private(stored.private_pem, secret=self._secret)
            except ValueError as exc:
                raise KeyUnreadable(stored.kid) from exc
            self._private[stored.kid] = private
        return Signer(stored.kid, private, self._certificate(stored))

    def published(self, keyset: service.KeySet) -> list[PublishedKey]:
        return [
            PublishedKey(
                kid=k.kid,
                certificate=self._certificate(k),
                certificate_pem=k.certificate_pem,
                created_at=k.created_at,
                retired_at=k.retired_at,
                published_until=k.published_until(self._grace),
            )
            for k in keyset.published(self.clock())
        ]

    def _certificate(self, stored: service.StoredKey) -> x509.Certificate:
        certificate = self._certificates.get(stored.kid)
        if certificate is None:
            certificate = keys.load_certificate(stored.certificate_pem)
            self._certificates[stored.kid] = certificate
        return certificate
