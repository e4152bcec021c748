"""The bridged networks of one compute host: built when a guest on them starts, given each
guest port as it attaches, and taken down when no running guest needs them any more (after a
guest stops or is deleted, when the service stops, and when an agent starts: a network deleted
meanwhile, or one a crashed agent left behind).

Per network (``bridge_plan.py`` says what each piece is): the namespace with its bridge,
addresses and nftables ruleset; dnsmasq inside it for DHCPv4 (IPv4 networks); the metadata
proxy (``metadata_proxy.py``); with ``egress``, slirp4netns as the namespace's uplink. Its
files are in ``<state_path>/networks/<host tag>/<network uuid>/``:

| file | what |
|---|---|
| ``network.json`` | the network as it was built (written last: without it, the build is redone) |
| ``ports.json`` | mode 0600: the ports attached here (the source of the three below) |
| ``proxy-ports.json`` | mode 0600: the proxy's port map, with each port's signed headers |
| ``proxy.json``, ``proxy.pid``, ``proxy.log`` | the proxy's configuration, process and log |
| ``dnsmasq.pid``, ``dnsmasq.log`` | dnsmasq's |
| ``uplink.pid``, ``uplink.log`` | slirp4netns's (``egress``) |

The helper processes run in their own sessions, with the network's directory as working
directory (how they are found again by any worker, or by the next agent after a crash); they
outlive the agent that started them, as a guest's network must while any worker runs a guest
on it. Every change to a host's networks holds one file lock (``locks/networks-<tag>.lock``),
so the workers of a service and a starting agent never undo each other's work: a guest's
network is built, its tap opened and QEMU started under it, and a network is judged unused
under it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from cloudseed.compute import helper_processes as helpers
from cloudseed.compute import netns
from cloudseed.compute.bridge_plan import (
    BRIDGE,
    METADATA_EC2,
    METADATA_PORT,
    METADATA_V4,
    METADATA_V6,
    UPLINK,
    BridgedNetwork,
    BridgedPort,
    bridged_ports,
    dnsmasq_argv,
    host_tag,
    namespace_name,
    network_of_namespace,
    proxy_ports,
    ruleset,
)
from cloudseed.compute.errors import DriverError
from cloudseed.compute.interfaces import GuestSpec
from cloudseed.programs.run import ENVIRONMENT
from cloudseed.signing import sign

log = logging.getLogger(__name__)


class BridgeNetworks:
    def __init__(
        self,
        state_dir: Path,
        *,
        host: str,
        secret: str,
        upstream: tuple[str, int],
        hop_limit: int = 0,
    ) -> None:
        state_dir = state_dir.resolve()
        self.tag = host_tag(state_dir, host)
        self.root = state_dir / "networks" / self.tag
        self.lock_path = state_dir / "locks" / f"networks-{self.tag}.lock"
        self.secret = secret
        self.upstream = upstream
        self.hop_limit = hop_limit
        self._children: list[subprocess.Popen[bytes]] = []

    # -- one network ---------------------------------------------------------------------

    def namespace(self, network_id: str) -> str:
        return namespace_name(self.tag, network_id)

    def directory(self, network_id: str) -> Path:
        if not network_id or "/" in network_id or network_id.startswith("."):
            raise DriverError(f"Invalid network id {network_id!r}.")
        return self.root / network_id

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """The host's network lock (see the module's docstring)."""
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def ensure(self, network: BridgedNetwork) -> str:
        """The network built and its helpers running (each started again if it died); its
        namespace. Call with the lock held."""
        helpers.require("ip", "iproute2")
        helpers.require("nft", "nftables")
        name = self.namespace(network.network_id)
        directory = self.directory(network.network_id)
        if not netns.exists(name) or not (directory / "network.json").exists():
            # What an earlier, interrupted build left goes first.
            netns.kill(netns.processes_in(directory) if directory.exists() else [])
            netns.delete(name)
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir(parents=True, mode=0o700)
            self._build(name, network, directory)
        self._reap()
        if network.version == 4:
            self._dnsmasq(name, network, directory, self.ports(network.network_id))
        if not helpers.running(directory / "proxy.pid", directory):
            self._start_proxy(name, network, directory)
        if network.egress and not helpers.running(directory / "uplink.pid", directory):
            self._start_uplink(name, directory)
        return name

    def _build(self, name: str, network: BridgedNetwork, directory: Path) -> None:
        log.info("building bridged network %s in namespace %s", network.network_id, name)
        netns.create(name)
        try:
            netns.ip(name, "link", "add", BRIDGE, "mtu", str(network.mtu), "type", "bridge")
            netns.ip(name, "link", "set", BRIDGE, "up")
            for address in network.bridge_addresses():
                extra = ["nodad"] if ":" in address else []
                netns.ip(name, "address", "add", address, "dev", BRIDGE, *extra)
            if network.egress:
                netns.sysctl(name, "net.ipv4.ip_forward", "1")
            self._write_ports(name, network, directory, [])
            # Written last: it says the build is complete. A process killed before this line
            # (SIGKILL runs no ``except``) leaves a namespace that may lack its bridge,
            # addresses or rules; without the file, the next ``ensure`` builds it again.
            helpers.write(
                directory / "network.json", json.dumps(network.as_json()).encode(), mode=0o644
            )
        except BaseException:
            with contextlib.suppress(DriverError):
                netns.delete(name)
            raise

    def attach(self, network: BridgedNetwork, port: BridgedPort) -> None:
        """Put ``port``'s device (already in the namespace: a tap, or in tests a veth whose
        other end plays the guest) on the bridge, and let it send as its port. Call with the
        lock held, after ``ensure``."""
        name = self.namespace(network.network_id)
        directory = self.directory(network.network_id)
        device = port.device
        netns.ip(name, "link", "set", device, "mtu", str(network.mtu))
        netns.ip(name, "link", "set", device, "master", BRIDGE, "up")
        ports = [p for p in self.ports(network.network_id) if p.port_id != port.port_id]
        self._write_ports(name, network, directory, [*ports, port])

    def open_tap(self, network: BridgedNetwork, port: BridgedPort) -> int:
        """A new tap for ``port`` in the network's namespace, attached; its descriptor for
        QEMU (the caller closes it once QEMU has its own)."""
        name = self.namespace(network.network_id)
        # A tap of the guest's previous run goes when its QEMU does; one still there (QEMU
        # not gone yet) would make the name taken.
        with contextlib.suppress(DriverError):
            netns.ip(name, "link", "delete", port.device)
        fd = netns.open_tap(name, port.device)
        try:
            self.attach(network, port)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def ports(self, network_id: str) -> list[BridgedPort]:
        try:
            data = json.loads((self.directory(network_id) / "ports.json").read_bytes())
        except FileNotFoundError:
            return []
        return [BridgedPort.from_json(p) for p in data]

    def _write_ports(
        self, name: str, network: BridgedNetwork, directory: Path, ports: Sequence[BridgedPort]
    ) -> None:
        """Record ``ports`` and make the bridge's rules, dnsmasq's leases and the proxy's map
        say the same (the rules first: a port may send only once they know it)."""
        helpers.write(directory / "ports.json", json.dumps([p.as_json() for p in ports]).encode())
        netns.nft(name, ruleset(ports, egress=network.egress))
        headers = {
            p.port_id: [
                ["X-Instance-ID", p.instance_id],
                ["X-Tenant-ID", p.tenant_id],
                ["X-Instance-ID-Signature", sign(self.secret, p.instance_id)],
            ]
            for p in ports
        }
        helpers.write(directory / "proxy-ports.json", proxy_ports(ports, headers))
        if network.version == 4 and (directory / "dnsmasq.pid").exists():
            self._dnsmasq(name, network, directory, ports)

    def detach(self, network_id: str, keep: set[str]) -> None:
        """Forget the ports of this network whose guests are gone (``keep``: the instance
        ids still here). Call with the lock held."""
        ports = self.ports(network_id)
        kept = [p for p in ports if p.instance_id in keep]
        if len(kept) == len(ports):
            return
        directory = self.directory(network_id)
        network = BridgedNetwork.from_json(json.loads((directory / "network.json").read_bytes()))
        self._write_ports(self.namespace(network_id), network, directory, kept)

    def teardown(self, network_id: str) -> None:
        """The network gone from this host: its processes, namespace (with every device in
        it) and directory. Call with the lock held."""
        directory = self.directory(network_id)
        name = self.namespace(network_id)
        log.info("taking down bridged network %s (namespace %s)", network_id, name)
        netns.kill(netns.processes_in(directory) if directory.exists() else [])
        netns.delete(name)
        shutil.rmtree(directory, ignore_errors=True)
        self._reap()

    def built(self) -> set[str]:
        """The networks this host has something of: a namespace or a directory."""
        found = {
            network_id
            for name in netns.names(namespace_name(self.tag, ""))
            if (network_id := network_of_namespace(self.tag, name))
        }
        if self.root.is_dir():
            found |= {d.name for d in self.root.iterdir() if d.is_dir()}
        return found

    def sweep(self, in_use: Mapping[str, set[str]]) -> None:
        """Take down every network of this host that is not in ``in_use`` (network id -> the
        instance ids still here with a port on it, for ``detach``). Call with the lock held."""
        for network_id in sorted(self.built()):
            try:
                if network_id in in_use:
                    self.detach(network_id, in_use[network_id])
                else:
                    self.teardown(network_id)
            except DriverError:
                log.exception("could not clean up bridged network %s", network_id)

    # -- a host's guests -------------------------------------------------------------------

    @contextlib.contextmanager
    def taps(self, guest: GuestSpec, directory: Path) -> Iterator[dict[int, int]]:
        """For starting ``guest`` (its instance ``directory``): its bridged networks built
        and a new tap for each of its bridged ports, as {NIC index: descriptor} for QEMU to
        inherit; closed here after the block (QEMU holds its own). The block runs under the
        host's network lock, so no sweep takes a network for unused while QEMU starts. The
        guest's networks are recorded in ``networks.json`` in its directory."""
        bridged = bridged_ports(guest.ports)
        networks = sorted({str(port["network_id"]) for _, port in bridged})
        helpers.write(directory / "networks.json", json.dumps(networks).encode(), mode=0o644)
        if not bridged:
            yield {}
            return
        with self.locked():
            opened: dict[int, int] = {}
            try:
                for index, port in bridged:
                    network = BridgedNetwork.of_port(port)
                    self.ensure(network)
                    opened[index] = self.open_tap(
                        network,
                        BridgedPort.of_port(
                            port, instance_id=guest.uuid, tenant_id=guest.project_id
                        ),
                    )
                yield opened
            finally:
                for fd in opened.values():
                    os.close(fd)

    def sweep_unused(self, instances: Path, running: Callable[[str], bool]) -> None:
        """Take down the networks no running guest needs (``instances``: the driver's
        instance directories, each with its ``networks.json``; ``running(uuid)``: whether
        its QEMU runs); a network a running guest needs keeps the ports of the guests still
        here."""
        if not self.built():
            return  # the usual case: no bridged network on this host
        with self.locked():
            members: dict[str, set[str]] = {}
            needed: set[str] = set()
            for directory in sorted(instances.iterdir()) if instances.is_dir() else []:
                try:
                    listed = [str(n) for n in json.loads((directory / "networks.json").read_text())]
                except (OSError, ValueError, TypeError):
                    continue
                for network_id in listed:
                    members.setdefault(network_id, set()).add(directory.name)
                try:
                    if listed and running(directory.name):
                        needed.update(listed)
                except DriverError:
                    continue
            self.sweep({n: members[n] for n in needed})

    # -- helper processes ----------------------------------------------------------------

    def _dnsmasq(
        self, name: str, network: BridgedNetwork, directory: Path, ports: Sequence[BridgedPort]
    ) -> None:
        """dnsmasq running with ``ports``' leases: left alone when it already does, else
        (started again) with them."""
        binary = helpers.require("dnsmasq", "dnsmasq-base")
        wanted = dnsmasq_argv(binary, network, directory, ports)
        pid = helpers.read_pid(directory / "dnsmasq.pid")
        if pid is not None and pid in netns.pids(name) and helpers.alive(pid):
            if helpers.cmdline(pid) == wanted:
                return
            netns.kill([pid])
        (directory / "dnsmasq.pid").unlink(missing_ok=True)
        self._spawn(["ip", "netns", "exec", name, *wanted], directory, "dnsmasq.log")
        helpers.wait_for(directory / "dnsmasq.pid", "dnsmasq", directory / "dnsmasq.log")

    def _start_proxy(self, name: str, network: BridgedNetwork, directory: Path) -> None:
        listeners = [
            netns.listening_socket(name, METADATA_V4, METADATA_PORT, hop_limit=self.hop_limit),
            netns.listening_socket(
                name, METADATA_V6, METADATA_PORT, device=BRIDGE, hop_limit=self.hop_limit
            ),
        ]
        if network.ec2_metadata_address:
            listeners.append(
                netns.listening_socket(name, METADATA_EC2, METADATA_PORT, hop_limit=self.hop_limit)
            )
        try:
            fds = [s.fileno() for s in listeners]
            config = {
                "listen_fds": fds,
                "ports": str(directory / "proxy-ports.json"),
                "upstream": list(self.upstream),
            }
            helpers.write(directory / "proxy.json", json.dumps(config).encode())
            argv = [sys.executable, "-m", "cloudseed.compute.metadata_proxy", "proxy.json"]
            child = self._spawn(argv, directory, "proxy.log", pass_fds=fds)
            helpers.write(directory / "proxy.pid", str(child.pid).encode())
        finally:
            for sock in listeners:
                sock.close()

    def _start_uplink(self, name: str, directory: Path) -> None:
        """slirp4netns as the namespace's uplink: a tap in the namespace whose packets it
        carries through sockets of the host's own namespace, so nothing of the host's
        interfaces or firewall changes. The host's loopback stays out of reach."""
        binary = helpers.require("slirp4netns", "slirp4netns")
        argv = [
            binary,
            "--configure",
            "--disable-host-loopback",
            "--netns-type=path",
            str(netns.NETNS_DIR / name),
            UPLINK,
        ]
        child = self._spawn(argv, directory, "uplink.log")
        helpers.write(directory / "uplink.pid", str(child.pid).encode())

    def _spawn(
        self, argv: list[str], directory: Path, log_name: str, *, pass_fds: Sequence[int] = ()
    ) -> subprocess.Popen[bytes]:
        env = dict(ENVIRONMENT)
        if "PYTHONPATH" in os.environ:  # the proxy imports cloudseed as this process does
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        with (directory / log_name).open("ab") as out:
            child = subprocess.Popen(
                argv,
                cwd=directory,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
                env=env,
                pass_fds=tuple(pass_fds),
            )
        self._children.append(child)
        return child

    def _reap(self) -> None:
        self._children = [c for c in self._children if c.poll() is None]
