"""Whether this machine's KVM is worth using: QEMU guests (compute/) and the libguestfs
appliance (injection/) both ask before they start one."""

from __future__ import annotations

import os
from pathlib import Path


def kvm_usable() -> bool:
    """Whether /dev/kvm is hardware virtualization that boots a stock kernel.

    A nested PVM host (``kvm_pvm``, as in some sandboxes) offers /dev/kvm without vmx or svm;
    QEMU then starts only with masked CPU features and a stock kernel runs about a thousand
    times slower than under TCG, so that counts as unusable.
    """
    if not os.access("/dev/kvm", os.R_OK | os.W_OK) or Path("/sys/module/kvm_pvm").exists():
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " vmx" in flags or " svm" in flags


__all__ = ["kvm_usable"]
