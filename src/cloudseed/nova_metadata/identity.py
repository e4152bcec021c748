"""Signed instance identity in the drop-in (docs/identity.md, docs/nova-dropin.md): EC2's
``dynamic/instance-identity/`` tree and the OpenStack tree's identity token for Nova's
instances, signed with keys kept in a small database of cloudseed's own (``[cloudseed_metadata]
connection``, migrated by ``cloudseed nova-metadata ... db sync``), rotated as cloudseed's own
keys are (``identity rotate``).

What is signed is the Nova instance as the drop-in shows it: its uuid, the EC2 ids of its
``meta-data/`` tree (``instance_id_mappings``, ``s3_images``), project, image, flavor,
availability zone, ``local-ipv4`` and ``created_at``. There is no compute API here, so the
public keys are served on the metadata listener itself, without identifying the caller (they
are public): OpenID discovery, the JWKS and the certificates, at the paths cloudseed's compute
API serves them, so a relying party set up for either finds them the same way. The ``identity
jwks|certificates`` commands print them for relying parties that cannot reach the listener.
"""

from __future__ import annotations

import json
import logging
import posixpath

from cloudseed.db.engines import Database
from cloudseed.errors import ConfigError
from cloudseed.identity import claims, publication
from cloudseed.identity.errors import KeyUnreadable
from cloudseed.identity.issuer import issuer_of
from cloudseed.identity.keyring import Keyring
from cloudseed.metadata.answers import JSON, Answer
from cloudseed.metadata.signed_identity import Signatures
from cloudseed.nova_metadata import paths
from cloudseed.nova_metadata.config import NovaMetadataConfig
from cloudseed.nova_metadata.databases import check_reachable, driver_url
from cloudseed.nova_metadata.facts import InstanceFacts
from cloudseed.settings import Settings

log = logging.getLogger(__name__)

DATABASE = "cloudseed's database ([cloudseed_metadata] connection)"
PUBLIC_PATHS = frozenset({publication.DISCOVERY, publication.JWKS, publication.CERTIFICATES})
PEM = publication.PEM.encode()
DYNAMIC = "dynamic"


def open_database(config: NovaMetadataConfig) -> Database:
    """cloudseed's own database, as cloudseed opens its databases (SQLite in WAL mode, ...),
    from a URL written as Nova's are (its drivers mapped to this environment's)."""
    url = config.identity_database_url
    assert url is not None
    return Database.connect("cloudseed_metadata", driver_url(url).render_as_string(False))


def instance_identity(facts: InstanceFacts, address: str | None) -> claims.InstanceIdentity:
    """The instance as its EC2 tree shows it (render.ec2_tree): ``local-ipv4`` is its first
    fixed IPv4 address, else the caller's."""
    fixed = facts.addresses.fixed_ipv4
    return claims.InstanceIdentity(
        uuid=facts.uuid,
        ec2_instance_id=facts.ec2.instance_id,
        ec2_image_id=facts.ec2.ami_id,
        image_id=facts.image_ref or "",
        project_id=facts.project_id,
        flavor=facts.flavor_name or "",
        availability_zone=facts.availability_zone,
        private_ip=(fixed[0] if fixed else "") or address,
        created_at=facts.created_at,
        ec2_kernel_id=facts.ec2.kernel_id,
        ec2_ramdisk_id=facts.ec2.ramdisk_id,
    )


def is_dynamic(target: paths.Target) -> bool:
    """``/<version>/dynamic/...`` of a version that has it (EC2 added it in 2009-04-04)."""
    return (
        target.kind == paths.EC2
        and target.rest[:1] == (DYNAMIC,)
        and paths.has_dynamic(target.version)
    )


def public_path(path: str) -> str | None:
    """The public-key path ``path`` names, normalised as Nova normalises paths; else None."""
    normal = posixpath.normpath("/" + path.lstrip("/"))
    return normal if normal in PUBLIC_PATHS else None


class NovaIdentity:
    def __init__(self, settings: Settings, db: Database) -> None:
        self.settings = settings
        self.db = db
        self.keyring = Keyring(db, settings.identity)
        self.signatures = Signatures(settings, self.keyring)
        self._cache_control = publication.cache_control(settings.identity.key_cache_seconds)

    @classmethod
    def open(cls, config: NovaMetadataConfig) -> NovaIdentity:
        return cls(config.settings, open_database(config))

    def close(self) -> None:
        self.db.dispose()

    async def ec2(self, facts: InstanceFacts, rest: tuple[str, ...], address: str | None) -> bytes:
        """``/<version>/dynamic/<rest>``: listings, the document or one of its signed forms."""
        return await self.signatures.ec2(rest, lambda: instance_identity(facts, address))

    async def token(self, facts: InstanceFacts, query: bytes) -> bytes:
        """An identity token for the audience the query names. No host keys: Nova's guests
        report none to the drop-in (the claim is an empty list)."""
        audience = claims.audience_of(query)
        return await self.signatures.token(instance_identity(facts, None), audience, [])

    async def public(self, path: str, headers: list[tuple[bytes, bytes]]) -> Answer:
        """One of ``PUBLIC_PATHS``, for anyone."""
        cache = ((b"cache-control", self._cache_control.encode()),)
        if path == publication.DISCOVERY:
            issuer = issuer_of(self.settings)  # configured (config.py): no DNS here
            body = publication.discovery(issuer, issuer + publication.JWKS)
            return Answer(200, _json(body), JSON, cache)
        keyring = self.keyring
        keyset = await keyring.keys()
        published = keyring.published(keyset)
        if path == publication.JWKS:
            return Answer(200, _json(publication.jwks(published)), JSON, cache)
        if any(name == b"accept" and PEM in value for name, value in headers):
            return Answer(200, publication.certificates_pem(published).encode(), PEM, cache)
        signing = keyset.signing(keyring.clock())
        body = publication.certificates(published, signing.kid if signing else "")
        return Answer(200, _json(body), JSON, cache)

    def check(self) -> str:
        """At start, once the schema is current: the keys load (the first one is made now
        if there is none, before any worker starts) and the signing one opens. Its kid;
        ConfigError otherwise."""
        try:
            keyset = self.keyring.load()
            signer = self.keyring.signer(keyset)
        except KeyUnreadable as exc:
            raise ConfigError(
                f"the identity signing key {exc.kid} cannot be read: [cloudseed_metadata] "
                "identity_key_encryption_secret is missing or is not the one it was stored with"
            ) from None
        return signer.kid


def check_database(db: Database) -> None:
    """ConfigError naming the option and the URL (password masked) when ``db`` does not
    answer."""
    check_reachable(db, DATABASE)


def _json(body: object) -> bytes:
    return json.dumps(body).encode()
