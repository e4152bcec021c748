"""Scenario 6: two guests at once, on two compute hosts, never see each other's data; the
second host shares nothing with the API node but the database and the API's URLs.

A second compute agent (`cloudseed compute --host e2e-host-b`, its own state directory, the
same databases) joins the service's embedded one (e2e-host-a). It runs as a host on a machine
of its own would: in a mount namespace where a private tmpfs hides the API node's data
directory (the image store, the first host's guests), so it boots its guest from the image it
fetched over HTTP into its own image cache (the disk, kernel and initramfs), and its guest's
console is read through an API-only node (`cloudseed serve --no-compute`), from the tail the
agent stores in the database. The scheduler puts the two
guests on different hosts (the first takes memory on one, so the second goes to the one with
the most free), and each host's agent boots its own. Both guests boot concurrently (their
metadata requests interleave at the service), each with its own key pair, name and address,
and each reports on its console what the metadata service told it: its own meta_data.json
when asking plainly, and what came back when it forged the other guest's id into the identity
headers. The relay in front of each guest replaces those headers with its own signed ones, so
the forged request must get the asker's own data (or an error), never the other guest's.

This runs last and alone: on two cores the two TCG guests take about twice as long."""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path

import httpx

from tests.e2e.guest_scripts import key_hash, user_data
from tests.e2e.harness import FIRST_HOST, E2ECloud, deleted_afterwards, wait_until_quiet
from tests.support.waiting import wait_until

# cloudseed keeps an address unique across all networks (Neutron only within a subnet), so
# the second guest cannot have .15 even on a network of its own. Its slirp DHCP still leases
# it .15 for cloud-init's ephemeral lookup; cloud-init then configures .16 statically from
# network_data.json, and slirp takes any address of its subnet.
SECOND_ADDRESS = "169.254.169.16"
ROOT_KEYS = "file=/root/.ssh/authorized_keys"
SECOND_HOST = "e2e-host-b"
USER_KEYS = "file=/home/debian/.ssh/authorized_keys"


def test_6_two_guests_at_once_see_only_their_own_data(e2e_cloud, keypairs, timings):
    cloud, ids = e2e_cloud
    wait_until_quiet()
    with (
        cloud.second_host(SECOND_HOST) as agent,
        cloud.api_only_node() as api_only,
        deleted_afterwards(cloud) as servers,
    ):
        hidden = cloud.work / "state"
        if os.geteuid() == 0:  # the agent's view: a private tmpfs over the API node's data
            mounts = Path(f"/proc/{agent.pid}/mountinfo").read_text().splitlines()
            assert any(f" {hidden} " in m and " - tmpfs " in m for m in mounts), mounts
        # B first, so that A's user data can name B's id; each forges the other's (B can
        # only name a made-up id, as A does not exist yet when B's user data is written).
        b_id, b_started = cloud.create(
            ids,
            run="guest-b",
            key_name="key2",
            address=SECOND_ADDRESS,
            script=user_data("guest-b", identity_check="00000000-0000-4000-8000-000000000000"),
        )
        servers.append(b_id)
        a_id, a_started = cloud.create(
            ids, run="guest-a", key_name="key1", script=user_data("guest-a", identity_check=b_id)
        )
        servers.append(a_id)
        cloud.wait_status(b_id, "ACTIVE")
        cloud.wait_status(a_id, "ACTIVE")
        assert {cloud.host_of(a_id), cloud.host_of(b_id)} == {FIRST_HOST, SECOND_HOST}
        # Both are booting now; whichever finishes first, the other is still running.
        a = cloud.wait_run(a_id, "guest-a", a_started, together=2)
        b = cloud.wait_run(b_id, "guest-b", b_started, together=2)
        timings["6 two guests at once"] = {
            "a_request_to_user_data_done_s": round(a.seconds, 1),
            "a_guest_uptime_s": a.guest_uptime,
            "b_request_to_user_data_done_s": round(b.seconds, 1),
            "b_guest_uptime_s": b.guest_uptime,
        }

        for boot, own_id, name, key, other_id in (
            (a, a_id, "e2e-guest-a", "key1", b_id),
            (b, b_id, "e2e-guest-b", "key2", a_id),
        ):
            found = boot.markers
            assert found.of("BEGIN") == [f"iid={own_id}"]
            assert found.of("DATASOURCE") == ["DataSourceOpenStackLocal"]
            wanted = key_hash(keypairs[key])
            assert sorted(found.of("KEY")) == sorted(
                [f"{ROOT_KEYS} hash={wanted}", f"{USER_KEYS} hash={wanted}"]
            )
            own = f"uuid={own_id} name={name} keys={key}"
            assert found.of("META") == [own]
            forged = found.of("FORGED")
            assert len(forged) == 1 and other_id not in forged[0]
            assert forged == [own] or forged[0].startswith("status=4"), forged
        # And neither console holds anything of the other guest.
        assert b_id not in cloud.console(a_id)
        assert a_id not in cloud.console(b_id)

        # The second host booted from its own image cache, filled over HTTP: the disk's
        # backing file, the kernel and the initramfs are its own copies. (Either guest may be
        # the one the scheduler put there.)
        on_second = a_id if cloud.host_of(a_id) == SECOND_HOST else b_id
        assert_booted_from_own_cache(cloud, ids, on_second, cloud.other_hosts[SECOND_HOST])
        # Both consoles, through a node that runs no compute host at all: the tails the agents
        # store every [compute] console_tail_interval (5 s), so up to that much behind.
        for server_id, run in ((a_id, "guest-a"), (b_id, "guest-b")):
            end = f"E2E END run={run}"
            ended = functools.partial(console_shows, cloud, server_id, api_only, end)
            wait_until(
                ended,
                timeout=60,
                interval=1,
                max_interval=1,
                what=f"{run}'s console end through the API-only node",
            )


def console_shows(cloud: E2ECloud, server_id: str, client: httpx.Client, text: str) -> bool:
    return text in cloud.console(server_id, client)


def assert_booted_from_own_cache(
    cloud: E2ECloud, ids: dict[str, str], server_id: str, state: Path
) -> None:
    cache = state / "_base"
    image = cloud.client.get(f"/image/v2/images/{ids['image']}").json()
    wanted = {image["os_hash_value"]}
    for link in ("kernel_id", "ramdisk_id"):
        linked = cloud.client.get(f"/image/v2/images/{image[link]}").json()
        wanted.add(linked["os_hash_value"])
    assert wanted <= {p.name for p in cache.iterdir()}, sorted(p.name for p in cache.iterdir())
    info = subprocess.run(
        [
            "qemu-img",
            "info",
            "--force-share",
            "--output=json",
            str(state / "instances" / server_id / "disk.qcow2"),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert json.loads(info)["backing-filename"] == str(cache / image["os_hash_value"])
