"""A guest that speaks only NoCloud boots from its seed URL alone (issue 34's proof).

The same disk is registered again with ``cloudseed_bootstrap=nocloud`` and no kernel (it boots
through its own GRUB): the qemu driver then gives the guest ``ds=nocloud-net;s=<seed URL>`` as
its SMBIOS serial under a product that is not OpenStack's, and no config drive. So cloud-init's
ds-identify finds NoCloud and nothing else, and the guest reads meta-data (its instance id and
key), user-data and vendor-data from ``/nocloud/<token>/``; the metadata listener's metrics
show seed requests and no OpenStack or EC2 tree request while it boots. Network config: Debian
12's cloud-init 22.4 does not fetch ``network-config`` from a seed URL (23.1 and later do), so
the guest configures its NIC with cloud-init's DHCP fallback, and slirp leases it the address
the port has (docs/qemu-driver.md). One boot, checked from the console and the metrics.
"""

from __future__ import annotations

import re
from collections import Counter

import httpx

from tests.e2e.guest_scripts import key_hash, user_data
from tests.e2e.harness import deleted_afterwards

ROOT_KEYS = "file=/root/.ssh/authorized_keys"
USER_KEYS = "file=/home/debian/.ssh/authorized_keys"
SEED_ROUTE = "/nocloud/{token}/{file}"
# Greedy: route labels hold braces ("/nocloud/{token}/{file}").
REQUESTS = re.compile(r"^cloudseed_http_requests_total\{(?P<labels>.*)\} (?P<count>\S+)$", re.M)


def nocloud_user_data(run: str) -> str:
    """The usual report (guest_scripts.user_data), and what the guest was booted with: its SMBIOS
    product and serial, ds-identify's choice, cloud-init's datasource, its address, and
    whether any config drive is attached."""
    lines = user_data(run).splitlines()
    end = lines.pop()
    lines += [
        'say PRODUCT "$(cat /sys/class/dmi/id/product_name)"',
        'say SERIAL "$(cat /sys/class/dmi/id/product_serial)"',
        'say DSLIST "$(grep -h ^datasource_list /run/cloud-init/cloud.cfg)"',
        'say DS "$(cat /var/lib/cloud/instance/datasource)"',
        "say ADDR \"$(ip -4 -o addr show scope global | awk '{print $4}')\"",
        'say DRIVE "$(blkid -L config-2 || echo none)"',
        end,
    ]
    return "\n".join(lines) + "\n"


def metadata_requests(port: int) -> Counter[str]:
    """The metadata listener's answered requests by route (its /metrics, from loopback)."""
    r = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30)
    assert r.status_code == 200, r.text
    counts: Counter[str] = Counter()
    for match in REQUESTS.finditer(r.text):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match["labels"]))
        if labels.get("listener") == "metadata" and labels.get("route") != "/metrics":
            counts[labels.get("route", "")] += int(float(match["count"]))
    return counts


def test_a_nocloud_guest_boots_from_its_seed_url_alone(e2e_cloud, keypairs, timings):
    cloud, ids = e2e_cloud
    image = cloud.cli(
        "image",
        "add",
        "debian-e2e-nocloud",
        "--file",
        str(cloud.image_dir / "debian-12-cloudseed.qcow2"),
        "--disk-format",
        "qcow2",
        "--property",
        "cloudseed_bootstrap=nocloud",
        "--property",
        "os_admin_user=debian",
        "-f",
        "value",
        "-c",
        "id",
    )
    before = metadata_requests(cloud.metadata_port)
    with deleted_afterwards(cloud) as servers:
        boot = cloud.boot(
            {**ids, "image": image},
            run="nocloud",
            key_name="key1",
            script=nocloud_user_data("nocloud"),
            # Asked for, and not attached: the guest speaks only NoCloud.
            config_drive=True,
            servers=servers,
        )
        timings["nocloud seed boot"] = {
            "request_to_user_data_done_s": round(boot.seconds, 1),
            "guest_uptime_s": boot.guest_uptime,
        }
        after = metadata_requests(cloud.metadata_port)
        r = cloud.client.get(
            f"/v2.1/servers/{boot.server_id}/nocloud-seed",
            headers={"OpenStack-API-Version": "compute 2.107"},
        )
        assert r.status_code == 200, r.text
        seed_url = r.json()["nocloud_seed"]["url"]
        console = cloud.console(boot.server_id)

    found = boot.markers
    assert found.of("BEGIN") == [f"iid={boot.server_id}"]
    # What the driver gave it, and what cloud-init made of it.
    assert found.of("SERIAL") == [f"ds=nocloud-net;s={seed_url}"]
    assert "OpenStack" not in found.of("PRODUCT")[0]
    assert found.of("DSLIST") == ["datasource_list: [ NoCloud, None ]"]
    assert found.of("DATASOURCE") == ["DataSourceNoCloudNet"]
    assert f"seed=dmi,{seed_url}" in found.of("DS")[0]
    assert found.of("DRIVE") == ["none"]
    # The key from meta-data's public-keys, the user data (this script), the vendor data.
    wanted = key_hash(keypairs["key1"])
    assert sorted(found.of("KEY")) == sorted(
        [f"{ROOT_KEYS} hash={wanted}", f"{USER_KEYS} hash={wanted}"]
    )
    assert "E2E VENDOR run=vendor from-dynamic-target" in console
    # cloud-init 22.4 reads no network-config from the URL: DHCP fallback, slirp's lease.
    assert found.of("ADDR") == ["169.254.169.15/24"]
    # Only the seed was read while it booted: no OpenStack or EC2 tree request.
    grown = after - before
    assert grown[SEED_ROUTE] >= 3, grown
    assert set(grown) == {SEED_ROUTE}, grown
