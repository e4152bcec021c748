"""A GET's document from a cached guest, when it takes no IO (metadata/app.py: the ASGI path
and the answers written at once, respond_now, both take their documents from here)."""

from __future__ import annotations

from collections.abc import Callable

from cloudseed.metadata import events, render, render_ec2, tree
from cloudseed.metadata import versions as v
from cloudseed.metadata.answers import BINARY, JSON, Answer
from cloudseed.metadata.delivery import VIA_METADATA
from cloudseed.metadata.documents import GuestDocuments
from cloudseed.metadata.errors import NoSuchDocument
from cloudseed.metadata.facts import GuestFacts
from cloudseed.vendordata import Vendordata

# What to call once a guest has been sent its keys a given way (None: nothing to record).
Delivered = Callable[[GuestDocuments, str], Callable[[], None] | None]


def document_now(
    target: tree.Target,
    guest: GuestDocuments,
    address: str | None,
    *,
    vendordata: Vendordata,
    dhcp_domain: str,
    delivered: Delivered,
) -> Answer | None:
    """A GET's document when it takes no IO; None for the ones that may (vendordata's
    dynamic targets, the EC2 tree's signed documents) or name nothing."""
    facts = guest.facts
    kind = target.kind
    if kind == tree.META_DATA:
        body = guest.meta_data(target.version).render()
        return Answer(200, body, JSON, sent=delivered(guest, VIA_METADATA))
    if kind == tree.USER_DATA or kind == tree.EC2_USER_DATA:
        data = render.user_data(facts)
        if data is None:
            raise NoSuchDocument("no user data")
        return Answer(200, data, BINARY)
    if kind == tree.NETWORK_DATA:
        return Answer(200, guest.network_data(), JSON)
    if kind == tree.VENDOR_DATA:
        vendor_data = vendordata.vendor_data_json_for(dict(facts.meta))
        if vendor_data is None:
            raise NoSuchDocument("StaticJSON is not a vendordata provider")
        return Answer(200, vendor_data, JSON)
    if kind == tree.VENDOR_DATA2:
        shared = vendordata.static_only_vendor_data2()
        if shared is None:
            return None
        return Answer(200, vendordata.vendor_data2_for(dict(facts.meta), shared), JSON)
    if kind == tree.OPENSTACK_INDEX:
        return Answer(200, render.OPENSTACK_INDEX)
    if kind == tree.OPENSTACK_VERSION:
        return Answer(
            200,
            render.openstack_listing(
                facts,
                target.version,
                vendor_data_json=vendordata.vendor_data_json is not None,
            ),
        )
    if kind == tree.PASSWORD:
        return Answer(200, facts.password.encode())
    if kind == tree.EC2_INDEX_IDENTIFIED:
        return Answer(200, render_ec2.EC2_INDEX)
    if kind == tree.EC2_VERSION:
        dynamic = b"dynamic/\n" if v.at_least(target.version, v.EC2_DYNAMIC) else b""
        return Answer(
            200, dynamic + (b"meta-data/\nuser-data" if facts.user_data else b"meta-data/")
        )
    if kind == tree.EVENTS:  # lifecycle notices (2.111)
        return Answer(200, events.openstack(facts.events), JSON)
    if kind == tree.EC2_EVENTS:
        return Answer(200, events.ec2(facts.events, target.rest))
    if kind == tree.EC2_META_DATA:
        if target.rest[:1] == ("public-keys",) and facts.keys:
            keys = render_ec2.ec2_public_keys(facts, target.rest[1:])
            if keys is None:
                raise NoSuchDocument("no such key")
            return Answer(200, keys, sent=delivered(guest, VIA_METADATA))
        return _ec2(facts, target, address, dhcp_domain)
    return None


def _ec2(facts: GuestFacts, target: tree.Target, address: str | None, dhcp_domain: str) -> Answer:
    data = render_ec2.ec2_meta_data(
        facts, target.version, dhcp_domain=dhcp_domain, local_ipv4=address
    )
    if facts.events:
        data["events"] = {}  # listed only while the server has some (metadata/events.py)
    node: object = data
    for name in target.rest:
        if not isinstance(node, dict) or name not in node:
            raise NoSuchDocument("no such meta-data key")
        node = node[name]
    if isinstance(node, dict):
        return Answer(200, render_ec2.ec2_listing(node))
    return Answer(200, render_ec2.ec2_leaf(node))
