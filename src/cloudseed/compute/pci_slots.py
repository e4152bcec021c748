"""Where the qemu driver puts a server's tagged NICs on the guest's PCI bus. IO-free.

meta_data.json's ``devices`` (Nova's device role tagging, 2.32/2.42) tells the guest the bus
address of each tagged NIC, so the address must be known without asking QEMU, and be the same
at every boot. QEMU's own assignment is not a rule to rely on: it gives the lowest free slot
in the order it creates devices, which is not the command line's (``-drive if=virtio`` disks
come after every ``-device``). So the driver pins a tagged port to slot ``0x10 + its index``
among the server's ports on q35's root bus (``addr=`` of its ``virtio-net-pci`` device), and
the metadata service reports the same address. The fake driver has no bus: its guests are
told the address the qemu driver would give.

Untagged NICs and every other device keep QEMU's assignment (the low slots), so servers
without tags keep the slots, and with them interface names such as ``enp0s1``, that they
always had. q35's slot 0x1f is its ICH9 (LPC, SATA, SMBus): a tagged port from the 16th on
gets no fixed slot, and the guest is told no address (bus ``none``, as Nova for a device
it cannot place).
"""

from __future__ import annotations

FIRST_SLOT = 0x10
LAST_SLOT = 0x1E


def tagged_nic_slot(index: int) -> int | None:
    """The fixed PCI slot of the server's ``index``-th port (0-based) when it is tagged; None
    past the slots there are."""
    slot = FIRST_SLOT + index
    return slot if index >= 0 and slot <= LAST_SLOT else None


def pci_address(slot: int) -> str:
    """The slot's address as Nova writes it (libvirt's domain:bus:slot.function)."""
    return f"0000:00:{slot:02x}.0"
