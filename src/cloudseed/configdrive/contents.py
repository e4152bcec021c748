"""What a config drive holds: a tree of paths and bytes. IO-free.

Every document comes from ``metadata/render.py``, the renderer the metadata service uses, so a
drive and the service cannot disagree; only ``random_seed`` differs (fresh per drive, as the
service's is fresh per request). Vendordata arrives already fetched (``DriveData``): the
builder asks the providers once per drive, not once per version directory as Nova does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cloudseed.metadata import render, render_ec2
from cloudseed.metadata import versions as v
from cloudseed.metadata.facts import GuestFacts

# Nova's [api] config_drive_skip_versions: EC2 versions left off drives.
DEFAULT_SKIP_VERSIONS = (
    "1.0 2007-01-19 2007-03-01 2007-08-29 2007-10-10 2007-12-15 2008-02-01 2008-09-01"
)
LATEST = "latest"
CONTENT_DIR = "openstack/content"


@dataclass(frozen=True, slots=True)
class DriveData:
    """Everything a drive is made of, apart from the instance record."""

    dhcp_domain: str
    # vendor_data.json as the metadata service serves it; None when StaticJSON is not a
    # provider (the service answers 404, and the drive has no such file).
    vendor_data_json: bytes | None
    vendor_data2_json: bytes
    # Known only while a create or rebuild runs (or carried over from the previous drive).
    admin_pass: str | None = field(default=None, repr=False)  # never shown
    files: tuple[tuple[str, bytes], ...] = ()
    # EC2 versions left off the drive ("latest" may be one of them).
    skip_versions: frozenset[str] = frozenset(DEFAULT_SKIP_VERSIONS.split())
    # The random seed of every meta_data.json on this drive; None draws one.
    seed: bytes | None = None


def skip_versions(value: str) -> frozenset[str]:
    """``config_drive_skip_versions`` (space separated, as Nova's) as a set."""
    return frozenset(value.split())


def content_path(index: int) -> str:
    """Where file ``index`` lives, as ``meta_data.json`` names it (relative to openstack/)."""
    return f"/content/{index:04d}"


def drive_tree(facts: GuestFacts, data: DriveData) -> dict[str, bytes]:
    """The drive's files, path -> bytes, directories implied by the paths. Paths use ``/``,
    have no leading slash, and come in a stable order (OpenStack tree, content, EC2 tree)."""
    tree: dict[str, bytes] = {}
    seed = data.seed if data.seed is not None else render.new_seed()
    files = [
        {"path": path, "content_path": content_path(i)} for i, (path, _) in enumerate(data.files)
    ]
    extra = {"admin_pass": data.admin_pass} if data.admin_pass is not None else None
    user_data = render.user_data(facts)
    network = render.network_data(facts)
    meta_by_variant: dict[str, bytes] = {}
    for name in (*v.OPENSTACK_VERSIONS, LATEST):
        version = v.openstack_version(name)
        assert version is not None
        variant = render.meta_data_variant(version, facts)
        if variant not in meta_by_variant:
            meta_by_variant[variant] = render.meta_data(
                facts, variant, dhcp_domain=data.dhcp_domain, extra=extra, files=files
            ).render(seed)
        base = f"openstack/{name}/"
        tree[base + "meta_data.json"] = meta_by_variant[variant]
        if user_data is not None:
            tree[base + "user_data"] = user_data
        if v.at_least(version, v.HAVANA) and data.vendor_data_json is not None:
            tree[base + "vendor_data.json"] = data.vendor_data_json
        if v.at_least(version, v.LIBERTY):
            tree[base + "network_data.json"] = network
        if v.at_least(version, v.NEWTON_TWO):
            tree[base + "vendor_data2.json"] = data.vendor_data2_json
    for index, (_, content) in enumerate(data.files):
        tree[f"openstack{content_path(index)}"] = content
    for name in (*v.EC2_VERSIONS, LATEST):
        if name in data.skip_versions:
            continue
        version = v.ec2_version(name)
        assert version is not None
        base = f"ec2/{name}/"
        tree[base + "meta-data.json"] = render_ec2.ec2_meta_data_json(
            facts, version, dhcp_domain=data.dhcp_domain
        )
        if user_data is not None:
            tree[base + "user-data"] = user_data
    return tree


def directories(paths: Iterable[str]) -> list[str]:
    """Every directory the paths need, parents before children, sorted."""
    found: set[str] = set()
    for path in paths:
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            found.add("/".join(parts[:depth]))
    return sorted(found, key=lambda d: (d.count("/"), d))


@dataclass(frozen=True, slots=True)
class Carried:
    """What a drive holds that cloudseed stores nowhere else: the admin password and the
    personality files of the last create or rebuild."""

    admin_pass: str | None = field(repr=False)  # never shown
    files: tuple[tuple[str, bytes], ...]


def carried_over(tree: Mapping[str, bytes]) -> Carried:
    """The admin password and files of an existing drive's tree (``openstack/latest``), so a
    drive rebuilt for new user data keeps them. A tree without them carries nothing."""
    raw = tree.get("openstack/latest/meta_data.json")
    if raw is None:
        return Carried(None, ())
    try:
        meta: Any = json.loads(raw)
    except ValueError:
        return Carried(None, ())
    admin_pass = meta.get("admin_pass") if isinstance(meta, dict) else None
    files: list[tuple[str, bytes]] = []
    for item in (meta.get("files") or []) if isinstance(meta, dict) else []:
        if not isinstance(item, dict):
            continue
        path, where = item.get("path"), item.get("content_path")
        if not isinstance(path, str) or not isinstance(where, str):
            continue
        content = tree.get("openstack/" + where.lstrip("/"))
        if content is not None:
            files.append((path, content))
    return Carried(admin_pass if isinstance(admin_pass, str) else None, tuple(files))
