"""The documents a booting guest's cloud-init asks for first, rendered when its instance is
loaded ahead of its first request (guests.py ``NovaGuest.prepare``), in the loading thread, so
that those requests find them made. IO-free.

What cloud-init asks (reference cloud-init.md; bench/storm_crawl.py): ``/openstack``, then
``meta_data.json``, ``user_data``, ``vendor_data.json``, ``vendor_data2.json`` and
``network_data.json`` at the newest version it knows (2018-08-27; the benchmarks ask
``latest``), then the EC2 tree at ``latest``, every listing and leaf. Of those, what the app
keeps per instance (render.py ``cacheable``): not the vendordata (shared, or a target's
answer), not ``security-groups`` (Neutron's), not a ``local-ipv4`` drawn from the caller's
address; ``meta_data.json`` is kept around a hole for its seed (``NovaGuest.meta_data``).
Each is rendered by the same code and inputs a request would use, so a document made ahead
is the one the request would have made.
"""

from __future__ import annotations

from collections.abc import Iterator

from cloudseed.metadata.versions import FIRST_ASKED
from cloudseed.nova_metadata import paths, render
from cloudseed.nova_metadata.facts import InstanceFacts

# The OpenStack versions cloud-init reads (its newest known one; the benchmarks' "latest").
OPENSTACK_VERSIONS = FIRST_ASKED
OPENSTACK_FILES = (paths.USER_DATA, paths.NETWORK_DATA)
EC2_VERSION = "latest"  # cloud-init's OpenStack datasource crawls the EC2 tree here


def _target(path: str) -> paths.Target:
    target = paths.parse(path)
    assert target is not None, path
    return target


def meta_data_versions() -> tuple[str, ...]:
    """The dated versions whose meta_data.json is made ahead."""
    return tuple(_target(f"/openstack/{v}/{paths.META_DATA}").version for v in OPENSTACK_VERSIONS)


def documents(
    facts: InstanceFacts, dhcp_domain: str
) -> Iterator[tuple[paths.Target, tuple[bytes, bytes]]]:
    """(target, (body, content type)) of every document above that the app keeps for
    ``facts``' instance; what names nothing for it (no user data) is left out."""
    inputs = render.Inputs(dhcp_domain=dhcp_domain)
    for version in OPENSTACK_VERSIONS:
        for name in OPENSTACK_FILES:
            target = _target(f"/openstack/{version}/{name}")
            if not render.cacheable(facts, target):
                continue
            try:
                document = render.document(target, facts, inputs)
            except render.NotInTree:
                continue
            yield target, document
    top = _target(f"/{EC2_VERSION}")
    tree = render.ec2_tree(
        facts, top.version, dhcp_domain=dhcp_domain, address=None, security_groups=()
    )
    for rest, node in render.ec2_nodes(tree):
        if not rest:
            continue  # the version's listing names dynamic/ where identity is served: left to
            # its request, which knows (render.Inputs.dynamic)
        target = paths.Target(paths.EC2, top.version, rest)
        if render.cacheable(facts, target):
            yield target, (render.ec2_print(node), render.TEXT)
