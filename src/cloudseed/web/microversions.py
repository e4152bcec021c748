"""Compute API microversions: what a client asked for, and the range we serve.

Clients send ``OpenStack-API-Version: compute 2.35`` and/or the legacy
``X-OpenStack-Nova-API-Version: 2.35`` (tempest sends only the legacy one). The new header wins
when both name a compute version. No header means the minimum, ``latest`` the maximum.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

from cloudseed.web.errors import InvalidAPIVersionString, UnsupportedAPIVersion

HEADER = "OpenStack-API-Version"
LEGACY_HEADER = "X-OpenStack-Nova-API-Version"
VARY = f"{HEADER}, {LEGACY_HEADER}"


class APIVersion(NamedTuple):
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @classmethod
    def parse(cls, text: str) -> APIVersion:
        match = _VERSION_RE.match(text)
        if match is None:
            raise InvalidAPIVersionString(text if len(text) <= 64 else text[:64] + "...")
        return cls(int(match["major"]), int(match["minor"]))


# Bounded before int(): a version number of more than 9 digits is no version (and one of more
# than 4,300 digits made int() raise, a 500 before authentication).
_VERSION_RE = re.compile(r"^(?P<major>[1-9][0-9]{0,8})\.(?P<minor>[1-9][0-9]{0,8}|0)$")

MIN_VERSION = APIVersion(2, 1)
# 2.1-2.104 are Nova's. 2.105 (user data updates), 2.106 (live keys), 2.107 (NoCloud seeds),
# 2.108 (config drives in Ironic's forms), 2.109 (metadata options), 2.110 (readiness) and 2.111
# (acknowledged lifecycle notices) are cloudseed's: see docs/api-differences.md.
MAX_VERSION = APIVersion(2, 111)


def requested_version(headers: Mapping[str, str]) -> APIVersion:
    """The version a request asks for (header names are case-insensitive in ``headers``)."""
    text = _compute_version_from_header(headers.get(HEADER.lower(), ""))
    if text is None:
        legacy = headers.get(LEGACY_HEADER.lower())
        text = legacy.strip() if legacy is not None else None
    if text is None:
        return MIN_VERSION
    if text.lower() == "latest":
        return MAX_VERSION
    version = APIVersion.parse(text)
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise UnsupportedAPIVersion(
            requested=str(version), minimum=str(MIN_VERSION), maximum=str(MAX_VERSION)
        )
    return version


def _compute_version_from_header(value: str) -> str | None:
    # The header may name several services: "compute 2.10, placement 1.3".
    for item in value.split(","):
        service, _, version = item.strip().partition(" ")
        if service.lower() == "compute" and version.strip():
            return version.strip()
    return None


def response_headers(version: APIVersion) -> list[tuple[str, str]]:
    return [(HEADER, f"compute {version}"), (LEGACY_HEADER, str(version)), ("Vary", VARY)]
