"""What injection writes into a guest, in Nova's order, through any ``GuestFilesystem``.

Items, in order: key, network, metadata, admin password, files; then, on an SELinux guest, one
rc.local line that relabels what was written. The only IO is through the filesystem given, so
the unit tests run this against an in-memory guest. The password arrives already hashed.

Symlinks: every path is checked component by component with ``lstat`` before it is used, and
a symlink anywhere on the way is refused (``GuestRefused``), so a guest ``/root/.ssh -> /etc``
cannot redirect the key. The one exception is rc.local, which distributions ship as a link
(``/etc/rc.local -> rc.d/rc.local``): it is resolved here, inside the guest's root, the way a
chroot would, and the result is checked like any other path.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field

from cloudseed.injection import guestfiles
from cloudseed.injection.errors import GuestRefused
from cloudseed.injection.guest import GuestFilesystem, GuestStat
from cloudseed.injection.request import InjectionRequest

SSH_DIR = "/root/.ssh"
AUTHORIZED_KEYS = "/root/.ssh/authorized_keys"
INTERFACES = "/etc/network/interfaces"
META_JS = "/meta.js"
# Nova's modes: 0700 for the key directory, 0600 for the key file, 0744 for directories made
# for network and personality files, 0700 for rc.local; other new files get 0644.
SSH_DIR_MODE = 0o700
KEY_FILE_MODE = 0o600
MADE_DIR_MODE = 0o744
NEW_FILE_MODE = 0o644
RC_LOCAL_MODE = 0o700
MAX_LINKS = 40


def _decode(data: bytes) -> str:
    # surrogateescape: bytes that are not UTF-8 come back out exactly as they went in.
    return data.decode("utf-8", "surrogateescape")


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


@dataclass
class _Session:
    fs: GuestFilesystem
    uid: int = 0
    gid: int = 0
    written: list[str] = field(default_factory=list)

    # -- paths -------------------------------------------------------------------------------

    def check(self, path: str) -> GuestStat | None:
        """The entry at ``path``, after making sure no component on the way is a symlink and
        every ancestor is a directory; None when it (or an ancestor) does not exist."""
        parts = path.strip("/").split("/")
        for depth in range(1, len(parts) + 1):
            prefix = "/" + "/".join(parts[:depth])
            st = self.fs.lstat(prefix)
            if st is None:
                return None
            if st.kind == "symlink":
                raise GuestRefused(
                    guest_path=path,
                    detail=f"{prefix} is a symlink; cloudseed "
                    "does not follow symlinks in the guest",
                )
            if depth < len(parts) and st.kind != "dir":
                raise GuestRefused(guest_path=path, detail=f"{prefix} is not a directory")
            if depth == len(parts):
                return st
        return None

    def ensure_dir(self, path: str, mode: int) -> None:
        """Make ``path`` and missing ancestors; new ones are root's with ``mode``."""
        parts = path.strip("/").split("/")
        for depth in range(1, len(parts) + 1):
            prefix = "/" + "/".join(parts[:depth])
            st = self.check(prefix)
            if st is None:
                self.fs.mkdir(prefix)
                self.fs.chown(prefix, self.uid, self.gid)
                self.fs.chmod(prefix, mode)
                self.written.append(prefix)
            elif st.kind != "dir":
                raise GuestRefused(guest_path=path, detail=f"{prefix} is not a directory")

    def read_text(self, path: str) -> str | None:
        st = self.check(path)
        if st is None:
            return None
        if st.kind != "file":
            raise GuestRefused(guest_path=path, detail="it is not a regular file")
        return _decode(self.fs.read(path))

    def replace(self, path: str, data: bytes, *, new_mode: int) -> None:
        """Write a whole file; an existing file keeps its mode and owner, a new one is root's
        with ``new_mode``."""
        st = self.check(path)
        if st is not None and st.kind != "file":
            raise GuestRefused(guest_path=path, detail="it is not a regular file")
        self.fs.write(path, data)
        if st is None:
            self.fs.chown(path, self.uid, self.gid)
            self.fs.chmod(path, new_mode)
        self.written.append(path)

    def resolve_links(self, path: str) -> str:
        """``path`` with symlinks resolved inside the guest root (absolute targets and ``..``
        never leave it)."""
        pending = [p for p in path.strip("/").split("/") if p]
        resolved: list[str] = []
        links = 0
        while pending:
            name = pending.pop(0)
            if name in ("", "."):
                continue
            if name == "..":
                if resolved:
                    resolved.pop()
                continue
            candidate = "/" + "/".join([*resolved, name])
            st = self.fs.lstat(candidate)
            if st is not None and st.kind == "symlink":
                links += 1
                if links > MAX_LINKS:
                    raise GuestRefused(guest_path=path, detail="too many levels of symlinks")
                target = self.fs.readlink(candidate)
                if target.startswith("/"):
                    resolved = []
                pending[:0] = target.split("/")
                continue
            resolved.append(name)
        if not resolved:
            raise GuestRefused(guest_path=path, detail="it resolves to the root directory")
        return "/" + "/".join(resolved)

    # -- items -------------------------------------------------------------------------------

    def root_owner(self) -> None:
        """root's uid and gid from the guest's own tables (Nova asks augeas); 0 without them."""
        passwd = self.read_text("/etc/passwd")
        group = self.read_text("/etc/group")
        uid = guestfiles.account_id(passwd, "root") if passwd is not None else None
        gid = guestfiles.account_id(group, "root") if group is not None else None
        self.uid = 0 if uid is None else uid
        self.gid = 0 if gid is None else gid

    def key(self, key: str) -> None:
        # /root itself is made 0700 if missing: it is root's home, not a shared directory.
        self.ensure_dir("/root", SSH_DIR_MODE)
        self.ensure_dir(SSH_DIR, SSH_DIR_MODE)
        # As Nova: the directory is root's and 0700 even if it existed with other settings.
        self.fs.chown(SSH_DIR, self.uid, self.gid)
        self.fs.chmod(SSH_DIR, SSH_DIR_MODE)
        current = self.read_text(AUTHORIZED_KEYS) or ""
        self.replace(
            AUTHORIZED_KEYS,
            _encode(guestfiles.with_key_appended(current, key)),
            new_mode=KEY_FILE_MODE,
        )
        self.fs.chown(AUTHORIZED_KEYS, self.uid, self.gid)
        self.fs.chmod(AUTHORIZED_KEYS, KEY_FILE_MODE)

    def network(self, text: str) -> None:
        self.ensure_dir(posixpath.dirname(INTERFACES), MADE_DIR_MODE)
        self.replace(INTERFACES, _encode(text), new_mode=NEW_FILE_MODE)

    def metadata(self, metadata: dict[str, str]) -> None:
        self.replace(META_JS, _encode(json.dumps(metadata)), new_mode=NEW_FILE_MODE)

    def password(self, password_hash: str) -> None:
        passwd = self.read_text("/etc/passwd")
        shadow = self.read_text("/etc/shadow")
        if passwd is None or shadow is None:
            raise GuestRefused(
                guest_path="/etc/shadow", detail="the guest has no /etc/passwd or /etc/shadow"
            )
        if not guestfiles.has_account(passwd, "root"):
            raise GuestRefused(guest_path="/etc/shadow", detail="no root user in /etc/passwd")
        try:
            updated = guestfiles.with_root_password(shadow, password_hash)
        except LookupError:
            raise GuestRefused(
                guest_path="/etc/shadow", detail="no root user in /etc/shadow"
            ) from None
        self.replace("/etc/shadow", _encode(updated), new_mode=0o600)

    def file(self, path: str, data: bytes) -> None:
        self.ensure_dir(posixpath.dirname(path), MADE_DIR_MODE)
        self.replace(path, data, new_mode=NEW_FILE_MODE)

    def relabel_hook(self) -> None:
        """On an SELinux guest, restore the labels of everything written, at next boot."""
        selinux = self.check("/etc/selinux")
        if selinux is None or selinux.kind != "dir" or not self.written:
            return
        # Nova's choice: /etc/rc.local, or /etc/rc.d/rc.local when only /etc/rc.d exists.
        target = self.resolve_links("/etc/rc.local")
        if self.fs.lstat(target) is None:
            rc_d = self.resolve_links("/etc/rc.d")
            rc_d_stat = self.fs.lstat(rc_d)
            if rc_d_stat is not None and rc_d_stat.kind == "dir":
                target = rc_d + "/rc.local"
        targets = [SSH_DIR if p.startswith(SSH_DIR + "/") else p for p in self.written]
        text = guestfiles.with_relabel_hook(self.read_text(target), targets)
        self.replace(target, _encode(text), new_mode=RC_LOCAL_MODE)
        self.fs.chmod(target, RC_LOCAL_MODE)


def write_request(
    fs: GuestFilesystem, request: InjectionRequest, *, password_hash: str | None
) -> tuple[str, ...]:
    """Write every item of the request, the admin password as ``password_hash`` (a crypt
    string; the request's clear text is not used here). Returns the guest paths written."""
    session = _Session(fs)
    session.root_owner()
    if request.key_data:
        session.key(request.key_data)
    if request.network_config:
        session.network(request.network_config)
    if request.metadata:
        session.metadata(dict(request.metadata))
    if password_hash is not None:
        session.password(password_hash)
    for path, data in request.files:
        session.file(path, data)
    session.relabel_hook()
    return tuple(dict.fromkeys(session.written))
