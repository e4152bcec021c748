"""Networks and address allocation (API database)."""

from __future__ import annotations

import ipaddress
import json
import secrets
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from cloudseed.errors import Conflict, InvalidInput
from cloudseed.networks.errors import AddressTaken, NetworkNotFound
from cloudseed.networks.models import IPAllocation, Network

SLIRP = "slirp"
BRIDGE = "bridge"
MODES = (SLIRP, BRIDGE)


@dataclass(frozen=True)
class PortPlan:
    """A port to create for an instance: what the cell database records."""

    uuid: str
    network_id: str
    network_name: str
    mac_address: str
    mtu: int
    address: str
    version: int
    cidr: str
    gateway: str | None
    dns_nameservers: list[str]
    mode: str = SLIRP
    egress: bool = False
    ec2_metadata_address: bool = False

    def network_info(self) -> dict[str, object]:
        """What the port's record keeps of its network (``Port.network_info``): what
        network_data.json needs, and how the compute driver builds the network."""
        return {
            "cidr": self.cidr,
            "gateway": self.gateway,
            "dns_nameservers": self.dns_nameservers,
            "mode": self.mode,
            "egress": self.egress,
            "ec2_metadata_address": self.ec2_metadata_address,
        }


# What the metadata proxy of a bridged network answers at, on the network itself: a subnet
# that holds one of them would hide a guest behind the proxy, or the proxy behind a guest.
METADATA_ADDRESSES = (
    ipaddress.ip_network("169.254.169.254/32"),
    ipaddress.ip_network("fe80::/10"),
    ipaddress.ip_network("fd00:ec2::254/128"),
)


def add_network(
    session: Session,
    *,
    name: str,
    cidr: str,
    gateway: str | None = None,
    dns: list[str] | None = None,
    mtu: int = 1500,
    mode: str = SLIRP,
    egress: bool = False,
    ec2_metadata_address: bool = False,
) -> Network:
    try:
        net = ipaddress.ip_network(cidr, strict=True)
        if gateway is not None:
            gateway = str(ipaddress.ip_address(gateway))
            if ipaddress.ip_address(gateway) not in net:
                raise InvalidInput(f"gateway {gateway} is not in {cidr}")
        dns = [str(ipaddress.ip_address(server)) for server in dns or []]
    except ValueError as exc:
        raise InvalidInput(str(exc)) from exc
    if not 68 <= mtu <= 65535:
        raise InvalidInput("mtu must be between 68 and 65535")
    _check_mode(net, gateway, mode=mode, egress=egress, ec2_metadata_address=ec2_metadata_address)
    # Addresses are unique across networks (ip_allocations.address): a second network over the
    # same addresses could never give its servers one, so refuse it here, as Neutron refuses
    # overlapping subnets.
    for other in session.scalars(select(Network).order_by(Network.name)):
        if net.overlaps(ipaddress.ip_network(other.cidr)):
            raise InvalidInput(
                f"Requested CIDR {net} overlaps with network {other.name} ({other.cidr})."
            )
    network = Network(
        uuid=str(uuid.uuid4()),
        name=name,
        cidr=str(net),
        gateway=gateway,
        dns_nameservers=json.dumps(dns),
        mtu=mtu,
        mode=mode,
        egress=egress,
        ec2_metadata_address=ec2_metadata_address,
    )
    session.add(network)
    try:
        session.flush()
    except IntegrityError as exc:
        raise Conflict(f"Network {name} already exists.") from exc
    return network


def _check_mode(
    net: ipaddress.IPv4Network | ipaddress.IPv6Network,
    gateway: str | None,
    *,
    mode: str,
    egress: bool,
    ec2_metadata_address: bool,
) -> None:
    if mode not in MODES:
        raise InvalidInput(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if mode != BRIDGE:
        if egress or ec2_metadata_address:
            raise InvalidInput("egress and the EC2 metadata address are for bridged networks")
        return
    if net.version == 4 and (gateway is None or net.prefixlen > 30):
        # The namespace holds the gateway: the DHCP server's address and the guests' route
        # to 169.254.169.254.
        raise InvalidInput("a bridged IPv4 network needs a gateway and room for guests (/30)")
    for reserved in METADATA_ADDRESSES:
        if reserved.version == net.version and net.overlaps(reserved):
            raise InvalidInput(f"a bridged network cannot hold the metadata address {reserved}")


def delete_network(session: Session, ref: str) -> Network:
    """Remove a network that no port uses any more (Neutron's rule: 409 while ports are on
    it). The compute hosts take down what they built for it when their agents next start."""
    network = get_network(session, ref)
    used = session.scalar(
        select(IPAllocation.address).where(IPAllocation.network_uuid == network.uuid).limit(1)
    )
    if used is not None:
        raise Conflict(
            f"Unable to complete operation on network {network.uuid}. "
            "There are one or more ports still in use on the network."
        )
    session.delete(network)
    session.flush()
    return network


def get_network(session: Session, ref: str) -> Network:
    network = session.scalar(select(Network).where((Network.uuid == ref) | (Network.name == ref)))
    if network is None:
        raise NetworkNotFound(ref)
    return network


def list_networks(session: Session) -> list[Network]:
    return list(session.scalars(select(Network).order_by(Network.name)))


def random_mac() -> str:
    # Neutron's default prefix, so tools that recognise OpenStack MACs still do.
    return "fa:16:3e:" + ":".join(f"{b:02x}" for b in secrets.token_bytes(3))


def allocate(
    session: Session, *, network: Network, instance_uuid: str, fixed_ip: str | None = None
) -> PortPlan:
    """Reserve an address (the requested one, or the lowest free one) for a new port. The
    reservation is added, not flushed: ``flush_allocations`` sends a request's together."""
    net = ipaddress.ip_network(network.cidr)
    pool = _pool(session, network, net)
    taken, reserved = pool.taken, pool.reserved
    if fixed_ip is not None:
        try:
            # The address as the metadata service will see it on the wire (lower case,
            # compressed): an IPv6 address given as FD00::0005 is fd00::5.
            fixed_ip = str(ipaddress.ip_address(fixed_ip))
            if ipaddress.ip_address(fixed_ip) not in net:
                raise InvalidInput(
                    f"Fixed IP {fixed_ip} is not a valid ip address for network {network.uuid}."
                )
        except ValueError as exc:
            raise InvalidInput(f"Invalid fixed IP address ({fixed_ip})") from exc
        if fixed_ip in taken or fixed_ip in reserved:
            raise Conflict(
                f"Fixed IP address {fixed_ip} is already in use on instance or reserved."
            )
        address = fixed_ip
    else:
        address = next((a for a in pool.candidates if a not in taken and a not in reserved), "")
        if not address:
            raise Conflict(f"No more fixed IP addresses in network {network.name}.")
    plan = PortPlan(
        uuid=str(uuid.uuid4()),
        network_id=network.uuid,
        network_name=network.name,
        mac_address=random_mac(),
        mtu=network.mtu,
        address=address,
        version=net.version,
        cidr=network.cidr,
        gateway=network.gateway,
        dns_nameservers=json.loads(network.dns_nameservers),
        mode=network.mode or SLIRP,
        egress=bool(network.egress),
        ec2_metadata_address=bool(network.ec2_metadata_address),
    )
    session.add(
        IPAllocation(
            address=address,
            network_uuid=network.uuid,
            port_uuid=plan.uuid,
            instance_uuid=instance_uuid,
        )
    )
    taken.add(address)
    return plan


def flush_allocations(session: Session) -> None:
    """Send the reservations ``allocate`` added. Within a transaction the pool already keeps
    two ports from one address; a concurrent transaction that took one of them meanwhile
    makes this AddressTaken (and the caller's transaction is rolled back)."""
    try:
        session.flush()
    except IntegrityError as exc:
        raise AddressTaken() from exc


@dataclass
class _Pool:
    """One network's addresses as one transaction sees them. A multi-create allocates hundreds
    of ports in one transaction: reading the taken addresses and walking the network from its
    first host once, not once per port, keeps that linear in the servers created."""

    taken: set[str]
    reserved: set[str]
    candidates: Iterator[str]  # hosts in order; those passed over are taken or reserved


def _pool(
    session: Session, network: Network, net: ipaddress.IPv4Network | ipaddress.IPv6Network
) -> _Pool:
    key = ("cloudseed.networks.pool", network.uuid)
    pool: _Pool | None = session.info.get(key)
    if pool is None:
        taken = set(
            session.scalars(
                select(IPAllocation.address).where(IPAllocation.network_uuid == network.uuid)
            )
        )
        # The gateway and DNS servers on the subnet are other hosts' addresses.
        reserved = {str(net.network_address), network.gateway, *json.loads(network.dns_nameservers)}
        if net.version == 4:
            reserved.add(str(net.broadcast_address))
        pool = session.info[key] = _Pool(taken, reserved, (str(a) for a in net.hosts()))
    return pool


def release(session: Session, *, instance_uuid: str) -> None:
    # Addresses freed here may be handed out again by this transaction.
    for key in [
        k for k in session.info if isinstance(k, tuple) and k[:1] == ("cloudseed.networks.pool",)
    ]:
        del session.info[key]
    session.execute(delete(IPAllocation).where(IPAllocation.instance_uuid == instance_uuid))
