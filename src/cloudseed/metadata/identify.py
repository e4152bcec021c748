"""Who is asking: trust only what is configured or signed.

- Remote-address mode (default): the instance whose port has the request's source address
  (IPv4 or IPv6; an IPv6 zone is not part of it, and an IPv4 caller seen on a dual-stack
  listener as ``::ffff:a.b.c.d`` is ``a.b.c.d``).
  A forwarding header counts only when the connection comes from a configured trusted proxy,
  and then only the one kind the operator says that proxy sets (``[metadata]
  forwarded_header``), never merged with the other, and only its right-most untrusted hop
  (what the proxy appended); from anyone else they are ignored, so a guest cannot claim
  another's address.
- Proxy mode (``[neutron] service_metadata_proxy``): the proxy names the instance in
  ``X-Instance-ID`` + ``X-Tenant-ID``, signed with the shared secret
  (``X-Instance-ID-Signature`` = hex HMAC-SHA256 of the instance id); or, with
  ``X-Metadata-Provider``, names the address in ``X-Forwarded-For`` (its right-most entry,
  which the proxy appended) and its provider, which cloudseed takes to be the network (id or
  name) the address is on.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import NamedTuple

from cloudseed.metadata.errors import BadProxyRequest, BadSignature, UnknownCaller
from cloudseed.settings import Settings, split_list
from cloudseed.signing import Verifier

Headers = Sequence[tuple[bytes, bytes]]
XFF = b"x-forwarded-for"
FORWARDED = b"forwarded"
# What a metadata proxy sends (proxy mode): every other header is left alone.
PROXY_HEADERS = frozenset(
    {
        b"x-instance-id",
        b"x-instance-id-signature",
        b"x-tenant-id",
        b"x-metadata-provider",
        b"x-metadata-provider-signature",
        XFF,
    }
)


# Named tuples (immutable, and cheaper to make than frozen dataclasses): one per request.
class ByAddress(NamedTuple):
    address: str


class ByInstance(NamedTuple):
    instance_id: str
    tenant_id: str
    address: str | None  # X-Forwarded-For, for local-ipv4 only


class ByProvider(NamedTuple):
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
        # The one header the trusted proxies set; the other kind is the guest's own.
        self.header = FORWARDED if settings.metadata.forwarded_header == "forwarded" else XFF

    def claim(self, peer: str | None, headers: Headers) -> Claim:
        if self.proxy_mode:
            return self._proxy_claim(headers)
        if peer is None:
            raise UnknownCaller("no source address")
        if ":" in peer:
            peer = source_address(peer)
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
        hop for the guest, in their one header (``X-Forwarded-For`` for a signing proxy,
        ``[metadata] forwarded_header`` for trusted proxies); a further hop in that header,
        or any forwarding header of the other kind, was added by someone else."""
        if self.proxy_mode:
            return len(_hops(headers, XFF)) > 1 or bool(_hops(headers, FORWARDED))
        if peer is not None and ":" in peer:
            peer = source_address(peer)
        if peer is not None and self.trusted and self.is_trusted(peer):
            other = FORWARDED if self.header == XFF else XFF
            untrusted = [hop for hop in _hops(headers, self.header) if not self.is_trusted(hop)]
            return len(untrusted) > 1 or bool(_hops(headers, other))
        return bool(_hops(headers, XFF) or _hops(headers, FORWARDED))

    def _forwarded_client(self, peer: str, headers: Headers) -> str:
        """The client as the trusted proxies report it, from their one header only (never
        merged with the other kind, which the guest may have sent): walking the chain from
        the nearest hop, the first address that is not itself a trusted proxy, i.e. the one
        the trusted proxy nearest the guest appended. Anything a guest wrote is to its left.
        Without the header, the caller is the proxy itself."""
        hops = _hops(headers, self.header)
        return (self._nearest_untrusted(hops) or "") if hops else peer

    def _nearest_untrusted(self, hops: list[str]) -> str | None:
        for hop in reversed(hops):
            if not self.is_trusted(hop):
                return hop
        return hops[0] if hops else None

    def _proxy_claim(self, headers: Headers) -> Claim:
        # One pass; only the proxy's headers are kept: the first of each, and which came again.
        found: dict[bytes, bytes] = {}
        repeated: set[bytes] | None = None
        for name, value in headers:
            if name in PROXY_HEADERS:
                if name not in found:
                    found[name] = value
                elif repeated is None:
                    repeated = {name}
                else:
                    repeated.add(name)
        # The address the proxy appended: the right-most (the guest controls the rest).
        forwarded = None
        if XFF in found:
            forwarded = self._nearest_untrusted(_hops(headers, XFF)) or None
        provider = _single(found, repeated, b"x-metadata-provider", "X-Metadata-Provider")
        if provider is not None:
            if forwarded is None:
                raise BadProxyRequest("X-Forwarded-For is missing from request.")
            if self.secret:
                self._check(
                    provider,
                    _single(
                        found,
                        repeated,
                        b"x-metadata-provider-signature",
                        "X-Metadata-Provider-Signature",
                    ),
                )
            return ByProvider(provider, forwarded)
        instance_id = _single(found, repeated, b"x-instance-id", "X-Instance-ID")
        if instance_id is None:
            raise BadProxyRequest("X-Instance-ID header is missing from request.")
        signature = _single(found, repeated, b"x-instance-id-signature", "X-Instance-ID-Signature")
        if signature is None:
            raise BadProxyRequest("X-Instance-ID-Signature header is missing from request.")
        tenant_id = _single(found, repeated, b"x-tenant-id", "X-Tenant-ID")
        if tenant_id is None:
            raise BadProxyRequest("X-Tenant-ID header is missing from request.")
        self._check(instance_id, signature)
        return ByInstance(instance_id, tenant_id, forwarded)

    def _check(self, value: str, signature: str | None) -> None:
        if not self._verifier.valid(value, signature):
            raise BadSignature()


def source_address(peer: str) -> str:
    """An IPv6 peer as the address a port has: compressed, without its zone; IPv4 on a
    dual-stack socket (``::ffff:192.0.2.1``) as the IPv4 address it is."""
    try:
        address = ipaddress.IPv6Address(peer.partition("%")[0])
    except ValueError:
        return peer
    mapped = address.ipv4_mapped
    return str(mapped) if mapped is not None else str(address)


def _single(
    found: dict[bytes, bytes], repeated: set[bytes] | None, name: bytes, label: str
) -> str | None:
    value = found.get(name)
    if value is None:
        return None
    if repeated is not None and name in repeated:
        raise BadProxyRequest(f"Multiple {label} headers found within request.")
    return value.decode("latin-1")


def _hops(headers: Headers, which: bytes) -> list[str]:
    """The forwarding chain in one kind of header (every line of it, in order), farthest
    first. Entries are normalised addresses; one that is not an address (or is empty) is kept
    as it is, and then matches no instance."""
    hops: list[str] = []
    for name, value in headers:
        if name == which:
            text = value.decode("latin-1")
            raw = _forwarded_for(text) if which == FORWARDED else text.split(",")
            hops += [_address(h) for h in raw]  # an empty entry is an unknown hop
    return hops


def _forwarded_for(value: str) -> list[str]:
    """The ``for=`` values of an RFC 7239 Forwarded header, in order (one per element; an
    element without ``for=`` counts as an unknown hop)."""
    hops = []
    for element in value.split(","):
        found = "unknown"
        for pair in element.split(";"):
            key, _, raw = pair.strip().partition("=")
            if key.strip().lower() == "for":
                found = raw
        hops.append(found)
    return hops


def _address(raw: str) -> str:
    """``raw`` (``192.0.2.1``, ``192.0.2.1:4711``, ``"[2001:db8::1]:4711"``, ``2001:db8::1``)
    as a normalised address, or as it is when it is none."""
    text = raw.strip().strip('"').strip()
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return text
