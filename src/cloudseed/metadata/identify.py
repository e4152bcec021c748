"""Who is asking: trust only what is configured or signed.

- Remote-address mode (default): the instance whose port has the request's source address.
  ``X-Forwarded-For``/``Forwarded`` count only when the connection comes from a configured
  trusted proxy; from anyone else they are ignored, so a guest cannot claim another's address.
- Proxy mode (``[neutron] service_metadata_proxy``): the proxy names the instance in
  ``X-Instance-ID`` + ``X-Tenant-ID``, signed with the shared secret
  (``X-Instance-ID-Signature`` = hex HMAC-SHA256 of the instance id); or, with
  ``X-Metadata-Provider``, names the address in ``X-Forwarded-For`` and its provider, which
  cloudseed takes to be the network (id or name) the address is on.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from cloudseed.metadata.errors import BadProxyRequest, BadSignature, UnknownCaller
from cloudseed.settings import Settings, split_list
from cloudseed.signing import Verifier

Headers = Sequence[tuple[bytes, bytes]]


@dataclass(frozen=True, slots=True)
class ByAddress:
    address: str


@dataclass(frozen=True, slots=True)
class ByInstance:
    instance_id: str
    tenant_id: str
    address: str | None  # X-Forwarded-For, for local-ipv4 only


@dataclass(frozen=True, slots=True)
class ByProvider:
    provider: str
    address: str


Claim = ByAddress | ByInstance | ByProvider


class Identifier:
    def __init__(self, settings: Settings) -> None:
        self.proxy_mode = settings.neutron.service_metadata_proxy
        self.secret = settings.neutron.metadata_proxy_shared_secret
        self._verifier = Verifier(self.secret)
        self.trusted = tuple(
            ipaddress.ip_network(n, strict=False)
            for n in split_list(settings.metadata.trusted_proxies)
        )

    def claim(self, peer: str | None, headers: Headers) -> Claim:
        if self.proxy_mode:
            return self._proxy_claim(headers)
        if peer is None:
            raise UnknownCaller("no source address")
        if self.trusted and self.is_trusted(peer):
            return ByAddress(self._forwarded_client(peer, headers))
        return ByAddress(peer)

    def is_trusted(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in net for net in self.trusted)

    def relayed_by_guest(self, peer: str | None, headers: Headers) -> bool:
        """Whether the request passed through a forwarder we do not trust (an open proxy in
        a guest, say): session tokens are never handed out through one, as in EC2.

        The proxies cloudseed trusts (a signing metadata proxy, ``trusted_proxies``) add one
        hop for the guest; a further hop was added by someone else."""
        hops = _hops(headers)
        if self.proxy_mode:
            return len(hops) > 1
        if peer is not None and self.trusted and self.is_trusted(peer):
            return sum(1 for hop in hops if not self.is_trusted(hop)) > 1
        return bool(hops)

    def _forwarded_client(self, peer: str, headers: Headers) -> str:
        """The client as the trusted proxies report it: walking the chain from the nearest
        hop, the first address that is not itself a trusted proxy."""
        hops = _hops(headers)
        for hop in reversed(hops):
            if not self.is_trusted(hop):
                return hop
        return hops[0] if hops else peer

    def _proxy_claim(self, headers: Headers) -> Claim:
        found: dict[bytes, list[str]] = {}
        for name, value in headers:
            if name.startswith(b"x-"):
                found.setdefault(name, []).append(value.decode("latin-1"))
        forwarded = found.get(b"x-forwarded-for", [""])[0].split(",")[0].strip() or None
        provider = _single(found, b"x-metadata-provider", "X-Metadata-Provider")
        if provider is not None:
            if forwarded is None:
                raise BadProxyRequest("X-Forwarded-For is missing from request.")
            if self.secret:
                self._check(
                    provider,
                    _single(
                        found, b"x-metadata-provider-signature", "X-Metadata-Provider-Signature"
                    ),
                )
            return ByProvider(provider, forwarded)
        instance_id = _single(found, b"x-instance-id", "X-Instance-ID")
        if instance_id is None:
            raise BadProxyRequest("X-Instance-ID header is missing from request.")
        signature = _single(found, b"x-instance-id-signature", "X-Instance-ID-Signature")
        if signature is None:
            raise BadProxyRequest("X-Instance-ID-Signature header is missing from request.")
        tenant_id = _single(found, b"x-tenant-id", "X-Tenant-ID")
        if tenant_id is None:
            raise BadProxyRequest("X-Tenant-ID header is missing from request.")
        self._check(instance_id, signature)
        return ByInstance(instance_id, tenant_id, forwarded)

    def _check(self, value: str, signature: str | None) -> None:
        if not self._verifier.valid(value, signature):
            raise BadSignature()


def _single(found: dict[bytes, list[str]], name: bytes, label: str) -> str | None:
    values = found.get(name)
    if not values:
        return None
    if len(values) > 1:
        raise BadProxyRequest(f"Multiple {label} headers found within request.")
    return values[0]


def _hops(headers: Headers) -> list[str]:
    """The forwarding chain from Forwarded and X-Forwarded-For, farthest first."""
    hops: list[str] = []
    for name, value in headers:
        if name == b"forwarded":
            hops += _forwarded_for(value.decode("latin-1"))
        elif name == b"x-forwarded-for":
            hops += [h.strip() for h in value.decode("latin-1").split(",") if h.strip()]
    return hops


def _forwarded_for(value: str) -> list[str]:
    """The ``for=`` addresses of an RFC 7239 Forwarded header, in order."""
    hops = []
    for element in value.split(","):
        for pair in element.split(";"):
            key, _, raw = pair.strip().partition("=")
            if key.lower() == "for" and raw:
                address = raw.strip('"')
                if address.startswith("["):  # "[2001:db8::1]:4711"
                    address = address[1:].partition("]")[0]
                elif address.count(":") == 1:  # "192.0.2.1:4711"
                    address = address.partition(":")[0]
                hops.append(address)
    return hops
