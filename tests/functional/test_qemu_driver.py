"""The qemu driver running real QEMU processes, with a guest of a few bytes
(``tests/support/dummy_guest.py``) in place of an operating system: overlays made with
qemu-img, the process and its command line, the console log, every lifecycle operation,
injection into the new disk, and that nothing keeps running after delete or close."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudseed.compute import pci_slots
from cloudseed.compute.errors import DriverError
from cloudseed.compute.interfaces import BootImage
from cloudseed.compute.qemu import QemuDriver
from cloudseed.compute.qemu_process import qmp
from cloudseed.errors import ConfigError
from cloudseed.signing import sign
from tests.support import keys
from tests.support.dummy_guest import BANNER, write_kernel
from tests.support.flavors import stored_flavor
from tests.support.ports import free_port_range
from tests.support.qemu import SECRET, TOOLS, UUID, ext4_image, guest, settings_for
from tests.support.waiting import wait_until

QEMU = shutil.which("qemu-system-x86_64")
pytestmark = pytest.mark.skipif(
    QEMU is None or shutil.which("qemu-img") is None,
    reason="needs qemu-system-x86_64 and qemu-img (Debian: qemu-system-x86, qemu-utils; "
    "tools/e2e/packages.sh installs them)",
)


@pytest.fixture()
def image(tmp_path: Path) -> BootImage:
    (tmp_path / "base").mkdir()
    base = ext4_image(tmp_path / "base" / "disk.raw")
    return BootImage(
        path=str(base),
        disk_format="raw",
        kernel_path=str(write_kernel(tmp_path / "base" / "kernel.bin")),
    )


@pytest.fixture()
def driver(tmp_path: Path) -> Iterator[QemuDriver]:
    made = QemuDriver(settings_for(tmp_path / "state"))
    yield made
    made.close()


def instance_dir(driver: QemuDriver, uuid: str = UUID) -> Path:
    return driver.root / uuid


def qemu_pid(driver: QemuDriver, uuid: str = UUID) -> int:
    pid = driver.processes.pid(driver._files(uuid))
    assert pid is not None, "QEMU is not running"
    return pid


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False


def wait_console(driver: QemuDriver, count: int, uuid: str = UUID) -> str:
    def banners() -> str | None:
        text = driver.console_output(uuid)
        return text if text.count(BANNER.decode()) >= count else None

    return wait_until(
        banners,
        timeout=20,
        interval=0.05,
        max_interval=0.05,
        what=f"{count} banners on the console",
    )


def test_spawn_runs_qemu_on_an_overlay_with_the_guest_identity(
    driver: QemuDriver, image: BootImage
) -> None:
    driver.spawn(guest(image))
    pid = qemu_pid(driver)
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert (
        b"type=1,manufacturer=OpenStack Foundation,product=OpenStack Nova,"
        b"serial=" + UUID.encode() + b",uuid=" + UUID.encode() in cmdline
    )
    assert b"virtio-net-pci,netdev=net0,mac=fa:16:3e:12:34:56" in cmdline
    assert SECRET.encode() not in b" ".join(cmdline)
    info = json.loads(
        subprocess.run(
            [
                "qemu-img",
                "info",
                "--force-share",
                "--output=json",
                str(instance_dir(driver) / "disk.qcow2"),
            ],
            check=True,
            capture_output=True,
            env=TOOLS,
        ).stdout
    )
    assert info["format"] == "qcow2" and info["backing-filename"] == image.path
    assert info["backing-filename-format"] == "raw"
    assert qmp(driver._files(UUID), "query-status")["status"] == "running"
    assert wait_console(driver, 1).endswith(BANNER.decode())


def disk_info(driver: QemuDriver, name: str = "disk.qcow2") -> dict[str, object]:
    info: dict[str, object] = json.loads(
        subprocess.run(
            [
                "qemu-img",
                "info",
                "--force-share",
                "--output=json",
                str(instance_dir(driver) / name),
            ],
            check=True,
            capture_output=True,
            env=TOOLS,
        ).stdout
    )
    return info


def test_the_guest_gets_the_flavors_ram_and_vcpus(driver: QemuDriver, image: BootImage) -> None:
    driver.spawn(guest(image, flavor=stored_flavor(ram=96, vcpus=2)))
    cmdline = Path(f"/proc/{qemu_pid(driver)}/cmdline").read_bytes().split(b"\0")
    assert cmdline[cmdline.index(b"-m") + 1] == b"96"
    assert cmdline[cmdline.index(b"-smp") + 1] == b"2"
    # And the guest has them: QEMU's own view of the machine.
    files = driver._files(UUID)
    assert qmp(files, "query-memory-size-summary")["base-memory"] == 96 << 20
    assert len(qmp(files, "query-cpus-fast")) == 2


@pytest.mark.parametrize("images_type", ["qcow2", "raw"])
def test_the_root_disk_grows_to_the_flavors_disk(
    tmp_path: Path, image: BootImage, images_type: str
) -> None:
    driver = QemuDriver(settings_for(tmp_path / "state", CLOUDSEED_QEMU__IMAGES_TYPE=images_type))
    name = f"disk.{images_type}"
    try:
        driver.spawn(guest(image, flavor=stored_flavor(ram=64, vcpus=1, disk=1)))
        assert disk_info(driver, name)["virtual-size"] == 1 << 30
        qemu_pid(driver)
        # disk 0: the image's own size (8 MiB), as in Nova; on rebuild too.
        driver.rebuild(guest(image, flavor=stored_flavor(ram=64, vcpus=1, disk=0)))
        assert disk_info(driver, name)["virtual-size"] == 8 << 20
        driver.rebuild(guest(image, flavor=stored_flavor(ram=64, vcpus=1, disk=2)))
        assert disk_info(driver, name)["virtual-size"] == 2 << 30
        qemu_pid(driver)
    finally:
        driver.close()


def test_relay_config_is_private_and_signed(driver: QemuDriver, image: BootImage) -> None:
    driver.spawn(guest(image))
    config = instance_dir(driver) / "metadata-relay.json"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert json.loads(config.read_text()) == {
        "upstream": ["127.0.0.1", 9],
        "headers": [
            ["X-Instance-ID", UUID],
            ["X-Tenant-ID", "proj"],
            ["X-Instance-ID-Signature", sign(SECRET, UUID)],
        ],
    }


def test_stop_start_and_reboots(driver: QemuDriver, image: BootImage) -> None:
    spec = guest(image)
    driver.spawn(spec)
    wait_console(driver, 1)
    first = qemu_pid(driver)

    started = time.monotonic()
    driver.power_off(UUID)  # the dummy ignores the power button: switched off after 1 s
    assert time.monotonic() - started >= 1
    assert not alive(first) and driver.processes.pid(driver._files(UUID)) is None

    driver.power_on(spec)
    assert wait_console(driver, 2).count(BANNER.decode()) == 2  # the log spans boots
    second = qemu_pid(driver)
    driver.power_on(spec)  # already running: nothing changes
    assert qemu_pid(driver) == second

    driver.reboot(spec, hard=True)
    third = qemu_pid(driver)
    assert third != second and not alive(second)
    driver.reboot(spec, hard=False)  # no answer to the button within 1 s: hard after all
    assert qemu_pid(driver) != third and not alive(third)


def test_rebuild_makes_a_new_disk_from_the_new_image(
    driver: QemuDriver, image: BootImage, tmp_path: Path
) -> None:
    driver.spawn(guest(image))
    old = qemu_pid(driver)
    other = ext4_image(tmp_path / "other.raw")
    driver.rebuild(
        guest(
            image,
            image=BootImage(path=str(other), disk_format="raw", kernel_path=image.kernel_path),
        )
    )
    assert not alive(old)
    info = json.loads(
        subprocess.run(
            [
                "qemu-img",
                "info",
                "--force-share",
                "--output=json",
                str(instance_dir(driver) / "disk.qcow2"),
            ],
            check=True,
            capture_output=True,
            env=TOOLS,
        ).stdout
    )
    assert info["backing-filename"] == str(other)
    qemu_pid(driver)


@pytest.mark.parametrize(("fmt", "bus"), [("iso9660", None), ("iso9660", "scsi"), ("vfat", None)])
def test_spawn_and_rebuild_keep_the_config_drive_built_beside_the_disk(
    driver: QemuDriver, image: BootImage, fmt: str, bus: str | None
) -> None:
    # The compute operations build disk.config in the instance directory before calling
    # spawn or rebuild; making the new disk must not take it away (QEMU then failed with
    # "Could not open .../disk.config").
    drive = instance_dir(driver) / "disk.config"
    drive.parent.mkdir(parents=True)
    drive.write_bytes(b"\0" * 2048 * 16)
    image = dataclasses.replace(image, cdrom_bus=bus)  # QEMU takes either CD-ROM bus
    spec = guest(image, config_drive=True, config_drive_path=str(drive), config_drive_format=fmt)
    driver.spawn(spec)
    cmdline = Path(f"/proc/{qemu_pid(driver)}/cmdline").read_bytes()
    assert drive.exists() and str(drive).encode() in cmdline
    driver.rebuild(spec)
    cmdline = Path(f"/proc/{qemu_pid(driver)}/cmdline").read_bytes()
    assert drive.exists() and str(drive).encode() in cmdline


def test_a_nocloud_guest_runs_with_its_seed_serial_and_no_config_drive(
    driver: QemuDriver, image: BootImage
) -> None:
    # QEMU takes the serial with its ';' and a doubled ',' (a seed base URL may hold one).
    drive = instance_dir(driver) / "disk.config"
    drive.parent.mkdir(parents=True)
    drive.write_bytes(b"\0" * 2048 * 16)
    url = "http://10.0.0.2:8775/a,b/nocloud/" + "T" * 64 + "/"
    image = dataclasses.replace(image, bootstrap="nocloud")
    driver.spawn(
        guest(image, config_drive=True, config_drive_path=str(drive), nocloud_seed_url=url)
    )
    cmdline = Path(f"/proc/{qemu_pid(driver)}/cmdline").read_bytes().split(b"\0")
    serial = "serial=ds=nocloud-net;s=" + url.replace(",", ",,")
    assert any(serial.encode() in arg and b"OpenStack" not in arg for arg in cmdline)
    assert not any(b"disk.config" in arg for arg in cmdline)
    assert qmp(driver._files(UUID), "query-status")["status"] == "running"


def test_a_guest_printing_in_a_loop_cannot_fill_the_disk(tmp_path: Path) -> None:
    """Issue 13: the console log is bounded as virtlogd bounds a libvirt guest's (rotated once
    past [qemu] console_log_max_size), and os-getConsoleOutput still answers the tail."""
    base = tmp_path / "base"
    base.mkdir()
    looping = BootImage(
        path=str(ext4_image(base / "disk.raw")),
        disk_format="raw",
        kernel_path=str(write_kernel(base / "kernel.bin", loop=True)),
    )
    max_size = 256 * 1024
    driver = QemuDriver(
        settings_for(tmp_path / "state", CLOUDSEED_QEMU__CONSOLE_LOG_MAX_SIZE=str(max_size))
    )
    driver.console_logs.interval = 0.05
    try:
        driver.spawn(guest(looping))
        log = driver._files(UUID).console_log
        backup = log.with_name("console.log.0")
        try:
            wait_until(backup.exists, timeout=30, interval=0.05, max_interval=0.05)
        except AssertionError:
            raise AssertionError(f"never rotated: {log.stat().st_size} bytes") from None
        for _ in range(20):  # the guest keeps printing; the files stay near the bound
            time.sleep(0.1)  # paces the samples over 2 s of printing, waits for nothing
            sizes = log.stat().st_size, backup.stat().st_size
            assert sizes[1] <= max_size * 2, sizes
            assert sizes[0] <= max_size * 4, sizes
        text = driver.console_output(UUID)
        assert len(text) == 100 * 1024  # the tail, across both files
        assert BANNER.decode() in text
    finally:
        driver.close()


def test_destroy_leaves_nothing(driver: QemuDriver, image: BootImage) -> None:
    driver.spawn(guest(image))
    pid = qemu_pid(driver)
    driver.destroy(UUID)
    assert not alive(pid)
    assert not instance_dir(driver).exists()
    driver.destroy(UUID)  # a second delete is no error
    assert driver.console_output(UUID) == ""


def test_close_switches_every_guest_off(tmp_path: Path, image: BootImage) -> None:
    driver = QemuDriver(settings_for(tmp_path / "state"))
    other = "5d0f8c1e-7b2a-4e3d-9f6a-1c2b3d4e5f60"
    driver.spawn(guest(image))
    driver.spawn(guest(image, uuid=other))
    pids = [qemu_pid(driver), qemu_pid(driver, other)]
    # Another worker process of the service finds them through their pid files.
    another = QemuDriver(settings_for(tmp_path / "state"))
    assert another.powered_on(UUID) and another.powered_on(other)
    another.close()
    assert not any(alive(pid) for pid in pids)
    # Switched off, not gone: the next agent sees guests it has that do not run.
    assert driver.running() == {UUID, other}
    assert not driver.powered_on(UUID) and not driver.powered_on(other)
    assert not driver.powered_on("0b7e5c1d-0000-4000-8000-000000000000")  # never had it
    driver.close()


def test_a_failing_start_reports_qemus_reason(driver: QemuDriver, image: BootImage) -> None:
    missing = BootImage(path=image.path, disk_format="raw", kernel_path="/nonexistent/kernel")
    with pytest.raises(DriverError, match=r"QEMU exited .*nonexistent/kernel"):
        driver.spawn(guest(image, image=missing))
    with pytest.raises(DriverError, match="no file on this host"):
        driver.spawn(guest(image, image=None))


def test_the_driver_needs_the_signing_proxy_mode(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="service_metadata_proxy"):
        QemuDriver(settings_for(tmp_path, CLOUDSEED_NEUTRON__SERVICE_METADATA_PROXY="false"))


# -- injection on create and rebuild (issue 6) ------------------------------------------------

INJECTING = {
    "CLOUDSEED_QEMU__IMAGES_TYPE": "raw",
    "CLOUDSEED_LIBVIRT__INJECT_PARTITION": "0",
    "CLOUDSEED_LIBVIRT__INJECT_KEY": "true",
    "CLOUDSEED_LIBVIRT__INJECT_PASSWORD": "true",
    "CLOUDSEED_LIBVIRT__INJECT_HANDLERS": "debugfs",
}


def guest_cat(disk: Path, path: str) -> bytes:
    return subprocess.run(
        ["debugfs", "-R", f"cat {path}", str(disk)], check=True, capture_output=True, env=TOOLS
    ).stdout


needs_debugfs = pytest.mark.skipif(
    shutil.which("debugfs", path=TOOLS["PATH"]) is None, reason="needs debugfs (Debian: e2fsprogs)"
)


@needs_debugfs
def test_spawn_and_rebuild_inject_key_metadata_and_files(tmp_path: Path, image: BootImage) -> None:
    driver = QemuDriver(settings_for(tmp_path / "state", **INJECTING))
    try:
        key1, key2 = keys.ed25519_public("one"), keys.ed25519_public("two")
        driver.spawn(
            guest(
                image,
                key_data=key1,
                metadata={"role": "web"},
                files=(("/etc/motd", b"hello\n"),),
                admin_password="s3cret pw",
            )
        )
        disk = instance_dir(driver) / "disk.raw"
        assert key1 in guest_cat(disk, "/root/.ssh/authorized_keys").decode()
        # The admin password as a SHA-512 crypt hash, checked by openssl with its salt.
        root_hash = guest_cat(disk, "/etc/shadow").decode().split("\n")[0].split(":")[1]
        salt = root_hash.split("$")[2]
        assert (
            root_hash.startswith("$6$")
            and subprocess.run(
                ["openssl", "passwd", "-6", "-salt", salt, "s3cret pw"],
                check=True,
                capture_output=True,
                text=True,
                env=TOOLS,
            ).stdout.strip()
            == root_hash
        )
        assert json.loads(guest_cat(disk, "/meta.js")) == {"role": "web"}
        assert guest_cat(disk, "/etc/motd") == b"hello\n"
        driver.rebuild(guest(image, key_data=key2))
        keys_now = guest_cat(disk, "/root/.ssh/authorized_keys").decode()
        assert key2 in keys_now and key1 not in keys_now
        qemu_pid(driver)
    finally:
        driver.close()


@needs_debugfs
def test_no_injection_with_a_config_drive(tmp_path: Path, image: BootImage) -> None:
    driver = QemuDriver(settings_for(tmp_path / "state", **INJECTING))
    try:
        driver.spawn(guest(image, key_data=keys.ed25519_public("one"), config_drive=True))
        disk = instance_dir(driver) / "disk.raw"
        assert (
            b"File not found"
            in subprocess.run(
                ["debugfs", "-R", "stat /root/.ssh", str(disk)], capture_output=True, env=TOOLS
            ).stderr
        )
    finally:
        driver.close()


def test_injection_that_cannot_be_done_fails_the_spawn(tmp_path: Path, image: BootImage) -> None:
    # debugfs never writes into a qcow2 overlay; with no other handler the build fails.
    driver = QemuDriver(
        settings_for(tmp_path / "state", **{**INJECTING, "CLOUDSEED_QEMU__IMAGES_TYPE": "qcow2"})
    )
    try:
        with pytest.raises(DriverError, match=r"Injection into the disk .* debugfs"):
            driver.spawn(guest(image, key_data=keys.ed25519_public("one")))
        assert driver.processes.pid(driver._files(UUID)) is None
    finally:
        driver.close()


def test_processes_do_not_inherit_our_environment(driver: QemuDriver, image: BootImage) -> None:
    os.environ["CLOUDSEED_TEST_LEAK"] = "x"
    try:
        driver.spawn(guest(image))
        environ = Path(f"/proc/{qemu_pid(driver)}/environ").read_bytes()
        assert b"CLOUDSEED_TEST_LEAK" not in environ
    finally:
        del os.environ["CLOUDSEED_TEST_LEAK"]


# -- SSH forward, opted in per server (issue 20) ---------------------------------------------

OPTED_IN = {"cloudseed:ssh_forward": "true"}


def accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        return False
    return True


@pytest.fixture()
def ssh_ports() -> range:
    return free_port_range()


@pytest.fixture()
def forwarding(tmp_path: Path, ssh_ports: range) -> Iterator[QemuDriver]:
    made = QemuDriver(
        settings_for(
            tmp_path / "state",
            CLOUDSEED_QEMU__SSH_FORWARD_ADDRESS="127.0.0.1",
            CLOUDSEED_QEMU__SSH_FORWARD_PORTS=f"{ssh_ports[0]}-{ssh_ports[-1]}",
        )
    )
    yield made
    made.close()


def test_an_opted_in_guest_gets_a_forward_that_survives_reboots(
    forwarding: QemuDriver, image: BootImage, ssh_ports: range
) -> None:
    driver = forwarding
    blocker = socket.socket()  # the range's first port is taken: skipped
    blocker.bind(("127.0.0.1", ssh_ports[0]))
    blocker.listen()
    try:
        spec = guest(image, metadata=OPTED_IN)
        driver.spawn(spec)
        port = ssh_ports[1]
        assert driver.ssh_forward(UUID) == f"127.0.0.1:{port}"
        cmdline = Path(f"/proc/{qemu_pid(driver)}/cmdline").read_bytes()
        assert f"hostfwd=tcp:127.0.0.1:{port}-:22".encode() in cmdline
        assert accepts(port)
        blocker.close()  # free again, but the guest keeps its port
        for step in (
            lambda: driver.reboot(spec, hard=True),
            lambda: driver.power_off(UUID),
            lambda: driver.power_on(spec),
            lambda: driver.rebuild(spec),
        ):
            step()
            if driver.processes.running(driver._files(UUID)):
                assert driver.ssh_forward(UUID) == f"127.0.0.1:{port}"
                assert accepts(port)
            else:  # stopped: no forward, nothing listens
                assert driver.ssh_forward(UUID) is None
                assert not accepts(port)
    finally:
        blocker.close()
    driver.destroy(UUID)
    assert driver.ssh_forward(UUID) is None and not accepts(port)


def test_no_forward_without_the_opt_in(
    forwarding: QemuDriver, image: BootImage, ssh_ports: range
) -> None:
    driver = forwarding
    driver.spawn(guest(image, metadata={"cloudseed:ssh_forward": "false"}))
    assert driver.ssh_forward(UUID) is None
    assert b"hostfwd" not in Path(f"/proc/{qemu_pid(driver)}/cmdline").read_bytes()
    assert not any(accepts(p) for p in ssh_ports)


def test_two_guests_get_two_ports_and_opting_out_keeps_the_port(
    forwarding: QemuDriver, image: BootImage, ssh_ports: range
) -> None:
    driver = forwarding
    other = "5d0f8c1e-7b2a-4e3d-9f6a-1c2b3d4e5f60"
    spec = guest(image, metadata=OPTED_IN)
    driver.spawn(spec)
    driver.power_off(UUID)
    # A stopped guest's port is still its own: the next guest gets another one.
    driver.spawn(guest(image, uuid=other, metadata=OPTED_IN))
    assert driver.ssh_forward(other) == f"127.0.0.1:{ssh_ports[1]}"
    driver.power_on(spec)
    assert driver.ssh_forward(UUID) == f"127.0.0.1:{ssh_ports[0]}"
    # Opting out (metadata changed, then a reboot) closes the forward; opting in again
    # brings the same port back.
    driver.reboot(guest(image), hard=True)
    assert driver.ssh_forward(UUID) is None and not accepts(ssh_ports[0])
    driver.reboot(spec, hard=True)
    assert driver.ssh_forward(UUID) == f"127.0.0.1:{ssh_ports[0]}" and accepts(ssh_ports[0])


def test_a_tagged_port_is_at_the_pci_address_its_guest_is_told(
    driver: QemuDriver, image: BootImage
) -> None:
    macs = [f"fa:16:3e:00:00:0{i}" for i in range(3)]
    ports = [
        {"mac_address": mac, "tag": "storage" if i == 1 else None} for i, mac in enumerate(macs)
    ]
    driver.spawn(guest(image, ports=ports))
    qtree = qmp(driver._files(UUID), "human-monitor-command", **{"command-line": "info qtree"})
    # Each NIC's MAC and slot, in QEMU's own words ("addr = 11.0"), against the address
    # meta_data.json's devices names (compute/pci_slots.py).
    # The PCI device holds the slot, the virtio-net device under it the MAC.
    slots, slot_of_next = {}, ""
    for block in qtree.split("dev: ")[1:]:
        if block.startswith("virtio-net-pci"):
            slot_of_next = block.split("addr = ", 1)[1].split()[0]
        elif block.startswith("virtio-net-device"):
            slots[block.split('mac = "', 1)[1].split('"', 1)[0]] = slot_of_next
    assert set(slots) == set(macs)
    slot = pci_slots.tagged_nic_slot(1)
    assert slot is not None and slots[macs[1]] == f"{slot:02x}.0"
    assert pci_slots.pci_address(slot) == "0000:00:11.0"
    assert slots[macs[0]] != slots[macs[1]] != slots[macs[2]]
