"""The versions of the OpenStack and EC2 trees, and what each adds (Nova's list)."""

from __future__ import annotations

FOLSOM = "2012-08-10"
GRIZZLY = "2013-04-04"  # random_seed, password
HAVANA = "2013-10-17"  # vendor_data.json
LIBERTY = "2015-10-15"  # project_id, network_data.json
NEWTON_ONE = "2016-06-30"  # devices
NEWTON_TWO = "2016-10-06"  # vendor_data2.json
OCATA = "2017-02-22"
ROCKY = "2018-08-27"
VICTORIA = "2020-10-14"  # dedicated_cpus
EPOXY = "2025-04-04"

OPENSTACK_VERSIONS = (
    FOLSOM,
    GRIZZLY,
    HAVANA,
    LIBERTY,
    NEWTON_ONE,
    NEWTON_TWO,
    OCATA,
    ROCKY,
    VICTORIA,
    EPOXY,
)
OPENSTACK_LATEST = EPOXY
# The versions whose meta_data.json cloud-init asks for first: the newest it knows (ROCKY,
# reference cloud-init.md) and "latest" (where its listing fails, and what other clients and
# the benchmarks ask). A guest loaded ahead of its first request has these made already.
FIRST_ASKED = (ROCKY, "latest")

EC2_VERSIONS = (
    "1.0",
    "2007-01-19",
    "2007-03-01",
    "2007-08-29",
    "2007-10-10",
    "2007-12-15",
    "2008-02-01",
    "2008-09-01",
    "2009-04-04",
)
EC2_LATEST = "2009-04-04"
EC2_DYNAMIC = "2009-04-04"  # dynamic/instance-identity (EC2's version that introduced it)
# mac and network/interfaces/macs/ (with ipv6s), for guests with IPv6 only: EC2 introduced
# them in 2011-01-01 and 2016-06-30, later than any version Nova serves, so cloudseed serves
# them in the newest it has (docs/metadata.md).
EC2_NETWORK = "2009-04-04"


def openstack_version(name: str) -> str | None:
    """The dated version a path segment names (``latest`` included), or None."""
    if name == "latest":
        return OPENSTACK_LATEST
    return name if name in OPENSTACK_VERSIONS else None


def ec2_version(name: str) -> str | None:
    if name == "latest":
        return EC2_LATEST
    return name if name in EC2_VERSIONS else None


def at_least(version: str, minimum: str) -> bool:
    # Dated names compare as strings; EC2's "1.0" sorts before every date.
    return version >= minimum
