import pytest

from cloudseed.compute.errors import DriverError
from cloudseed.compute.fake import RUNNING, SHUTDOWN, FakeDriver
from cloudseed.compute.interfaces import GuestSpec
from cloudseed.servers import states
from cloudseed.servers.hostnames import sanitize_hostname


@pytest.mark.parametrize(
    "vm, task, status",
    [
        ("active", None, "ACTIVE"),
        ("active", "rebooting", "REBOOT"),
        ("active", "rebooting_hard", "HARD_REBOOT"),
        ("active", "rebuilding", "REBUILD"),
        ("stopped", "rebuilding", "REBUILD"),
        ("stopped", None, "SHUTOFF"),
        ("stopped", "powering-on", "SHUTOFF"),
        ("building", "spawning", "BUILD"),
        ("error", None, "ERROR"),
        ("mystery", None, "UNKNOWN"),
    ],
)
def test_status_map(vm, task, status):
    assert states.status_of(vm, task) == status


def test_status_filters_cover_every_status():
    shown = {status for by_task in states._STATUS.values() for status in by_task.values()}
    assert set(states.STATUS_FILTERS) == shown
    (build,) = states.STATUS_FILTERS["BUILD"]
    assert build.untasked and not build.named_tasks  # any task of a build
    rebuild = {f.vm_state: f.tasks for f in states.STATUS_FILTERS["REBUILD"]}
    assert rebuild == {vm: ("rebuilding",) for vm in ("active", "stopped", "error")}
    (active,) = states.STATUS_FILTERS["ACTIVE"]
    assert active.untasked and "rebooting" in active.named_tasks and not active.tasks


@pytest.mark.parametrize(
    "name, expected",
    [
        ("My Server", "my-server"),
        ("web_01.example", "web-01-example"),
        ("--x--", "x"),
        ("ünïcode ☃ name", "unicode--name"),
        ("☃☃", "server-x"),
        ("a" * 80, "a" * 63),
    ],
)
def test_sanitize_hostname(name, expected):
    assert sanitize_hostname(name, default="server-x") == expected


def guest(uuid: str = "u1") -> GuestSpec:
    return GuestSpec(
        uuid=uuid,
        name="n",
        hostname="n",
        image_ref="i",
        flavor=None,
        key_data=None,
        user_data=None,
        config_drive=False,
    )


def test_fake_driver_states_and_injected_failures():
    driver = FakeDriver()
    driver.spawn(guest())
    assert driver.power["u1"] == RUNNING
    driver.power_off("u1")
    assert driver.power["u1"] == SHUTDOWN
    driver.fail("rebuild", uuid="u1", message="disk full")
    with pytest.raises(DriverError, match="rebuild failed: disk full"):
        driver.rebuild(guest())
    driver.rebuild(guest())  # only once
    driver.fail("spawn", times=2)
    for uuid in ("a", "b"):
        with pytest.raises(DriverError):
            driver.spawn(guest(uuid))
    driver.spawn(guest("c"))
    driver.destroy("u1")
    assert "u1" not in driver.guests
    assert driver.calls[0] == ("spawn", "u1")
