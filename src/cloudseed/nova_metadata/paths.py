"""Which document a request path names, the way Nova's metadata API reads paths. IO-free.

Nova normalises the path (``posixpath.normpath``), answers ``/`` without asking who calls,
and reads every other path only once it knows the caller (so a bad signature is a 403 even
for a path that names nothing). The first segment picks the tree: ``openstack``, ``ec2``, or
anything else as an EC2 version (``/latest/meta-data`` is ``/ec2/latest/meta-data``).

OpenStack: ``/openstack`` lists the versions; ``/openstack/<version>`` (and ``.../version``)
lists the version's files; ``/openstack/<version>/<file>`` is one of Nova's six files, at
any version (each file checks its own: password from 2013-04-04, vendor_data.json from
2013-10-17, vendor_data2.json from 2016-10-06; user_data and network_data.json at every
version, as Nova serves them); ``/openstack/content/<key>`` is Nova's injected network
template (interfaces.py; ``0000``, the only one the metadata API has). EC2: ``/ec2`` lists
the versions; ``/ec2/<version>/...`` is a walk down that version's tree (render.py).

cloudseed's signed identity (``identity.py``, with ``[cloudseed_metadata] connection``):
``/openstack/latest/identity_token`` (under ``latest`` only, as in cloudseed's own tree: a
dated version's files are Nova's), and EC2's ``/<version>/dynamic/...`` from 2009-04-04, which
are EC2 walks here. Without the option both name nothing, as in Nova.
"""

from __future__ import annotations

import posixpath
from typing import NamedTuple

from cloudseed.metadata import versions as v

ROOT = "root"  # "/": the EC2 versions, without asking who calls
EC2_VERSIONS = "ec2-versions"
OPENSTACK_VERSIONS = "openstack-versions"
EC2 = "ec2"
OPENSTACK = "openstack"
CONTENT = "content"
IDENTITY_TOKEN = "identity_token"

META_DATA = "meta_data.json"
USER_DATA = "user_data"
PASSWORD = "password"
VENDOR_DATA = "vendor_data.json"
VENDOR_DATA2 = "vendor_data2.json"
NETWORK_DATA = "network_data.json"
LISTING = "version"
OPENSTACK_FILES = frozenset(
    {META_DATA, USER_DATA, PASSWORD, VENDOR_DATA, VENDOR_DATA2, NETWORK_DATA, LISTING}
)


class Target(NamedTuple):
    kind: str
    version: str = ""  # dated ("latest" resolved)
    rest: tuple[str, ...] = ()  # EC2: the walk below the version; OpenStack: (file,)


_parsed: dict[str, Target | None] = {}
_PARSED_MAX = 4096


def parse(path: str) -> Target | None:
    """The target of ``path`` (None: it names nothing, a 404 once the caller is known).
    Remembered in a bounded dict, emptied when full: guests ask for a few dozen paths."""
    try:
        return _parsed[path]
    except KeyError:
        pass
    target = _parse(path)
    if len(_parsed) >= _PARSED_MAX:
        _parsed.clear()
    _parsed[path] = target
    return target


def is_root(path: str) -> bool:
    """``/`` as Nova tells it (``os.path.normpath(path) == "/"``)."""
    return posixpath.normpath(path) == "/"


def _parse(path: str) -> Target | None:
    normal = posixpath.normpath(path if path.startswith("/") else "/" + path)
    tokens = normal.split("/")[1:]
    if tokens[0] not in ("ec2", "openstack"):
        tokens = ["ec2"] if tokens[0] == "" else ["ec2", *tokens]
    if len(tokens) == 1:
        return Target(OPENSTACK_VERSIONS if tokens[0] == "openstack" else EC2_VERSIONS)
    if tokens[0] == "ec2":
        version = v.ec2_version(tokens[1])
        return None if version is None else Target(EC2, version, tuple(tokens[2:]))
    if tokens[1] == "content":
        return Target(CONTENT, rest=tuple(tokens[2:]))
    if tokens[1:] == ["latest", IDENTITY_TOKEN]:
        return Target(IDENTITY_TOKEN, v.OPENSTACK_LATEST)
    version = v.openstack_version(tokens[1])
    if version is None:
        return None
    name = "/".join(tokens[2:]) or LISTING
    if name not in OPENSTACK_FILES:
        return None
    return Target(OPENSTACK, version, (name,))


def has_dynamic(version: str) -> bool:
    """Whether the EC2 ``version`` has ``dynamic/`` (EC2 added it in 2009-04-04)."""
    return v.at_least(version, v.EC2_DYNAMIC)
