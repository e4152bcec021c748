"""What a signed identity says about an instance: EC2's instance identity document and the
identity token's claims, from plain values (the metadata service hands them in). IO-free.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from cloudseed.identity.errors import BadAudience

DOCUMENT_VERSION = "2017-09-30"  # the format version EC2's documents carry
ARCHITECTURE = "x86_64"  # the only one cloudseed's drivers run
MAX_AUDIENCE = 255
# The identity token's claims, as token_claims() writes them (and discovery lists them).
CLAIMS = (
    "iss",
    "sub",
    "aud",
    "iat",
    "nbf",
    "exp",
    "jti",
    "project_id",
    "image_id",
    "flavor",
    "availability_zone",
    "host_keys",
)


@dataclass(frozen=True, slots=True)
class InstanceIdentity:
    uuid: str
    ec2_instance_id: str  # i-%08x, as the EC2 meta-data tree says
    ec2_image_id: str | None  # ami-%08x, likewise (None: no image, a volume-backed Nova instance)
    image_id: str  # the image's uuid
    project_id: str
    flavor: str
    availability_zone: str | None
    private_ip: str | None
    created_at: dt.datetime | None  # naive UTC
    # aki-/ari- ids where the EC2 tree shows them (the Nova drop-in's instances booted with a
    # kernel and ramdisk); cloudseed's own servers have none.
    ec2_kernel_id: str | None = None
    ec2_ramdisk_id: str | None = None


def ec2_document(instance: InstanceIdentity, *, region: str = "") -> bytes:
    """The document as EC2 writes it: its fields in its order, its ``"key" : value`` layout,
    and the fields cloudseed has no use for present as null, so parsers written for EC2
    find everything they look for."""
    pending = instance.created_at
    document = {
        "accountId": instance.project_id,
        "architecture": ARCHITECTURE,
        "availabilityZone": instance.availability_zone,
        "billingProducts": None,
        "devpayProductCodes": None,
        "marketplaceProductCodes": None,
        "imageId": instance.ec2_image_id,
        "instanceId": instance.ec2_instance_id,
        "instanceType": instance.flavor,
        "kernelId": instance.ec2_kernel_id,
        "pendingTime": pending.strftime("%Y-%m-%dT%H:%M:%SZ") if pending else None,
        "privateIp": instance.private_ip,
        "ramdiskId": instance.ec2_ramdisk_id,
        "region": region or instance.availability_zone,
        "version": DOCUMENT_VERSION,
    }
    return json.dumps(document, indent=2, separators=(",", " : "), ensure_ascii=False).encode()


def token_claims(
    instance: InstanceIdentity,
    *,
    issuer: str,
    audience: str,
    now: int,
    ttl: int,
    jti: str,
    host_keys: list[str],
) -> dict[str, Any]:
    """The identity token's claims: the registered ones (RFC 7519), then cloudseed's."""
    return {
        "iss": issuer,
        "sub": instance.uuid,
        "aud": audience,
        "iat": now,
        "nbf": now,
        "exp": now + ttl,
        "jti": jti,
        "project_id": instance.project_id,
        "image_id": instance.image_id,
        "flavor": instance.flavor,
        "availability_zone": instance.availability_zone,
        "host_keys": host_keys,
    }


def audience_of(query: bytes) -> str:
    """The one ``audience`` of identity_token's query string: 1-255 printable characters of
    valid UTF-8 (so no lone surrogate, no control character); nothing else may be asked."""
    try:
        # Strict both ways: raw bytes outside ASCII, and percent-escapes that are not UTF-8
        # (Python's codec also refuses encoded surrogates, %ED%A0%80), are errors.
        pairs = parse_qsl(
            query.decode("ascii"),
            keep_blank_values=True,
            encoding="utf-8",
            errors="strict",
            max_num_fields=10,
        )
    except (UnicodeDecodeError, ValueError):
        raise BadAudience("The query string is not valid UTF-8 or has too many fields.") from None
    unknown = sorted({name for name, _ in pairs if name != "audience"})
    if unknown:
        raise BadAudience(f"Unknown query parameter {unknown[0][:40]!r}: only audience is taken.")
    if not pairs:
        raise BadAudience("The audience query parameter is required.")
    if len(pairs) > 1:
        raise BadAudience("Give the audience query parameter once.")
    audience = pairs[0][1]
    if not 1 <= len(audience) <= MAX_AUDIENCE or not audience.isprintable():
        raise BadAudience(f"The audience must be 1 to {MAX_AUDIENCE} printable characters.")
    return audience
