"""Any qemu format, any filesystem the appliance knows, OS inspection: libguestfs.

libguestfs boots a small appliance VM that opens the image; nothing is mounted on the host, so
the host is never reachable through a guest symlink (``writer.py`` still refuses them, so that
a link cannot redirect a write elsewhere inside the guest either). KVM can be present but
unusable (nested virtualization), in which case qemu aborts at start; the launch is then
retried once with TCG (software emulation), which is slow but works. Where ``kvm_usable`` says
no (programs/kvm.py), the launch uses TCG from the start.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from cloudseed.injection.errors import BindingMissing, HandlerUnavailable, ImageToolFailed
from cloudseed.injection.guest import GuestStat, kind_of_mode
from cloudseed.injection.handlers.guestfs_binding import guestfs_module
from cloudseed.injection.handlers.protocol import ImageTarget
from cloudseed.programs.kvm import kvm_usable

MISSING = ("No such file or directory", "Not a directory")


class GuestfsFilesystem:
    def __init__(self, handle: Any) -> None:
        self.g = handle

    def lstat(self, path: str) -> GuestStat | None:
        try:
            st = self.g.lstatns(path)
        except RuntimeError as exc:
            # The Python binding has no last_errno; the daemon's message ends with strerror.
            if str(exc).endswith(MISSING):
                return None
            raise
        return GuestStat(
            kind=kind_of_mode(st["st_mode"]),
            mode=st["st_mode"] & 0o7777,
            uid=st["st_uid"],
            gid=st["st_gid"],
        )

    def readlink(self, path: str) -> str:
        return str(self.g.readlink(path))

    def read(self, path: str) -> bytes:
        return bytes(self.g.read_file(path))

    def write(self, path: str, data: bytes) -> None:
        # Truncates and rewrites the same inode: mode, owner and labels stay.
        self.g.write(path, data)

    def mkdir(self, path: str) -> None:
        self.g.mkdir(path)

    def chmod(self, path: str, mode: int) -> None:
        self.g.chmod(mode, path)

    def chown(self, path: str, uid: int, gid: int) -> None:
        self.g.lchown(uid, gid, path)


def _launch(module: Any, target: ImageTarget) -> Any:
    failures = []
    # Straight to TCG where KVM is known to be unusable: a nested PVM host's /dev/kvm starts
    # the appliance, which then runs about a thousand times slower than under TCG (a launch
    # that never ends), instead of failing so that the retry below could happen.
    attempts: list[list[str]] = [["force_tcg"]] if not kvm_usable() else [[], ["force_tcg"]]
    for settings in attempts:
        handle = module.GuestFS(python_return_dict=True)
        if settings:
            handle.set_backend_settings(settings)
        handle.add_drive_opts(str(target.path), format=target.fmt, readonly=False)
        try:
            handle.launch()
            return handle
        except RuntimeError as exc:
            failures.append(str(exc).strip())
            handle.close()
    raise HandlerUnavailable(
        "the libguestfs appliance cannot start here ("
        + "; with TCG: ".join(failures)
        + "); libguestfs-test-tool tells why"
    )


def _mount(g: Any, target: ImageTarget) -> None:
    if target.partition < 0:
        roots = g.inspect_os()
        if len(roots) != 1:
            raise HandlerUnavailable(
                f"inspection found {len(roots)} operating systems, need exactly one"
            )
        mountpoints = g.inspect_get_mountpoints(roots[0])
        # Parents before children: "/" first, then "/boot", "/boot/efi"…
        for mountpoint in sorted(mountpoints, key=len):
            g.mount(mountpoints[mountpoint], mountpoint)
        return
    disk = g.list_devices()[0]
    device = disk if target.partition == 0 else f"{disk}{target.partition}"
    if target.partition and device not in g.list_partitions():
        raise HandlerUnavailable(f"the image has no partition {target.partition}")
    try:
        g.mount(device, "/")
    except RuntimeError as exc:
        raise HandlerUnavailable(f"cannot mount {device}: {exc}") from None


@contextmanager
def open_guest(target: ImageTarget) -> Iterator[GuestfsFilesystem]:
    try:
        module = guestfs_module()
    except BindingMissing as exc:
        raise HandlerUnavailable(str(exc)) from None
    g = _launch(module, target)
    try:
        _mount(g, target)
        yield GuestfsFilesystem(g)
        # Flush and stop the appliance; a failure here means the image may not have it all.
        g.umount_all()
        g.shutdown()
    except RuntimeError as exc:
        raise ImageToolFailed(tool="libguestfs", detail=str(exc).strip()) from None
    finally:
        g.close()
