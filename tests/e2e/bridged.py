"""Bridged networks for the end-to-end scenarios (docs/qemu-driver.md, "Networks: slirp and
bridge"): what scenario 7 (two guests on one IPv4 network) and scenario 8 (an IPv6-only guest)
boot on, and how the test reaches their guests.

A bridged guest has no SSH forward: the test logs in from inside the network's namespace
(``ip netns exec cloudseed-<host tag>-<network uuid> ssh ...``), as the docs tell an operator
to. Both networks are registered once per session (``conftest.bridged_networks``); the
namespaces exist only while a guest on them runs.

The IPv6-only guest needs one thing the image lacks: Debian 12's cloud-init (22.4) asks only
169.254.169.254 for OpenStack metadata (fe80::a9fe:a9fe came with 23.1). Rather than build a
second image, the same disk, kernel and initramfs are registered again with the datasource's
``metadata_urls`` pinned on the kernel command line: cloud-init merges ``cc: ... end_cc``
there over /etc/cloud (its "kernel command line" configuration source), so the pin costs one
image registration (a copy of the files, seconds), not a build (minutes).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from cloudseed.compute.bridge_plan import host_tag, namespace_name
from tests.e2e.harness import FIRST_HOST, ID_ONLY, KERNEL_COMMAND_LINE, E2ECloud

# Scenario 7's network and its two guests' addresses (dnsmasq leases them by MAC).
IPV4_CIDR, IPV4_GATEWAY = "10.70.0.0/24", "10.70.0.1"
GUEST_A, GUEST_B = "10.70.0.11", "10.70.0.12"
# Scenario 8's: IPv6 only, so the guest's NIC never has an IPv4 address (no DHCPv4 server).
IPV6_CIDR, IPV6_GATEWAY = "fd70::/64", "fd70::1"
IPV6_GUEST = "fd70::10"
# What the guest's kernel names its first NIC: the qemu driver puts the NICs first among the
# devices, so the first is in PCI slot 1 of q35's root bus (systemd's enp0s1).
GUEST_NIC = "enp0s1"
# The metadata address with the NIC as its zone, as each client in the guest wants it written:
# curl and python3-requests take RFC 6874's "%25" form; python3's urllib, and cloud-init 22.4's
# own check of its metadata_urls (getaddrinfo of the URL's host name, which fails on "%25"),
# need the zone bare (requests then encodes it when it sends).
IPV6_METADATA_BARE = f"http://[fe80::a9fe:a9fe%{GUEST_NIC}]"
IPV6_METADATA_URL = f"http://[fe80::a9fe:a9fe%25{GUEST_NIC}]"
LOGIN_USER = "debian"  # the image's os_admin_user


def register_networks(cloud: E2ECloud) -> dict[str, str]:
    """Both bridged networks (`cloudseed network add ... --mode bridge`): name to id."""
    return {
        "ipv4": cloud.cli(
            "network",
            "add",
            "e2e-bridge-v4",
            "--cidr",
            IPV4_CIDR,
            "--gateway",
            IPV4_GATEWAY,
            "--mode",
            "bridge",
            *ID_ONLY,
        ),
        "ipv6": cloud.cli(
            "network",
            "add",
            "e2e-bridge-v6",
            "--cidr",
            IPV6_CIDR,
            "--gateway",
            IPV6_GATEWAY,
            "--mode",
            "bridge",
            *ID_ONLY,
        ),
    }


def ipv6_metadata_pin() -> str:
    """cloud-init configuration for the kernel command line: the OpenStack datasource asks
    fe80::a9fe:a9fe on the guest's NIC. cloud-init percent-decodes what is between ``cc:``
    and ``end_cc``, so all of it is encoded: no space or quote reaches the kernel."""
    config = f"datasource: {{OpenStack: {{metadata_urls: ['{IPV6_METADATA_BARE}']}}}}"
    return f"cc:{quote(config, safe='')} end_cc"


def register_ipv6_image(cloud: E2ECloud) -> str:
    """The e2e image registered again with the metadata URL pinned (see the module's docs)."""
    return cloud.register_image(
        "debian-e2e-ipv6-metadata", f"{KERNEL_COMMAND_LINE} {ipv6_metadata_pin()}"
    )


def namespace(cloud: E2ECloud, network_id: str) -> str:
    """The namespace the service's own compute host builds the network in."""
    state = Path(cloud.environ["CLOUDSEED_STATE_PATH"]).resolve()
    return namespace_name(host_tag(state, FIRST_HOST), network_id)


def in_namespace(cloud: E2ECloud, network_id: str) -> list[str]:
    """The start of a command run inside the network's namespace."""
    return ["ip", "netns", "exec", namespace(cloud, network_id)]


def ssh_command(cloud: E2ECloud, network_id: str, address: str) -> list[str]:
    """ssh to a guest of a bridged network, from inside the network's namespace: for a guest
    without an SSH forward, what `cloudseed server ssh` prints for one with a forward."""
    return [*in_namespace(cloud, network_id), "ssh", f"{LOGIN_USER}@{address}"]
