"""Which document a request path names. IO-free.

Paths are normalised as Nova does (``posixpath.normpath``: ``//``, ``.``, ``..`` and a trailing
slash collapse). The first segment picks the tree: ``openstack``, ``ec2``, or anything else as
an EC2 version (``/latest/meta-data`` is ``/ec2/latest/meta-data``).

``/openstack/latest/authorized_keys`` is cloudseed's (live keys): only under ``latest``, since
a dated version's files are Nova's and fixed; its one query parameter is ``login_user``'s. So is
``/openstack/latest/boot_report`` (readiness, 2.110), where cloud-init's webhook posts.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl

from cloudseed.errors import InvalidInput
from cloudseed.metadata import versions as v

_CONTENT_NAME = re.compile(r"^[0-9]{4}$")


@dataclass(frozen=True, slots=True)
class Target:
    kind: str  # see the constants below
    version: str = ""
    rest: tuple[str, ...] = ()


EC2_INDEX = "ec2-index"  # "/": answered without asking who is calling, as Nova
EC2_INDEX_IDENTIFIED = "ec2-index-identified"  # "/ec2"
EC2_VERSION = "ec2-version"
EC2_USER_DATA = "ec2-user-data"
EC2_META_DATA = "ec2-meta-data"
TOKEN = "token"
OPENSTACK_INDEX = "openstack-index"
OPENSTACK_VERSION = "openstack-version"
META_DATA = "meta_data.json"
USER_DATA = "user_data"
PASSWORD = "password"
VENDOR_DATA = "vendor_data.json"
VENDOR_DATA2 = "vendor_data2.json"
NETWORK_DATA = "network_data.json"
CONTENT = "content"
# Signed identity (identity/): EC2's dynamic/instance-identity/..., and the OpenStack tree's
# identity token, only under "latest" (a dated version's contents never change).
EC2_DYNAMIC = "ec2-dynamic"
IDENTITY_TOKEN = "identity_token"
AUTHORIZED_KEYS = "authorized_keys"
# cloudseed's own, at every version: cloud-init's phone_home posts there (hostkeys/).
PHONE_HOME = "phone_home"
# cloudseed's own, under "latest": cloud-init's reporting webhook posts there (2.110,
# servers/readiness/).
BOOT_REPORT = "boot_report"
# Lifecycle notices (2.111, metadata/events.py): only under "latest" in the OpenStack tree;
# EC2's meta-data/events/... at every version.
EVENTS = "events.json"
EC2_EVENTS = "ec2-events"

_OPENSTACK_FILES = {
    META_DATA: v.FOLSOM,
    USER_DATA: v.FOLSOM,
    PASSWORD: v.GRIZZLY,
    VENDOR_DATA: v.HAVANA,
    NETWORK_DATA: v.LIBERTY,
    VENDOR_DATA2: v.NEWTON_TWO,
}


_parsed: dict[str, Target | None] = {}
_PARSED_MAX = 4096


def parse(path: str) -> Target | None:
    """The target of ``path``, or None for a path that names nothing (404).

    Guests ask for the same few dozen paths; answers are remembered (a bounded dict, emptied
    when full, so odd paths cannot grow it)."""
    try:
        return _parsed[path]
    except KeyError:
        pass
    target = _parse(path)
    if len(_parsed) >= _PARSED_MAX:
        _parsed.clear()
    _parsed[path] = target
    return target


def _parse(path: str) -> Target | None:
    parts = [p for p in posixpath.normpath("/" + path).split("/") if p]
    if not parts:
        return Target(EC2_INDEX)
    if parts[0] == "openstack":
        return _openstack(parts[1:])
    if parts[0] == "ec2":
        parts = parts[1:]
        if not parts:
            return Target(EC2_INDEX_IDENTIFIED)
    return _ec2(parts)


def _openstack(parts: list[str]) -> Target | None:
    if not parts:
        return Target(OPENSTACK_INDEX)
    if parts[0] == "content":
        if len(parts) == 2 and _CONTENT_NAME.match(parts[1]):
            return Target(CONTENT, rest=(parts[1],))
        return None
    version = v.openstack_version(parts[0])
    if version is None:
        return None
    if parts == ["latest", IDENTITY_TOKEN]:
        return Target(IDENTITY_TOKEN, version)
    if len(parts) == 1 or parts[1:] == ["version"]:
        return Target(OPENSTACK_VERSION, version)
    if parts[1:] == [PHONE_HOME]:
        return Target(PHONE_HOME, version)
    if parts == ["latest", BOOT_REPORT]:
        return Target(BOOT_REPORT, version)
    if parts == ["latest", AUTHORIZED_KEYS]:
        return Target(AUTHORIZED_KEYS, version)
    if parts == ["latest", EVENTS]:
        return Target(EVENTS, version)
    if len(parts) == 2 and parts[1] in _OPENSTACK_FILES:
        if not v.at_least(version, _OPENSTACK_FILES[parts[1]]):
            return None
        return Target(parts[1], version)
    return None


def _ec2(parts: list[str]) -> Target | None:
    if parts[:3] == ["latest", "api", "token"] and len(parts) == 3:
        return Target(TOKEN)
    version = v.ec2_version(parts[0])
    if version is None:
        return None
    if len(parts) == 1:
        return Target(EC2_VERSION, version)
    if parts[1] == "user-data" and len(parts) == 2:
        return Target(EC2_USER_DATA, version)
    if parts[1] == "meta-data":
        if parts[2:3] == ["events"]:
            return Target(EC2_EVENTS, version, tuple(parts[3:]))
        return Target(EC2_META_DATA, version, tuple(parts[2:]))
    if parts[1] == "dynamic" and v.at_least(version, v.EC2_DYNAMIC):
        return Target(EC2_DYNAMIC, version, tuple(parts[2:]))
    return None


# A login name as sshd passes it (%u): POSIX's portable characters plus "@" (user@realm, as
# SSSD names them) and a trailing "$" (Samba machine accounts); not starting with "-".
_LOGIN = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.@-]{0,255}\$?")
_MAX_QUERY_FIELDS = 16


def login_user(query: bytes) -> str | None:
    """The ``user`` parameter of an authorized_keys request (None when absent); InvalidInput
    (400) for a query that is not what the AuthorizedKeysCommand sends: undecodable, ``user``
    twice, or a value that is not a login name. Other parameters are ignored, as every other
    document ignores its query."""
    try:
        fields = parse_qsl(
            query.decode("ascii"),
            keep_blank_values=True,
            strict_parsing=False,
            errors="strict",
            max_num_fields=_MAX_QUERY_FIELDS,
        )
    except (UnicodeDecodeError, ValueError):
        raise InvalidInput("The query string is not valid.") from None
    users = [value for name, value in fields if name == "user"]
    if not users:
        return None
    if len(users) > 1 or _LOGIN.fullmatch(users[0]) is None:
        raise InvalidInput("user must be one login name.")
    return users[0]
