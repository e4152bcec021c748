"""``cloudseed nova-metadata`` loads the instances Nova is building before their guests ask: an
instance Nova writes after the service started (as it does while building one) is in the
worker's cache, its first documents made, before its first request, which is a hit; at start,
the instances updated in the last ``load_recent_seconds`` are loaded too. Counted with the
service's own metrics (cache hits, misses, guests held), a real process on every backend."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import insert

from cloudseed.nova_metadata import changes, schema
from tests.support.nova_without_nova import (
    IMAGE,
    NovaDeployment,
    Service,
    nova_deployment,
    running_service,
    signed,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.databases
KEY = ("mykey", "ssh", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIBSrXrc6m6lH54i3kRGkXEQxdQ3 me@host")
# What cloud-init asks first (bench/storm_crawl.py), "/openstack" aside (the same for all).
FIRST_ASKED = (
    "/openstack/latest/meta_data.json",
    "/openstack/latest/user_data",
    "/openstack/latest/network_data.json",
    "/openstack/latest/vendor_data2.json",
    "/latest/meta-data/",
    "/latest/meta-data/public-keys/0/openssh-key",
    "/latest/user-data",
)


@pytest.fixture()
def nova(backend: str, tmp_path: Path) -> Iterator[NovaDeployment]:
    with nova_deployment(backend, tmp_path) as deployment:
        deployment.neutron.groups["sg-default"] = "default"
        # The image's EC2 id, as Nova's metadata API makes it for the image's first guest:
        # loading ahead never writes, so an instance without it waits for its request.
        with deployment.cell.begin() as c:
            c.execute(insert(schema.s3_images).values(uuid=IMAGE, deleted=0))
        yield deployment


def cache(service: Service) -> dict[str, float]:
    """The worker's cache counters from /metrics: hits, misses, guests."""
    text = service.get("/metrics").text
    found = {}
    for name in ("hits", "misses", "guests"):
        match = re.search(rf"^cloudseed_metadata_cache_{name}(?:_total)? (\S+)$", text, re.M)
        found[name] = float(match[1]) if match else 0.0
    return found


def test_an_instance_nova_writes_after_the_start_is_cached_before_its_guest_asks(
    nova: NovaDeployment,
) -> None:
    conf = nova.conf(cloudseed_metadata={"change_poll_interval_ms": 100, "load_recent_seconds": 0})
    with running_service(conf) as service:
        assert cache(service) == {"hits": 0.0, "misses": 0.0, "guests": 0.0}
        booting = nova.add_instance("booting", keys=[KEY], user_data=b"#cloud-config\n")
        nova.save(booting)  # Nova's last write, as the instance goes ACTIVE
        # Its guest boots seconds later. Until then MariaDB's whole-second stamps are reported
        # at every poll (another change may share the second: changes.py), each dropping
        # the instance before it is loaded again; they settle in SETTLE.
        time.sleep(changes.SETTLE.total_seconds() + 0.5)
        wait_until(
            lambda: cache(service)["guests"] == 1.0, timeout=10, what="the instance loaded ahead"
        )
        for path in FIRST_ASKED:
            answer = service.get(path, signed(booting.uuid))
            assert answer.status_code == 200, path
        assert service.get("/latest/meta-data/hostname", signed(booting.uuid)).text == (
            "booting.novalocal"
        )
        counted = cache(service)
        assert counted["misses"] == 0.0  # no request waited for a load
        assert counted["hits"] == len(FIRST_ASKED) + 1


def test_instances_updated_lately_are_loaded_at_start(nova: NovaDeployment) -> None:
    recent = nova.add_instance("recent")
    newest = nova.add_instance("newest")
    old = nova.add_instance("old")
    nova.backdate(recent, 60)
    # The newest stamp more than the watch's look-back (5 s) after the recent one: the
    # watch's first poll re-reads the last 5 s before the newest stamp, not the recent one.
    nova.backdate(newest, 20)
    nova.backdate(old, 3600)
    with running_service(nova.conf()) as service:  # load_recent_seconds = 300 by default
        wait_until(lambda: cache(service)["guests"] == 2.0, timeout=10, what="both loaded")
        for instance in (recent, newest):
            assert service.get("/latest/meta-data/hostname", signed(instance.uuid)).status_code == (
                200
            )
        assert cache(service)["misses"] == 0.0
        assert service.get("/latest/meta-data/hostname", signed(old.uuid)).status_code == 200
        assert cache(service)["misses"] == 1.0  # the old one loads at its first request
    conf = nova.conf(cloudseed_metadata={"change_poll_interval_ms": 100, "load_recent_seconds": 0})
    with running_service(conf) as service:
        # Polls enough for the watch to have loaded what it reports (its first poll re-reads
        # the 5 s before the newest stamp: the newest one, on a server database); nothing
        # loads the recent one.
        time.sleep(1)
        assert cache(service)["guests"] <= 1.0
        answer = httpx.get(
            service.url + "/latest/meta-data/hostname", headers=signed(recent.uuid), timeout=30
        )
        assert answer.text == "recent.novalocal"
        assert cache(service)["misses"] == 1.0


def test_a_host_whose_guests_miss_together_has_its_other_guests_loaded(
    nova: NovaDeployment,
) -> None:
    """A host that came back boots all its guests at once: after three of them missed, its
    other active instances are loaded ahead (hosts.py), not another host's, nor a stopped
    one of the same host."""
    rebooted = [nova.add_instance(f"h1-{n}", host="h1") for n in range(6)]
    stopped = nova.add_instance("h1-stopped", host="h1", vm_state="stopped")
    elsewhere = nova.add_instance("h2-0", host="h2")
    for instance in (*rebooted, stopped, elsewhere):
        nova.backdate(instance, 3600)  # nothing new for the watch to load ahead
    conf = nova.conf(cloudseed_metadata={"load_recent_seconds": 0, "host_boot_misses": 3})
    with running_service(conf) as service:
        time.sleep(1)  # the watch's first polls: they load nothing
        assert cache(service)["guests"] == 0.0
        for instance in rebooted[:2]:
            assert service.get("/latest/meta-data/hostname", signed(instance.uuid)).status_code == (
                200
            )
        time.sleep(0.5)
        assert cache(service)["guests"] == 2.0  # two misses are not a host booting
        service.get("/latest/meta-data/hostname", signed(rebooted[2].uuid))
        wait_until(
            lambda: cache(service)["guests"] == 6.0, timeout=10, what="the host's guests loaded"
        )
        for instance in rebooted[3:]:
            assert service.get("/latest/meta-data/hostname", signed(instance.uuid)).text == (
                f"{instance.name}.novalocal"
            )
        counted = cache(service)
        assert counted["misses"] == 3.0  # the three that woke the host
        assert counted["guests"] == 6.0  # neither the stopped one nor the other host's
        service.get("/latest/meta-data/hostname", signed(elsewhere.uuid))
        assert cache(service)["misses"] == 4.0


def test_host_boot_misses_zero_loads_no_neighbours(nova: NovaDeployment) -> None:
    rebooted = [nova.add_instance(f"h1-{n}", host="h1") for n in range(4)]
    for instance in rebooted:
        nova.backdate(instance, 3600)
    conf = nova.conf(cloudseed_metadata={"load_recent_seconds": 0, "host_boot_misses": 0})
    with running_service(conf) as service:
        for instance in rebooted[:3]:
            service.get("/latest/meta-data/hostname", signed(instance.uuid))
        time.sleep(1)
        assert cache(service)["guests"] == 3.0
