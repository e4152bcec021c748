"""Image handlers by name, as ``[libvirt] inject_handlers`` lists them.

    guestfs  libguestfs appliance: any format, OS inspection          (guestfs.py)
    debugfs  e2fsprogs on raw ext2/3/4, no root                        (debugfs.py)
    loop     loop device + host mount, raw only, root                  (loop.py)
    nbd      qemu-nbd + host mount, any format, root + nbd module      (nbd.py)

Each module's ``open_guest`` follows ``protocol.py``.
"""

from __future__ import annotations

from cloudseed.injection.handlers import debugfs, guestfs, loop, nbd
from cloudseed.injection.handlers.protocol import ImageTarget, OpenGuest

HANDLERS: dict[str, OpenGuest] = {
    "guestfs": guestfs.open_guest,
    "debugfs": debugfs.open_guest,
    "loop": loop.open_guest,
    "nbd": nbd.open_guest,
}

__all__ = ["HANDLERS", "ImageTarget", "OpenGuest"]
