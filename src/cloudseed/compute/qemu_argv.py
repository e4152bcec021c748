"""The ``qemu-system-x86_64`` command line for one guest: plain values in, an argv list out; no
IO, so every choice here is testable without QEMU.

What the guest sees, and why:

- SMBIOS type 1 says ``OpenStack Nova`` with the instance uuid as serial and system uuid, as
  Nova's libvirt driver does: cloud-init's OpenStack detection (ds-identify, and the local
  datasource) requires that product name on x86, and compares its cached instance id with the
  system uuid on every boot. An image with ``cloudseed_bootstrap=nocloud`` is for guests that
  read only cloud-init's NoCloud datasource: their serial is ``ds=nocloud-net;s=<seed URL>``
  (what cloud-init, from 22.4 on, reads there as from the kernel command line) under a
  neutral manufacturer and product, since ``OpenStack Nova`` would make ds-identify pick the
  OpenStack datasource, and they get no config drive.
- One virtio NIC per port, with the port's MAC. A port on a ``slirp`` network is on QEMU's
  user-mode network moved to ``169.254.169.0/24``: libslirp only forwards guest addresses
  inside its own network, and there ``169.254.169.254:80`` is handed to a per-connection relay
  command (``guestfwd=...-cmd:``; the ``tcp:`` form connects once at start and carries a single
  connection). ``restrict=on`` keeps every other packet in the guest, so nothing reaches the
  host's own link-local metadata address or anything else. A server that opted in
  (``ssh_forward.py``) also gets ``hostfwd`` on its first such NIC: one host port leads to its
  port 22. A port on a ``bridge`` network is a tap the driver opened in the network's
  namespace (``bridge_networks.py``), handed to QEMU as a file descriptor (``taps``).
- The config drive is a read-only CD-ROM (ISO 9660) or disk (VFAT), as in Nova.
- The serial console is appended to ``console.log`` so the log spans reboots.
- A virtio-serial port named ``org.qemu.guest_agent.0``, the name qemu-guest-agent opens in
  the guest, leads to ``qga.sock`` in the instance directory (QEMU listens; the driver
  connects to push SSH keys, ``qemu_guest_agent.py``). Every guest gets it: a guest without
  the agent never opens its end, and pushes to it time out.
"""

from __future__ import annotations

import contextlib
import ipaddress
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cloudseed.compute import pci_slots
from cloudseed.compute.errors import DriverError
from cloudseed.compute.interfaces import NOCLOUD_BOOTSTRAP, GuestSpec
from cloudseed.compute.ssh_forward import Forward
from cloudseed.flavors.snapshots import FlavorSnapshot

GUEST_NET = "169.254.169.0/24"
GUEST_HOST = "169.254.169.2"  # slirp's gateway address
GUEST_DHCP_START = "169.254.169.15"
METADATA_ADDRESS = "169.254.169.254"
GUEST_AGENT_PORT = "org.qemu.guest_agent.0"  # what qemu-guest-agent opens by default
DEFAULT_MEMORY_MB = 512
DEFAULT_VCPUS = 1
GIB = 1 << 30
# What a NoCloud-booted guest's SMBIOS names: anything but OpenStack's product names.
NOCLOUD_MANUFACTURER = "cloudseed"
NOCLOUD_PRODUCT = "cloudseed NoCloud guest"


@dataclass(frozen=True)
class FlavorSizes:
    """What the driver applies of the flavor an instance keeps (``flavors.snapshots``): its
    memory, vCPUs and root disk; an instance without a recorded flavor gets the defaults.
    ``ephemeral`` and ``swap`` are not applied (no second disk, no swap disk)."""

    memory_mb: int
    vcpus: int
    disk_gb: int  # 0: the image's own size, as in Nova

    @classmethod
    def of(cls, flavor: FlavorSnapshot | None) -> FlavorSizes:
        if flavor is None:
            return cls(memory_mb=DEFAULT_MEMORY_MB, vcpus=DEFAULT_VCPUS, disk_gb=0)
        return cls(
            memory_mb=flavor.memory_mb if flavor.memory_mb > 0 else DEFAULT_MEMORY_MB,
            vcpus=flavor.vcpus if flavor.vcpus > 0 else DEFAULT_VCPUS,
            disk_gb=max(flavor.root_gb, 0),
        )

    def root_disk_size(self, virtual_size: int) -> int | None:
        """The size to grow a new root disk of ``virtual_size`` bytes to; None: keep it
        (disk 0, or an image already as large: the API refuses a flavor smaller than its
        image, and a disk is never shrunk)."""
        wanted = self.disk_gb * GIB
        return wanted if wanted > virtual_size else None


@dataclass(frozen=True)
class InstanceFiles:
    """Where one instance's files live; relative names, because QEMU runs in ``directory``
    (a UNIX socket path is limited to 108 bytes, and state paths can be long)."""

    directory: Path
    disk_name: str

    @property
    def disk(self) -> Path:
        return self.directory / self.disk_name

    @property
    def console_log(self) -> Path:
        return self.directory / "console.log"

    @property
    def pidfile(self) -> Path:
        return self.directory / "qemu.pid"

    @property
    def qmp_socket(self) -> Path:
        return self.directory / "qmp.sock"

    @property
    def qemu_log(self) -> Path:
        return self.directory / "qemu.log"

    @property
    def relay_config(self) -> Path:
        return self.directory / "metadata-relay.json"

    @property
    def ssh_forward(self) -> Path:
        return self.directory / "ssh-forward.json"

    @property
    def qga_socket(self) -> Path:
        return self.directory / "qga.sock"


@dataclass(frozen=True)
class Accel:
    """``-accel`` and ``-cpu`` for the chosen accelerator."""

    name: str  # "kvm" or "tcg"
    cpu_model: str = ""  # [qemu] cpu_model; empty: host under KVM, max under TCG

    def argv(self) -> list[str]:
        if self.name == "kvm":
            return ["-accel", "kvm", "-cpu", self.cpu_model or "host"]
        # max: every feature TCG can emulate; multi-threaded TCG uses each host core.
        return ["-accel", "tcg,thread=multi", "-cpu", self.cpu_model or "max"]


def opt_value(value: str) -> str:
    """A value inside a QEMU ``key=value,...`` option: commas are doubled."""
    return value.replace(",", ",,")


def build_argv(
    guest: GuestSpec,
    files: InstanceFiles,
    *,
    binary: str,
    accel: Accel,
    disk_format: str,
    relay_command: list[str] | None,
    default_cmdline: str,
    ssh_forward: Forward | None = None,
    taps: Mapping[int, int] | None = None,
) -> list[str]:
    """The full command line; ``relay_command`` is what slirp runs for each connection the
    guest opens to the metadata address (None: no metadata service for this guest);
    ``ssh_forward`` the host port that leads to the guest's port 22 (None: none); ``taps``
    the tap descriptor QEMU inherits for each bridged port, by the port's index."""
    image = guest.image
    if image is None:
        raise DriverError(f"Image {guest.image_ref} has no file on this host.")
    sizes = FlavorSizes.of(guest.flavor)
    nocloud = _bootstrap(image.bootstrap) == NOCLOUD_BOOTSTRAP
    argv = [
        binary,
        "-name",
        f"guest={opt_value(guest.uuid)}",
        *accel.argv(),
        "-machine",
        "q35",
        "-m",
        str(sizes.memory_mb),
        "-smp",
        str(sizes.vcpus),
        "-nodefaults",
        "-display",
        "none",
        "-vga",
        "none",
        "-smbios",
        _smbios_system(guest, nocloud),
        "-uuid",
        guest.uuid,
    ]
    if image.kernel_path:
        argv += ["-kernel", image.kernel_path, "-append", image.cmdline or default_cmdline]
        if image.ramdisk_path:
            argv += ["-initrd", image.ramdisk_path]
    argv += [
        "-drive",
        f"file={opt_value(files.disk_name)},if=virtio,format={disk_format},"
        "cache=writeback,discard=unmap",
    ]
    if guest.config_drive_path and not nocloud:
        drive = f"file={opt_value(guest.config_drive_path)},format=raw,readonly=on"
        if guest.config_drive_format == "vfat":
            argv += ["-drive", f"{drive},if=virtio"]
        else:
            argv += [
                "-drive",
                f"{drive},if=none,id=configdrive,media=cdrom",
                *_cdrom_device(image.cdrom_bus, "configdrive"),
            ]
    argv += _network(guest, relay_command, ssh_forward, taps or {})
    argv += [
        "-chardev",
        f"socket,id=qga0,path={files.qga_socket.name},server=on,wait=off",
        "-device",
        "virtio-serial-pci",
        "-device",
        f"virtserialport,chardev=qga0,name={GUEST_AGENT_PORT}",
        "-device",
        "virtio-rng-pci",
        "-chardev",
        f"file,id=console,path={files.console_log.name},append=on",
        "-serial",
        "chardev:console",
        "-qmp",
        f"unix:{files.qmp_socket.name},server=on,wait=off",
        "-pidfile",
        files.pidfile.name,
    ]
    return argv


def _bootstrap(value: str | None) -> str | None:
    if value in (None, NOCLOUD_BOOTSTRAP):
        return value
    raise DriverError(
        f"cloudseed_bootstrap {value!r} is not supported by the qemu driver (nocloud, or unset)."
    )


def seed_serial(url: str) -> str:
    """The SMBIOS system serial that points cloud-init at a NoCloud seed URL. ``nocloud-net``:
    cloud-init 22.4 (Debian 12) takes an http seed only under that name; 24.1 and later take
    it too."""
    return f"ds=nocloud-net;s={url}"


def _smbios_system(guest: GuestSpec, nocloud: bool) -> str:
    """SMBIOS type 1: Nova's, or for a NoCloud guest a neutral one with the seed as serial
    (the uuid alone when the server has no seed: revoked, so cloud-init finds none)."""
    if not nocloud:
        return (
            "type=1,manufacturer=OpenStack Foundation,product=OpenStack Nova,"
            f"serial={guest.uuid},uuid={guest.uuid}"
        )
    url = guest.nocloud_seed_url
    serial = seed_serial(url) if url else guest.uuid
    return (
        f"type=1,manufacturer={NOCLOUD_MANUFACTURER},product={opt_value(NOCLOUD_PRODUCT)},"
        f"serial={opt_value(serial)},uuid={guest.uuid}"
    )


def _cdrom_device(bus: str | None, drive: str) -> list[str]:
    """The CD-ROM's controller and device, after the image's ``hw_cdrom_bus`` as in Nova.

    ``ide-cd`` lands on q35's built-in AHCI controller: Nova's default for q35 (sata), and
    what Windows and generic kernels read. ``scsi`` is a CD-ROM on virtio-scsi, for guests
    without AHCI: Debian's cloud kernel (the e2e image's) has virtio-scsi but no AHCI driver,
    so an ide-cd drive is invisible to it."""
    if bus in (None, "ide", "sata"):
        return ["-device", f"ide-cd,drive={drive}"]
    if bus == "scsi":
        return [
            "-device",
            "virtio-scsi-pci,id=cdrom-scsi",
            "-device",
            f"scsi-cd,bus=cdrom-scsi.0,drive={drive}",
        ]
    raise DriverError(
        f"hw_cdrom_bus {bus!r} is not supported by the qemu driver (ide, sata or scsi)."
    )


def _network(
    guest: GuestSpec,
    relay_command: list[str] | None,
    ssh_forward: Forward | None,
    taps: Mapping[int, int],
) -> list[str]:
    ports = guest.ports or [{}]  # a guest without ports still gets a NIC for the metadata
    argv: list[str] = []
    first_slirp = next((i for i in range(len(ports)) if i not in taps), None)
    for index, port in enumerate(ports):
        if index in taps:
            argv += ["-netdev", f"tap,id=net{index},fd={taps[index]}"]
            argv += ["-device", _nic(index, port)]
            continue
        netdev = (
            f"user,id=net{index},net={GUEST_NET},host={GUEST_HOST},"
            f"dhcpstart={GUEST_DHCP_START},restrict=on"
        )
        if index == first_slirp and ssh_forward is not None:
            netdev += f",hostfwd={ssh_forward.hostfwd(_slirp_address(port))}"
        if index == first_slirp and relay_command is not None:
            # slirp splits the command with shell rules (no shell runs it).
            command = " ".join(shlex.quote(part) for part in relay_command)
            netdev += f",guestfwd=tcp:{METADATA_ADDRESS}:80-cmd:{opt_value(command)}"
        argv += ["-netdev", netdev, "-device", _nic(index, port)]
    return argv


def _nic(index: int, port: Mapping[str, object]) -> str:
    """The port's NIC; a tagged port's at its fixed PCI slot (pci_slots.py), which its guest
    reads in meta_data.json's ``devices``."""
    device = f"virtio-net-pci,netdev=net{index}"
    mac = port.get("mac_address")
    if isinstance(mac, str) and mac:
        device += f",mac={mac}"
    slot = pci_slots.tagged_nic_slot(index) if port.get("tag") else None
    if slot is not None:
        device += f",addr=0x{slot:02x}"
    return device


def _slirp_address(port: Mapping[str, object]) -> str:
    """The port's IPv4 address inside slirp's subnet, where the guest answers once cloud-init
    has configured it (a second guest's address is not slirp's first DHCP lease); empty when it
    has none there."""
    subnet = ipaddress.ip_network(GUEST_NET)
    addresses = port.get("fixed_ips")
    for address in addresses if isinstance(addresses, list) else []:
        with contextlib.suppress(ValueError):
            if ipaddress.ip_address(str(address)) in subnet:
                return str(address)
    return ""
