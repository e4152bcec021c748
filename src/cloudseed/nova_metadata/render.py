"""Nova's documents from an InstanceFacts snapshot: the OpenStack tree's files and the EC2 tree,
as Nova 34's metadata API renders them (nova/api/metadata/base.py). IO-free: what takes IO
(security groups from Neutron, vendordata, the password's write) is the caller's and comes in
as values.

JSON documents are written as Nova writes them (``json.dumps`` with its default separators and
ASCII escapes), in Nova's key order, so they are equal to Nova's byte for byte but for
``random_seed``, which is fresh in every answer (the document is rendered once around it:
cloudseed's ``SeededJSON``). The EC2 tree is built as Nova builds it, a dict per version, and
walked and printed by Nova's rules (``ec2_lookup``, ``ec2_print``): a directory lists its sorted
keys, sub-directories with ``/``, except that ``public-keys`` shows ``0=<key name>`` for its one
entry; a list is one item per line; anything else is its ``str``.

Where Nova's own code fails on a path (a walk below a leaf, ``/openstack/<v>/content``) it
answers 500 from its WSGI server; here those paths name nothing (404).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from cloudseed.metadata import versions as v
from cloudseed.metadata.render import SeededJSON
from cloudseed.nova_metadata import interfaces, paths
from cloudseed.nova_metadata.devices import devices
from cloudseed.nova_metadata.facts import InstanceFacts

TEXT = b"text/plain; charset=UTF-8"
JSON = b"application/json"
HTML = b"text/html; charset=UTF-8"  # webob's default, what Nova's password answers carry

# Where meta_data.json's network_config says the template is: the first content.
CONTENT = interfaces.CONTENT_KEY
CONTENT_PATH = f"/{paths.CONTENT}/{CONTENT}"
_SEED_MARKER = "cloudseed-nova-seed-marker-b1f0c7e2a9d4"
_SEED_JSON = json.dumps(_SEED_MARKER).encode()


class NotInTree(LookupError):
    """The path names nothing in the instance's tree (404)."""


def dumps(value: Any) -> bytes:
    """JSON as Nova's jsonutils.dump_as_bytes writes it."""
    return json.dumps(value).encode()


def hostname(facts: InstanceFacts, dhcp_domain: str) -> str | None:
    if dhcp_domain and facts.hostname is not None:
        return f"{facts.hostname}.{dhcp_domain}"
    return facts.hostname


# -- the OpenStack tree -----------------------------------------------------------------------


def openstack_versions(today: str) -> bytes:
    """``/openstack``: the versions up to today (Nova hides future ones), and latest."""
    shown = [name for name in v.OPENSTACK_VERSIONS if name <= today]
    return "\n".join([*shown, "latest"]).encode()


def openstack_listing(facts: InstanceFacts, version: str) -> bytes:
    """``/openstack/<version>``: the files of the version (vendor_data.json listed whether or
    not a provider serves it, as Nova lists it)."""
    names = [paths.META_DATA]
    if facts.user_data is not None:
        names.append(paths.USER_DATA)
    if v.at_least(version, v.GRIZZLY):
        names.append(paths.PASSWORD)
    if v.at_least(version, v.HAVANA):
        names.append(paths.VENDOR_DATA)
    if v.at_least(version, v.LIBERTY):
        names.append(paths.NETWORK_DATA)
    if v.at_least(version, v.NEWTON_TWO):
        names.append(paths.VENDOR_DATA2)
    return "\n".join(names).encode()


def meta_data_variant(version: str) -> str:
    """The oldest version whose meta_data.json is the same as ``version``'s."""
    variant = v.FOLSOM
    for step in (v.GRIZZLY, v.LIBERTY, v.NEWTON_ONE, v.OCATA, v.ROCKY, v.VICTORIA, v.EPOXY):
        if v.at_least(version, step):
            variant = step
    return variant


def meta_data(
    facts: InstanceFacts, version: str, *, dhcp_domain: str, network_template: bool = False
) -> SeededJSON:
    """``meta_data.json``, fields in Nova's order, with a hole for the random seed;
    ``network_template``: Nova's injected network template is rendered (interfaces.py)."""
    doc: dict[str, Any] = {"uuid": facts.uuid}
    if facts.meta:
        doc["meta"] = dict(facts.meta)
    if network_template and facts.network_config is not None:
        doc["network_config"] = {"name": "network_config", "content_path": CONTENT_PATH}
    if facts.key_name and facts.keypair is not None:
        pair = facts.keypair
        doc["public_keys"] = {pair.name: pair.public_key}
        doc["keys"] = [{"name": pair.name, "type": pair.type, "data": pair.public_key}]
    doc["hostname"] = hostname(facts, dhcp_domain)
    doc["name"] = facts.display_name
    doc["launch_index"] = facts.launch_index
    doc["availability_zone"] = facts.availability_zone
    if v.at_least(version, v.GRIZZLY):
        doc["random_seed"] = _SEED_MARKER
    if v.at_least(version, v.LIBERTY):
        doc["project_id"] = facts.project_id
    if v.at_least(version, v.NEWTON_ONE):
        doc["devices"] = devices(facts, version)
    if v.at_least(version, v.VICTORIA):
        doc["dedicated_cpus"] = list(facts.dedicated_cpus)
    body = dumps(doc)
    before, marker, after = body.partition(_SEED_JSON)
    if not marker:
        return SeededJSON(body, b"", b"", suffix=None)
    return SeededJSON(before + b'"', b"", b"", suffix=b'"' + after)


def network_data(facts: InstanceFacts) -> bytes:
    return dumps(facts.network_data if facts.network_data is not None else {})


class Later(Exception):
    """The document takes IO to make (vendor_data2.json asks DynamicJSON targets)."""


def openstack_file(
    facts: InstanceFacts,
    name: str,
    version: str,
    *,
    dhcp_domain: str,
    vendor_data_json: bytes | None,
    vendor_data2: bytes | None,
) -> tuple[bytes, bytes]:
    """(body, content type) of ``/openstack/<version>/<name>`` (``name`` one of paths'
    OPENSTACK_FILES), Nova's ``RouteConfiguration`` handlers: NotInTree where they find
    nothing. ``vendor_data_json``: the StaticJSON file (None: StaticJSON is not a provider);
    ``vendor_data2``: the document when it is the same for every instance, else None (Later).
    meta_data.json comes with a fresh random seed."""
    if name == paths.META_DATA:
        return meta_data(facts, version, dhcp_domain=dhcp_domain).render(), JSON
    if name == paths.LISTING:
        return openstack_listing(facts, version), TEXT
    if name == paths.USER_DATA:
        raw = facts.user_data_raw
        if raw is None:
            raise NotInTree("no user data")
        return raw, TEXT
    if name == paths.NETWORK_DATA:  # at every version, as Nova serves it
        return network_data(facts), TEXT
    if name == paths.PASSWORD:
        if not v.at_least(version, v.GRIZZLY):
            raise NotInTree("no password before 2013-04-04")
        return (facts.password or "").encode(), HTML
    if name == paths.VENDOR_DATA:
        if not v.at_least(version, v.HAVANA) or vendor_data_json is None:
            raise NotInTree("no vendor_data.json")
        return vendor_data_json, JSON
    if name == paths.VENDOR_DATA2:
        if not v.at_least(version, v.NEWTON_TWO):
            raise NotInTree("no vendor_data2.json before 2016-10-06")
        if vendor_data2 is None:
            raise Later(name)
        return vendor_data2, JSON
    raise NotInTree(name)


# -- the EC2 tree -----------------------------------------------------------------------------

EC2_VERSIONS = "\n".join([*v.EC2_VERSIONS, "latest"]).encode()
_NAME = "_name"  # Nova's marker of public-keys' one entry


def ec2_tree(
    facts: InstanceFacts,
    version: str,
    *,
    dhcp_domain: str,
    address: str | None,
    security_groups: Sequence[str],
    dynamic: bool = False,
) -> dict[str, Any]:
    """One version of the EC2 tree (Nova's get_ec2_metadata): ``meta-data``, and
    ``user-data`` when the instance has some. ``address`` is the caller's (local-ipv4 when
    the instance has no fixed IPv4 address). ``dynamic``: signed identity is served
    (identity.py walks ``dynamic/``; here it is only listed, from 2009-04-04, as EC2 lists
    it)."""
    name = hostname(facts, dhcp_domain)
    floating = facts.addresses.floating
    fixed = facts.addresses.fixed_ipv4
    data: dict[str, Any] = {
        "ami-id": facts.ec2.ami_id,
        "ami-launch-index": facts.launch_index,
        "ami-manifest-path": "FIXME",
        "instance-id": facts.ec2.instance_id,
        "hostname": name,
        "local-ipv4": (fixed[0] if fixed else "") or address,
        "reservation-id": facts.reservation_id,
        "security-groups": list(security_groups),
    }
    if facts.key_name:
        data["public-keys"] = {"0": {_NAME: f"0={facts.key_name}", "openssh-key": facts.key_data}}
    if v.at_least(version, "2007-01-19"):
        data["local-hostname"] = name
        data["public-hostname"] = name
        data["public-ipv4"] = floating[0] if floating else ""
    if v.at_least(version, "2007-08-29"):
        data["instance-type"] = facts.flavor_name
    if v.at_least(version, "2007-12-15"):
        data["block-device-mapping"] = dict(facts.block_devices)
        if facts.ec2.kernel_id:
            data["kernel-id"] = facts.ec2.kernel_id
        if facts.ec2.ramdisk_id:
            data["ramdisk-id"] = facts.ec2.ramdisk_id
    if v.at_least(version, "2008-02-01"):
        data["placement"] = {"availability-zone": facts.availability_zone}
    if v.at_least(version, "2008-09-01"):
        data["instance-action"] = "none"
    tree: dict[str, Any] = {"meta-data": data}
    if dynamic and paths.has_dynamic(version):
        tree["dynamic"] = {}
    raw = facts.user_data_raw
    if raw is not None:
        tree["user-data"] = raw
    return tree


def ec2_lookup(tree: dict[str, Any], tokens: Sequence[str]) -> Any:
    """The node at ``tokens`` below a version's tree (Nova's find_path_in_tree); NotInTree
    where Nova finds nothing, or fails."""
    node: Any = tree
    for token in tokens:
        if not isinstance(node, dict) or token not in node:
            raise NotInTree("/".join(tokens))
        node = node[token]
    return node


def ec2_nodes(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every node of a version's tree (``node``) with the path that names it, the tree's own
    first (Nova's marker of ``public-keys``' entry is not a path a guest walks)."""
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            if key != _NAME:
                yield from ec2_nodes(value, (*path, key))


def ec2_print(node: Any) -> bytes:
    """A node as Nova prints it (ec2_md_print)."""
    if isinstance(node, dict):
        lines = []
        for key in sorted(node):
            if key == _NAME:
                continue
            value = node[key]
            if isinstance(value, dict):
                lines.append(str(value[_NAME]) if _NAME in value else key + "/")
            else:
                lines.append(key)
        return "\n".join(lines).encode()
    if isinstance(node, list):
        return "\n".join(node).encode()
    if isinstance(node, bytes):
        return node
    return str(node).encode()


def ec2_document(
    facts: InstanceFacts,
    version: str,
    rest: Sequence[str],
    *,
    dhcp_domain: str,
    address: str | None,
    security_groups: Sequence[str],
    dynamic: bool = False,
) -> bytes:
    """``/ec2/<version>/<rest>``: the node's print, NotInTree where Nova finds nothing."""
    tree = ec2_tree(
        facts,
        version,
        dhcp_domain=dhcp_domain,
        address=address,
        security_groups=security_groups,
        dynamic=dynamic,
    )
    return ec2_print(ec2_lookup(tree, rest))


@dataclass(frozen=True, slots=True)
class Inputs:
    """What a document takes besides the instance: the settings and what IO brought."""

    dhcp_domain: str
    address: str | None = None  # the caller's (local-ipv4 without a fixed IPv4 address)
    security_groups: Sequence[str] = ()  # asked of Neutron when needs_security_groups
    vendor_data_json: bytes | None = None  # None: StaticJSON is not a provider
    vendor_data2: bytes | None = None  # None: it takes the DynamicJSON targets (Later)
    today: str = "9999-12-31"  # UTC date: /openstack hides later versions
    dynamic: bool = False  # signed identity is served: EC2 versions list dynamic/
    network_template: bool = False  # Nova's injected network template is rendered


def document(target: paths.Target, facts: InstanceFacts, inputs: Inputs) -> tuple[bytes, bytes]:
    """(body, content type) of any target but ``/`` (which needs no instance): NotInTree
    where Nova finds nothing, Later where it takes IO."""
    if target.kind == paths.EC2_VERSIONS:
        return EC2_VERSIONS, TEXT
    if target.kind == paths.OPENSTACK_VERSIONS:
        return openstack_versions(inputs.today), TEXT
    if target.kind == paths.CONTENT:  # Nova's only content: the network template
        if not (inputs.network_template and facts.network_config and target.rest == (CONTENT,)):
            raise NotInTree("no such content")
        return facts.network_config, TEXT
    if target.kind == paths.IDENTITY_TOKEN:  # not rendered here (identity.py)
        raise NotInTree(f"no {target.kind}")
    if target.kind == paths.EC2:
        body = ec2_document(
            facts,
            target.version,
            target.rest,
            dhcp_domain=inputs.dhcp_domain,
            address=inputs.address,
            security_groups=inputs.security_groups,
            dynamic=inputs.dynamic,
        )
        return body, TEXT
    return openstack_file(
        facts,
        target.rest[0],
        target.version,
        dhcp_domain=inputs.dhcp_domain,
        vendor_data_json=inputs.vendor_data_json,
        vendor_data2=inputs.vendor_data2,
    )


def cacheable(facts: InstanceFacts, target: paths.Target) -> bool:
    """Whether ``target``'s document depends on the instance alone (so it may be kept until
    the instance changes): not vendordata, security groups, the caller's address, the date,
    or meta_data.json's seed."""
    if target.kind == paths.OPENSTACK:
        return target.rest[0] not in (paths.META_DATA, paths.VENDOR_DATA, paths.VENDOR_DATA2)
    if target.kind == paths.EC2:
        return not (needs_security_groups(target) or depends_on_address(facts, target))
    return target.kind == paths.EC2_VERSIONS


def needs_security_groups(target: paths.Target) -> bool:
    """Whether the EC2 ``target`` shows the security groups' names (only their own leaf does;
    Nova asks Neutron for every document, the drop-in only for this one)."""
    return target.kind == paths.EC2 and target.rest[:2] == ("meta-data", "security-groups")


def depends_on_address(facts: InstanceFacts, target: paths.Target) -> bool:
    """Whether the EC2 ``target`` shows the caller's address (local-ipv4 of an instance
    without a fixed IPv4 address)."""
    return (
        target.kind == paths.EC2
        and not facts.addresses.fixed_ipv4
        and target.rest[:2] == ("meta-data", "local-ipv4")
    )
