"""A bridged network's namespace, tap, dnsmasq and metadata proxy across a compute agent killed
with SIGKILL: a real ``cloudseed compute --host alpha`` (the qemu driver, the Multiboot dummy
guest of tests/support/dummy_guest.py on a tap) and its API node, on SQLite.

- the guest runs on its tap in the network's namespace, with dnsmasq and the proxy;
- SIGKILL: the guest's QEMU dies with its agent (parent-death signal) and its tap with it;
  dnsmasq and the proxy are left behind, serving nobody;
- the next agent takes them down at its start and, resuming the guest, builds the network
  afresh (one dnsmasq, one proxy);
- killed again, the server and then the network deleted while no agent runs: the next agent
  leaves nothing of the network on the host;
- a process killed halfway through building a network (its namespace made, its bridge not
  yet): the next one to need the network builds it whole.

Whatever a test leaves (it failed halfway) is removed by its fixture (``nothing_left``), so a
failed run leaks no namespace, dnsmasq or proxy; the tests still assert that the product
removed everything itself.

Needs root, iproute2, nftables, dnsmasq (``NEEDS_NETNS``), QEMU and setpriv; CI has them.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session

from cloudseed.compute import netns
from cloudseed.compute.bridge_networks import BridgeNetworks
from cloudseed.compute.bridge_plan import BridgedNetwork, BridgedPort, host_tag, namespace_name
from cloudseed.compute.errors import DriverError
from cloudseed.db.engines import Database
from cloudseed.images import service as images
from tests.support.cli import run
from tests.support.cluster import ADMIN, Cluster, registered, running_cluster, status_is, wait
from tests.support.dummy_guest import write_kernel
from tests.support.guest_netns import NEEDS_NETNS, namespace_prefix, nothing_left, plug
from tests.support.ports import free_port

QEMU = shutil.which("qemu-system-x86_64")
pytestmark = [
    NEEDS_NETNS,
    pytest.mark.skipif(
        QEMU is None or shutil.which("setpriv") is None,
        reason="needs qemu-system-x86_64 and setpriv (Debian: qemu-system-x86, util-linux)",
    ),
]


def _cli(cluster: Cluster, *args: str) -> tuple[int, str]:
    """``cloudseed ARGS`` with the cluster's settings, in this process."""
    return run(*args, env=cluster.env)


def _image(cluster: Cluster) -> str:
    kernel = write_kernel(cluster.tmp / "kernel.bin")
    disk = cluster.tmp / "dummy.raw"
    disk.write_bytes(b"\0" * 4096)
    db = Database.connect("api", cluster.url)
    try:

        def add(session: Session) -> str:
            image = images.add_bootable(
                session, name="dummy", path=disk, disk_format="raw", kernel=kernel
            )
            return image.uuid

        return db.run(add, write=True)
    finally:
        db.dispose()


def _helpers(directory: Path, namespace: str) -> dict[str, list[int]]:
    """The network's helper processes: dnsmasq (in its namespace) and the metadata proxy and
    whatever else runs in its directory."""
    inside = netns.pids(namespace) if netns.exists(namespace) else []
    beside = netns.processes_in(directory) if directory.exists() else []
    return {"dnsmasq": sorted(inside), "proxy": sorted(beside)}


def _taps(namespace: str) -> int | None:
    """How many taps are on the network's bridge; None while there is no namespace or no
    bridge in it yet (it is being built), or while it is being taken down (its teardown kills
    every process inside, ``ip -n`` included)."""
    try:
        return netns.ip(namespace, "link", "show", "master", "csbr0").count(": cst")
    except DriverError:
        return None


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.fixture()
def alpha(tmp_path: Path) -> Iterator[str]:
    """The host tag of agent ``alpha``'s networks (its state in ``tmp_path/state``); what the
    test leaves of them is removed at its end, even when it fails."""
    tag = host_tag((tmp_path / "state").resolve(), "alpha")
    with nothing_left(namespace_name(tag, ""), tmp_path):
        yield tag


def test_a_killed_agents_network_is_cleaned_up_at_its_next_start(
    tmp_path: Path, alpha: str
) -> None:
    metadata_port = free_port()
    with running_cluster(
        "sqlite",
        tmp_path,
        metadata_port=metadata_port,
        CLOUDSEED_COMPUTE_DRIVER="qemu",
        CLOUDSEED_COMPUTE__LEASE_SECONDS="3",
        CLOUDSEED_NEUTRON__SERVICE_METADATA_PROXY="true",
        CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET="cleanup-secret",
        CLOUDSEED_QEMU__BINARY=str(QEMU),
        CLOUDSEED_QEMU__ACCEL="tcg",
        CLOUDSEED_QEMU__SHUTDOWN_TIMEOUT="1",
        CLOUDSEED_QEMU__METADATA_URL=f"http://127.0.0.1:{metadata_port}",
    ) as cluster:
        image = _image(cluster)
        added = _cli(
            cluster,
            "network", "add", "blue", "--cidr", "10.64.0.0/24", "--gateway", "10.64.0.1",
            "--mode", "bridge", "-f", "value", "-c", "id",
        )  # fmt: skip
        assert added[0] == 0, added[1]
        network_id = added[1].strip()
        tag = alpha
        namespace = namespace_name(tag, network_id)
        directory = (tmp_path / "state").resolve() / "networks" / tag / network_id
        cluster.start_agent("alpha")
        wait(lambda: registered(cluster, "alpha"), 30, cluster, "alpha registered")

        body = {
            "server": {
                "name": "vm",
                "imageRef": image,
                "flavorRef": "1",
                "networks": [{"uuid": network_id}],
                "host": "alpha",
            }
        }
        r = httpx.post(f"{cluster.api}/v2.1/servers", json=body, headers=ADMIN, timeout=10)
        assert r.status_code == 202, r.text
        server_id = r.json()["server"]["id"]
        wait(status_is(cluster, server_id, "ACTIVE"), 60, cluster, "ACTIVE")

        # The guest's NIC is a tap on the network's bridge, handed to QEMU as a descriptor.
        command = (tmp_path / "state" / "instances" / server_id / "qemu.cmd").read_text()
        assert "-netdev tap,id=net0,fd=" in command
        assert _taps(namespace) == 1
        first = _helpers(directory, namespace)
        assert len(first["dnsmasq"]) == 1 and len(first["proxy"]) == 1, first

        # SIGKILL: QEMU and the tap go with the agent; dnsmasq and the proxy are left.
        cluster.kill("agent-alpha")
        wait(lambda: _taps(namespace) == 0, 30, cluster, "the tap gone with QEMU")
        assert all(_alive(p) for p in first["dnsmasq"] + first["proxy"])

        # The next agent takes them down and, resuming the guest, builds the network afresh.
        # Meanwhile the namespace goes, comes back without a bridge, then gets one: ``_taps``
        # is None until the bridge is there.
        cluster.start_agent("alpha")
        wait(lambda: _taps(namespace) == 1, 60, cluster, "the guest started again on a new tap")
        wait(status_is(cluster, server_id, "ACTIVE"), 60, cluster, "ACTIVE again")
        assert not any(_alive(p) for p in first["dnsmasq"] + first["proxy"])
        second = _helpers(directory, namespace)
        assert len(second["dnsmasq"]) == 1 and len(second["proxy"]) == 1, second

        # Killed again; the server, then the network deleted while no agent runs.
        cluster.kill("agent-alpha")
        r = httpx.delete(f"{cluster.api}/v2.1/servers/{server_id}", headers=ADMIN, timeout=10)
        assert r.status_code == 204, r.text
        assert _cli(cluster, "network", "delete", "blue") == (0, "")
        assert netns.exists(namespace)  # nobody has cleaned up yet
        cluster.start_agent("alpha")
        wait(lambda: not netns.exists(namespace), 60, cluster, "the namespace gone")
        wait(lambda: not directory.exists(), 30, cluster, "the network's directory gone")
        assert not any(_alive(p) for p in second["dnsmasq"] + second["proxy"])
        assert not netns.names(namespace_name(tag, ""))
        cluster.close()
    # Nothing of the test's networks anywhere on the host (namespaces, processes).
    leftover = [p for p in os.listdir("/proc") if p.isdigit() and _in(tmp_path, int(p))]
    assert not leftover


def _in(tmp: Path, pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/cwd").resolve().is_relative_to(tmp)
    except OSError:
        return False


# A process that builds the network and kills itself with SIGKILL right before the bridge is
# added: an agent killed at the worst moment. (The kill is real; the wrapper only times it.)
_KILLED_WHILE_BUILDING = """
import os, signal, sys
from pathlib import Path
from cloudseed.compute import netns
from cloudseed.compute.bridge_networks import BridgeNetworks
from cloudseed.compute.bridge_plan import BridgedNetwork

real_ip = netns.ip

def ip(name, *args):
    if args[:2] == ("link", "add"):
        os.kill(os.getpid(), signal.SIGKILL)
    return real_ip(name, *args)

netns.ip = ip
state, host, network_id, cidr, gateway = sys.argv[1:]
networks = BridgeNetworks(Path(state), host=host, secret="s", upstream=("127.0.0.1", 9))
with networks.locked():
    networks.ensure(BridgedNetwork(network_id, cidr, gateway, 1500))
"""


def test_a_network_whose_build_was_killed_halfway_is_built_whole_next_time(
    tmp_path: Path,
) -> None:
    host = namespace_prefix()
    state = tmp_path / "state"
    bridge = BridgeNetworks(state, host=host, secret="s", upstream=("127.0.0.1", 9))
    network = BridgedNetwork("half-built", "10.66.0.0/24", "10.66.0.1", 1500)
    port = BridgedPort("dddddddd-0000-0000-0000-000000000000", "fa:16:3e:00:00:0d",
                       ("10.66.0.10",), "inst-d", "proj")  # fmt: skip
    namespace = bridge.namespace(network.network_id)
    with nothing_left(namespace_name(bridge.tag, ""), tmp_path), nothing_left(host):
        args = [state, host, network.network_id, network.cidr, network.gateway or ""]
        killed = subprocess.run(
            [sys.executable, "-c", _KILLED_WHILE_BUILDING, *map(str, args)],
            capture_output=True,
            timeout=60,
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
        # What it left: the namespace, without its bridge.
        assert netns.exists(namespace)
        assert "csbr0" not in netns.ip(namespace, "-o", "link")

        with bridge.locked():
            bridge.ensure(network)
        assert "10.66.0.1/24" in netns.ip(namespace, "-o", "address", "show", "dev", "csbr0")
        guest = plug(bridge, f"{host}-d", network, port)  # its veth goes on the bridge
        assert "master csbr0" in netns.ip(namespace, "-o", "link", "show", port.device)
        # The guest reaches the gateway: connecting (refused: nothing listens) learns its MAC.
        bridge_mac = netns.ip(namespace, "-o", "link", "show", "csbr0").split("link/ether ")[1]
        guest.connect("10.66.0.1", 9, timeout=1)
        neighbour = guest.ip("neigh", "show", "10.66.0.1")
        assert f"lladdr {bridge_mac.split()[0]}" in neighbour, neighbour
        with bridge.locked():
            bridge.sweep({})
        assert not netns.exists(namespace)
