"""The qemu driver's command line for a guest: what cloud-init and the tests rely on."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from cloudseed.compute.errors import DriverError
from cloudseed.compute.interfaces import BootImage, GuestSpec
from cloudseed.compute.qemu_argv import GIB, Accel, FlavorSizes, InstanceFiles, build_argv
from cloudseed.compute.ssh_forward import Forward
from tests.support.flavors import stored_flavor

UUID = "6f2b5d7e-2a4c-4a8e-9a53-0c1f3b1d2e4f"
FILES = InstanceFiles(Path("/var/lib/cloudseed/instances") / UUID, "disk.qcow2")


def guest(**changes: object) -> GuestSpec:
    values: dict[str, object] = dict(
        uuid=UUID,
        name="vm",
        hostname="vm",
        image_ref="img",
        flavor=stored_flavor(ram=1024, vcpus=2, disk=1),
        key_data=None,
        user_data=None,
        config_drive=False,
        ports=[{"mac_address": "fa:16:3e:00:00:01"}],
        project_id="proj",
        image=BootImage(
            path="/images/disk.raw",
            disk_format="raw",
            kernel_path="/images/vmlinuz",
            ramdisk_path="/images/initrd.img",
        ),
    )
    values.update(changes)
    return GuestSpec(**values)  # type: ignore[arg-type]


def argv_of(
    spec: GuestSpec,
    relay: list[str] | None = None,
    ssh_forward: Forward | None = None,
    taps: dict[int, int] | None = None,
) -> list[str]:
    return build_argv(
        spec,
        FILES,
        binary="qemu-system-x86_64",
        accel=Accel("tcg"),
        disk_format="qcow2",
        relay_command=relay,
        default_cmdline="root=/dev/vda",
        ssh_forward=ssh_forward,
        taps=taps,
    )


def option(argv: list[str], name: str) -> list[str]:
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == name]


def test_openstack_smbios_with_the_instance_uuid() -> None:
    argv = argv_of(guest())
    assert option(argv, "-smbios") == [
        f"type=1,manufacturer=OpenStack Foundation,product=OpenStack Nova,serial={UUID},uuid={UUID}"
    ]
    assert option(argv, "-uuid") == [UUID]


def qemu_fields(value: str) -> dict[str, str]:
    """An option value as QEMU reads it: ``key=value`` pairs split at single commas, with
    doubled commas standing for one."""
    fields, field = [], ""
    i = 0
    while i < len(value):
        if value.startswith(",,", i):
            field, i = field + ",", i + 2
        elif value[i] == ",":
            fields.append(field)
            field, i = "", i + 1
        else:
            field, i = field + value[i], i + 1
    fields.append(field)
    return dict(f.split("=", 1) for f in fields)


SEED = "http://169.254.169.254/nocloud/" + "T" * 64 + "/"
NOCLOUD_IMAGE = BootImage(path="/images/disk.raw", disk_format="raw", bootstrap="nocloud")


def test_a_nocloud_guest_gets_its_seed_as_serial_under_a_neutral_product() -> None:
    argv = argv_of(guest(image=NOCLOUD_IMAGE, nocloud_seed_url=SEED))
    [smbios] = option(argv, "-smbios")
    fields = qemu_fields(smbios)
    # cloud-init 22.4 reads an http seed under ds=nocloud-net (in the serial as on the command
    # line); ds-identify picks OpenStack for the product "OpenStack Nova", so that is not it.
    assert fields["serial"] == f"ds=nocloud-net;s={SEED}"
    assert "OpenStack" not in fields["manufacturer"] + fields["product"]
    assert (fields["type"], fields["uuid"]) == ("1", UUID)
    assert option(argv, "-uuid") == [UUID]


def test_a_seed_url_with_commas_stays_one_value() -> None:
    url = "http://10.0.0.2:8775/a,b/nocloud/" + "T" * 64 + "/"
    argv = argv_of(guest(image=NOCLOUD_IMAGE, nocloud_seed_url=url))
    assert qemu_fields(option(argv, "-smbios")[0])["serial"] == f"ds=nocloud-net;s={url}"


def test_a_nocloud_guest_gets_no_config_drive_and_without_a_seed_only_its_uuid() -> None:
    argv = argv_of(guest(image=NOCLOUD_IMAGE, config_drive=True, config_drive_path="/d/cd.iso"))
    assert [d for d in option(argv, "-drive") if "cd.iso" in d] == []
    assert not any("configdrive" in d for d in option(argv, "-device"))
    # No seed (revoked): cloud-init finds no NoCloud source, and no OpenStack either.
    fields = qemu_fields(option(argv, "-smbios")[0])
    assert fields["serial"] == UUID and "OpenStack" not in fields["product"]


def test_an_unknown_bootstrap_is_refused() -> None:
    image = BootImage(path="/images/disk.raw", disk_format="raw", bootstrap="ignition")
    with pytest.raises(DriverError, match="cloudseed_bootstrap 'ignition'"):
        argv_of(guest(image=image))


def test_flavor_sizes_and_direct_kernel_boot() -> None:
    argv = argv_of(guest())
    assert option(argv, "-m") == ["1024"] and option(argv, "-smp") == ["2"]
    big = argv_of(guest(flavor=stored_flavor(ram=3072, vcpus=4)))
    assert option(big, "-m") == ["3072"] and option(big, "-smp") == ["4"]
    assert option(argv, "-kernel") == ["/images/vmlinuz"]
    assert option(argv, "-initrd") == ["/images/initrd.img"]
    assert option(argv, "-append") == ["root=/dev/vda"]


def test_flavor_sizes_read_the_stored_flavor() -> None:
    sizes = FlavorSizes.of(stored_flavor(ram=2048, vcpus=3, disk=20, ephemeral=5, swap=512))
    assert sizes == FlavorSizes(memory_mb=2048, vcpus=3, disk_gb=20)
    # An instance without a flavor record (older rows) gets the defaults, disk: the image's.
    assert FlavorSizes.of(None) == FlavorSizes(memory_mb=512, vcpus=1, disk_gb=0)


@pytest.mark.parametrize(
    ("disk_gb", "virtual_size", "grown"),
    [
        (0, 2 * GIB, None),  # disk 0: the image's own size, as in Nova
        (10, 2 * GIB, 10 * GIB),
        (2, 2 * GIB, None),  # already that size
        (1, 2 * GIB, None),  # never shrunk (the API refuses such a flavor anyway)
        (1, 8 << 20, GIB),
    ],
)
def test_root_disk_growth(disk_gb: int, virtual_size: int, grown: int | None) -> None:
    sizes = FlavorSizes(memory_mb=512, vcpus=1, disk_gb=disk_gb)
    assert sizes.root_disk_size(virtual_size) == grown


def test_image_command_line_wins_and_no_kernel_means_no_append() -> None:
    image = BootImage(path="/i.raw", disk_format="raw", kernel_path="/k", cmdline="quiet")
    assert option(argv_of(guest(image=image)), "-append") == ["quiet"]
    bare = argv_of(guest(image=BootImage(path="/i.raw", disk_format="raw")))
    assert option(bare, "-kernel") == [] and option(bare, "-append") == []


def test_disk_is_the_instance_overlay_by_relative_name() -> None:
    assert option(argv_of(guest()), "-drive") == [
        "file=disk.qcow2,if=virtio,format=qcow2,cache=writeback,discard=unmap"
    ]


def test_nic_with_the_port_mac_on_a_restricted_network() -> None:
    argv = argv_of(
        guest(ports=[{"mac_address": "fa:16:3e:00:00:01"}, {"mac_address": "fa:16:3e:00:00:02"}])
    )
    assert option(argv, "-device")[:2] == [
        "virtio-net-pci,netdev=net0,mac=fa:16:3e:00:00:01",
        "virtio-net-pci,netdev=net1,mac=fa:16:3e:00:00:02",
    ]
    for netdev in option(argv, "-netdev"):
        assert "net=169.254.169.0/24" in netdev and "restrict=on" in netdev


def test_a_tagged_port_has_its_fixed_pci_slot() -> None:
    ports: list[dict[str, object]] = [
        {"mac_address": f"fa:16:3e:00:00:0{i}", "tag": tag} for i, tag in enumerate((None, "b"))
    ]
    assert option(argv_of(guest(ports=ports)), "-device")[:2] == [
        "virtio-net-pci,netdev=net0,mac=fa:16:3e:00:00:00",
        "virtio-net-pci,netdev=net1,mac=fa:16:3e:00:00:01,addr=0x11",
    ]


def test_metadata_address_goes_to_the_relay_command() -> None:
    relay = ["/usr/bin/python3", "-I", "/opt/my dir/relay.py", "relay,config.json"]
    netdev = option(argv_of(guest(), relay), "-netdev")[0]
    assert ",guestfwd=tcp:169.254.169.254:80-cmd:" in netdev
    command = netdev.split("-cmd:", 1)[1]
    # QEMU undoubles commas in option values; slirp then splits with shell rules.
    assert shlex.split(command.replace(",,", ",")) == relay


def test_without_a_relay_there_is_no_forward() -> None:
    assert "guestfwd" not in option(argv_of(guest()), "-netdev")[0]


def test_ssh_forward_on_the_first_nic_only() -> None:
    spec = guest(ports=[{"mac_address": "fa:16:3e:00:00:01"}, {"mac_address": "fa:16:3e:00:00:02"}])
    relay = ["/usr/bin/python3", "relay.py"]
    argv = argv_of(spec, relay, Forward("127.0.0.1", 10022))
    first, second = option(argv, "-netdev")
    assert ",restrict=on,hostfwd=tcp:127.0.0.1:10022-:22,guestfwd=" in first
    assert "hostfwd" not in second
    assert "hostfwd" not in option(argv_of(spec, relay), "-netdev")[0]


def test_ssh_forward_leads_to_the_address_the_guest_configures() -> None:
    """A guest given .16 configures .16 from network_data.json, not slirp's first lease (.15):
    the forward goes there; an address outside slirp's subnet leaves slirp's choice."""
    relay = ["/usr/bin/python3", "relay.py"]
    for fixed_ips, target in (
        (["fd00::5", "169.254.169.16"], "169.254.169.16"),
        (["10.0.0.5"], ""),
    ):
        spec = guest(ports=[{"mac_address": "fa:16:3e:00:00:01", "fixed_ips": fixed_ips}])
        netdev = option(argv_of(spec, relay, Forward("127.0.0.1", 10022)), "-netdev")[0]
        assert f",hostfwd=tcp:127.0.0.1:10022-{target}:22," in netdev


def test_bridged_ports_are_the_taps_handed_in_and_slirp_gets_the_rest() -> None:
    """A bridged port is the tap whose descriptor QEMU inherits, with the port's MAC; the
    relay and the SSH forward go to the first slirp NIC, wherever it is."""
    spec = guest(ports=[{"mac_address": "fa:16:3e:00:00:01"}, {"mac_address": "fa:16:3e:00:00:02"}])
    relay = ["/usr/bin/python3", "relay.py"]
    argv = argv_of(spec, relay, Forward("127.0.0.1", 10022), taps={0: 7})
    tap, slirp = option(argv, "-netdev")
    assert tap == "tap,id=net0,fd=7"
    assert "hostfwd=tcp:127.0.0.1:10022" in slirp and "guestfwd=" in slirp
    assert option(argv, "-device")[:2] == [
        "virtio-net-pci,netdev=net0,mac=fa:16:3e:00:00:01",
        "virtio-net-pci,netdev=net1,mac=fa:16:3e:00:00:02",
    ]
    only_bridged = argv_of(guest(), relay, Forward("127.0.0.1", 10022), taps={0: 9})
    assert option(only_bridged, "-netdev") == ["tap,id=net0,fd=9"]


def test_guest_without_ports_still_has_a_nic() -> None:
    argv = argv_of(guest(ports=[]))
    assert option(argv, "-device")[0] == "virtio-net-pci,netdev=net0"


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        (
            "iso9660",
            ["file=/d/cd,,1.iso,format=raw,readonly=on,if=none,id=configdrive,media=cdrom"],
        ),
        ("vfat", ["file=/d/cd,,1.iso,format=raw,readonly=on,if=virtio"]),
    ],
)
def test_config_drive(fmt: str, expected: list[str]) -> None:
    argv = argv_of(
        guest(config_drive=True, config_drive_path="/d/cd,1.iso", config_drive_format=fmt)
    )
    assert option(argv, "-drive")[1:] == expected
    assert ("ide-cd,drive=configdrive" in option(argv, "-device")) == (fmt == "iso9660")


@pytest.mark.parametrize(
    ("bus", "devices"),
    [
        (None, ["ide-cd,drive=configdrive"]),
        ("sata", ["ide-cd,drive=configdrive"]),
        ("ide", ["ide-cd,drive=configdrive"]),
        ("scsi", ["virtio-scsi-pci,id=cdrom-scsi", "scsi-cd,bus=cdrom-scsi.0,drive=configdrive"]),
    ],
)
def test_iso_config_drive_on_the_images_cdrom_bus(bus: str | None, devices: list[str]) -> None:
    image = BootImage(path="/images/disk.raw", disk_format="raw", cdrom_bus=bus)
    argv = argv_of(guest(image=image, config_drive=True, config_drive_path="/d/cd.iso"))
    assert [d for d in option(argv, "-device") if "cd" in d or "scsi" in d] == devices


def test_an_unknown_cdrom_bus_is_refused() -> None:
    image = BootImage(path="/images/disk.raw", disk_format="raw", cdrom_bus="usb")
    with pytest.raises(DriverError, match="hw_cdrom_bus 'usb'"):
        argv_of(guest(image=image, config_drive=True, config_drive_path="/d/cd.iso"))
    # Without a drive to attach, the property does not matter.
    argv_of(guest(image=image))


def test_console_appends_and_control_files_are_relative() -> None:
    argv = argv_of(guest())
    assert "file,id=console,path=console.log,append=on" in option(argv, "-chardev")
    assert option(argv, "-serial") == ["chardev:console"]
    assert option(argv, "-qmp") == ["unix:qmp.sock,server=on,wait=off"]
    assert option(argv, "-pidfile") == ["qemu.pid"]


def test_every_guest_gets_the_guest_agent_channel_on_a_relative_socket() -> None:
    for spec in (guest(), guest(ports=[], config_drive=True, config_drive_path="/d/cd.iso")):
        argv = argv_of(spec)
        # The chardev's id ties the socket to the port qemu-guest-agent opens in the guest.
        assert "socket,id=qga0,path=qga.sock,server=on,wait=off" in option(argv, "-chardev")
        devices = option(argv, "-device")
        assert "virtio-serial-pci" in devices
        assert "virtserialport,chardev=qga0,name=org.qemu.guest_agent.0" in devices
    assert FILES.qga_socket == FILES.directory / "qga.sock"


def test_accelerators() -> None:
    assert Accel("kvm").argv() == ["-accel", "kvm", "-cpu", "host"]
    assert Accel("tcg").argv() == ["-accel", "tcg,thread=multi", "-cpu", "max"]
    # [qemu] cpu_model, when set, is the -cpu of either.
    assert Accel("tcg", "qemu64").argv() == ["-accel", "tcg,thread=multi", "-cpu", "qemu64"]
    assert Accel("kvm", "Haswell").argv() == ["-accel", "kvm", "-cpu", "Haswell"]


def test_an_image_without_a_file_is_refused() -> None:
    with pytest.raises(DriverError, match="no file on this host"):
        argv_of(guest(image=None))
