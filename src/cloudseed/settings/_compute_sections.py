"""The compute side's sections: ``[compute]`` (operations and the agent), ``[image_cache]`` (the
agent's copies of images), ``[keys]`` (how key changes reach running guests), and the drivers'
``[libvirt]`` (injection), ``[fake_driver]`` and ``[qemu]``."""

from __future__ import annotations

from dataclasses import dataclass

from cloudseed.settings._options import option, parse_port_range


@dataclass(frozen=True)
class ComputeSection:
    """``[compute]``: durable operations and the compute agent (cloudseed's own options)."""

    lease_seconds: int = option(
        20,
        "How long an agent's claim on an operation lasts without renewal. An agent that "
        "dies leaves its operations to the next agent of its host after this long, so every "
        "instance reaches a final state within about this time after a restart.",
        minimum=2,
    )
    poll_interval_ms: int = option(
        1000,
        "How often an idle agent looks for new operations when the database cannot push "
        "(PostgreSQL LISTEN/NOTIFY wakes it at once).",
        minimum=10,
    )
    vcpus: int = option(0, "vCPUs this host offers; 0: the machine's CPU count.", minimum=0)
    memory_mb: int = option(0, "RAM this host offers in MiB; 0: the machine's.", minimum=0)
    disk_gb: int = option(
        0, "Disk this host offers in GiB; 0: the free space under state_path.", minimum=0
    )
    # issue 32: consoles readable from every API node.
    console_tail_interval: int = option(
        5,
        "Seconds between a compute agent's looks at its guests' consoles: the end of each "
        "console that changed since (its last 100 KiB, compressed) is stored in the cell "
        "database, where os-getConsoleOutput reads it on any API node. A console is "
        "therefore at most this old there; 0: not stored (only the node running the "
        "instance's host answers).",
        minimum=0,
    )


@dataclass(frozen=True)
class ImageCacheSection:
    """``[image_cache]``: the compute agent's copies of the images its guests boot from, under
    ``<state_path>/<subdirectory_name>/`` (Nova's section and option names)."""

    subdirectory_name: str = option(
        "_base", "Directory under state_path where the agent keeps the images it fetched."
    )
    manager_interval: int = option(
        2400,
        "Seconds between the agent's passes over its image cache (removing the images no "
        "guest of the host uses); 0: at the agent's start only.",
        minimum=0,
    )
    remove_unused_base_images: bool = option(
        True, "Whether images no guest of this host uses are removed from the cache."
    )
    remove_unused_original_minimum_age_seconds: int = option(
        86400,
        "How long an image must have gone unused by the guests of this host before it is "
        "removed from the cache.",
        minimum=0,
    )


@dataclass(frozen=True)
class KeysSection:
    """``[keys]``: live keys (2.106), how key changes reach running guests (cloudseed's own
    section)."""

    login_user: str = option(
        "root",
        "The guest account whose authorized_keys the compute agent edits through "
        "qemu-guest-agent when a server's image has no os_admin_user property.",
    )
    login_check: bool = option(
        False,
        "Whether cloudseed's vendordata carries a cloud-config part that installs an sshd "
        "AuthorizedKeysCommand fetching the server's current keys from the metadata service "
        "at each login (and sets allow_public_ssh_keys: false), so key changes and expiry "
        "apply at the next login. Served by the metadata service only, never written to "
        "config drives (a guest without the metadata service would have no keys); "
        "docs/live-keys.md.",
    )


@dataclass(frozen=True)
class LibvirtSection:
    """``[libvirt]``: disk image injection (Nova's option names)."""

    inject_partition: int = option(
        -2,
        "Where to inject into the image: -2 never, -1 find the root filesystem by "
        "inspection, 0 the whole disk is the filesystem, N partition N.",
        minimum=-2,
    )
    inject_key: bool = option(False, "Inject the instance's key into /root/.ssh/authorized_keys.")
    inject_password: bool = option(False, "Inject the admin password into /etc/shadow.")
    inject_handlers: str = option(
        "guestfs,debugfs,loop,nbd",
        "Comma-separated image handlers tried in order: guestfs "
        "(libguestfs), debugfs (raw ext2/3/4, rootless), loop (raw, root), nbd (qcow2 and "
        "others, root). cloudseed's own option.",
    )


@dataclass(frozen=True)
class FakeDriverSection:
    """``[fake_driver]``: the in-memory driver (cloudseed's own section)."""

    delay_ms: int = option(
        0,
        "How long each fake operation takes, in milliseconds, so that BUILD, REBOOT and "
        "REBUILD can be observed.",
        minimum=0,
    )


@dataclass(frozen=True)
class QemuSection:
    """``[qemu]``: the qemu driver (cloudseed's own section; see docs/qemu-driver.md)."""

    binary: str = option("qemu-system-x86_64", "The QEMU system emulator to run guests with.")
    accel: str = option(
        "auto",
        "Accelerator: 'kvm', 'tcg' (software emulation), or 'auto': KVM when "
        "/dev/kvm is usable hardware virtualization (vmx or svm, and not a nested PVM "
        "host), otherwise TCG.",
        choices=("auto", "kvm", "tcg"),
    )
    # Nova's [libvirt] cpu_mode/cpu_models; a TCG guest's CPU model sets its boot time.
    cpu_model: str = option(
        "",
        "The guest CPU model (QEMU's -cpu). Empty: 'host' under KVM, 'max' under TCG (every "
        "feature TCG emulates, so x86-64-v2 guests such as RHEL 9 boot). Under TCG 'qemu64' "
        "boots a Debian 12 cloud image about 18 % faster (glibc then avoids the SSE4.2 and AVX "
        "string routines that are slow to emulate) but refuses guests built for x86-64-v2; "
        "Nova's libvirt driver gives TCG guests qemu64 by default.",
    )
    images_type: str = option(
        "qcow2",
        "Instance disks: 'qcow2' is a copy-on-write overlay of the image; 'raw' a "
        "full sparse copy, which the rootless debugfs injection handler can write into "
        "(Nova's [libvirt] images_type).",
        choices=("qcow2", "raw"),
    )
    kernel_cmdline: str = option(
        "root=/dev/vda rw console=ttyS0,115200",
        "Kernel command line for images that "
        "name a kernel (kernel_id) but no os_command_line property.",
    )
    metadata_url: str = option(
        "",
        "Where each guest's metadata proxy forwards to (http://host:port). Empty means "
        "this service's own metadata listener ([DEFAULT] metadata_listen and "
        "metadata_listen_port, a wildcard address meaning 127.0.0.1).",
    )
    shutdown_timeout: int = option(
        60,
        "Seconds a guest gets to power off after the ACPI power button (stop, soft "
        "reboot) before it is switched off (Nova's [DEFAULT] shutdown_timeout).",
        minimum=0,
    )
    start_timeout: int = option(
        30, "Seconds to wait for a QEMU process to come up before the operation fails.", minimum=1
    )
    # issue 17: key changes pushed through qemu-guest-agent.
    guest_agent_timeout: int = option(
        10,
        "Seconds the driver waits for a guest's qemu-guest-agent (its channel to accept, the "
        "sync handshake, each command of a key push) before the push counts as failed.",
        minimum=1,
    )
    # issue 13: a guest printing in a loop must not fill the host's disk.
    console_log_max_size: int = option(
        2 * 1024 * 1024,
        "Bytes a guest's console.log may reach before it is rotated once to console.log.0 "
        "(the previous one is dropped), as virtlogd's max_size and max_backups = 1 bound a "
        "Nova/libvirt guest's: about twice this on disk per guest. 0: never rotated.",
        minimum=0,
    )
    # issue 20: SSH into a guest on user-mode networking, opted in per server.
    ssh_forward_address: str = option(
        "127.0.0.1",
        "Host IPv4 address a guest's SSH forward listens on, for servers with the metadata "
        "item cloudseed:ssh_forward = true (a port of ssh_forward_ports leads to the guest's "
        "port 22). 127.0.0.1 keeps it to this host; 0.0.0.0 opens it to the network.",
    )
    ssh_forward_ports: str = option(
        "10022-10999",
        "Host ports (FIRST-LAST) SSH forwards are taken from: a guest keeps its port across "
        "reboots and stop/start while the port is free.",
    )

    @property
    def ssh_forward_port_range(self) -> range:
        first, last = parse_port_range(self.ssh_forward_ports)
        return range(first, last + 1)
