"""Injection into real images, read back with independent tools.

Images are built here (``mke2fs -d``, ``sfdisk`` + ``dd``, ``qemu-img convert``), injected through
the service or the CLI, and checked with ``debugfs -R cat/stat`` and ``e2fsck`` (and
``guestfish --ro`` when ``CLOUDSEED_TEST_SLOW_GUESTFS=1``, because each libguestfs appliance
boot, and OS inspection, cost 15-30 s without KVM). A test that needs a missing tool or
privilege is skipped with the reason; the libguestfs tests skip when the appliance cannot start
on this machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from cloudseed.cli import cli
from cloudseed.injection import (
    GuestRefused,
    ImageFormatMismatch,
    InjectionDisabled,
    InjectionOptions,
    InjectionRequest,
    NoHandlerAvailable,
    UnsafeImage,
    inject,
)
from cloudseed.injection.handlers.localfs import LocalFilesystem
from cloudseed.injection.writer import write_request
from tests.support.guest_images import ext4_image, guest_tree, run

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTestsOnly tester@example"
PASSWORD = "correct horse battery staple"
SECTOR = 512
PARTITION_START = 2048  # sectors: 1 MiB, as fdisk aligns


def needs(*tools: str) -> pytest.MarkDecorator:
    missing = [t for t in tools if shutil.which(t, path="/usr/sbin:/usr/bin:/sbin:/bin") is None]
    return pytest.mark.skipif(
        bool(missing),
        reason=f"needs {', '.join(missing)} (Debian: e2fsprogs, fdisk, qemu-utils, openssl)",
    )


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- building images -------------------------------------------------------------------------


def partitioned_image(tree: Path, image: Path) -> Path:
    """A raw disk with an MBR and one Linux partition at 1 MiB holding an ext4 filesystem."""
    fs = ext4_image(tree, image.with_suffix(".fs"))
    with image.open("wb") as fh:
        fh.truncate(PARTITION_START * SECTOR + fs.stat().st_size + 1024 * 1024)
    run(
        "sfdisk", "-q", str(image), input=f"label: dos\nstart={PARTITION_START}, type=83\n".encode()
    )
    run(
        "dd",
        f"if={fs}",
        f"of={image}",
        f"bs={SECTOR}",
        f"seek={PARTITION_START}",
        "conv=notrunc,sparse",
        "status=none",
    )
    fs.unlink()
    return image


# -- reading back with debugfs ---------------------------------------------------------------


def device(image: Path, partition: int = 0) -> str:
    return f"{image}?offset={PARTITION_START * SECTOR}" if partition else str(image)


def guest_cat(image: Path, path: str, partition: int = 0) -> bytes:
    return run("debugfs", "-R", f"cat {path}", device(image, partition))


def guest_stat(image: Path, path: str, partition: int = 0) -> tuple[str, int, int, int]:
    text = run("debugfs", "-R", f"stat {path}", device(image, partition)).decode()
    kind = re.search(r"Type: (\w+)", text)
    mode = re.search(r"Mode:\s+([0-7]+)", text)
    owner = re.search(r"User:\s+(\d+)\s+Group:\s+(\d+)", text)
    assert kind and mode and owner, f"{path} not found: {text!r}"
    return kind.group(1), int(mode.group(1), 8), int(owner.group(1)), int(owner.group(2))


def fsck_clean(image: Path) -> None:
    subprocess.run(["e2fsck", "-fn", str(image)], check=True, capture_output=True)


def assert_full_injection(image: Path, partition: int = 0) -> None:
    keys = guest_cat(image, "/root/.ssh/authorized_keys", partition).decode()
    assert keys == f"\n# The following ssh key was injected by cloudseed\n{KEY}\n"
    assert guest_stat(image, "/root/.ssh", partition) == ("directory", 0o700, 0, 0)
    assert guest_stat(image, "/root/.ssh/authorized_keys", partition) == ("regular", 0o600, 0, 0)
    shadow = guest_cat(image, "/etc/shadow", partition).decode().splitlines()
    root_hash = shadow[0].split(":")[1]
    assert shadow[0] == f"root:{root_hash}:19000:0:99999:7:::"
    assert shadow[1] == "daemon:*:19000:0:99999:7:::"
    # openssl recomputes the hash from the salt: the password really is the one we gave.
    salt = root_hash.split("$")[2]
    assert root_hash.startswith("$6$")
    assert (
        run("openssl", "passwd", "-6", "-salt", salt, "-stdin", input=PASSWORD.encode() + b"\n")
        .decode()
        .strip()
        == root_hash
    )
    assert guest_stat(image, "/etc/shadow", partition)[1] == 0o640  # kept
    assert json.loads(guest_cat(image, "/meta.js", partition)) == {"role": "web"}
    assert guest_cat(image, "/etc/network/interfaces", partition) == b"auto lo\n"
    assert guest_cat(image, "/opt/app/settings.conf", partition) == b"x = 1\n"
    assert guest_stat(image, "/opt/app", partition) == ("directory", 0o744, 0, 0)


FULL_REQUEST = InjectionRequest(
    key_data=KEY,
    admin_password=PASSWORD,
    metadata={"role": "web"},
    network_config="auto lo\n",
    files=(("/opt/app/settings.conf", b"x = 1\n"),),
)


def options(*handlers: str, partition: int = 0) -> InjectionOptions:
    return InjectionOptions(
        partition=partition, inject_key=True, inject_password=True, handlers=handlers
    )


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".inject"))


# -- debugfs: rootless, raw ext2/3/4 ----------------------------------------------------------


@needs("mke2fs", "debugfs", "e2fsck", "qemu-img", "openssl", "prlimit")
class TestDebugfs:
    def test_whole_disk(self, tmp_path):
        image = ext4_image(guest_tree(tmp_path / "tree"), tmp_path / "disk.raw")
        report = inject(image, "raw", FULL_REQUEST, options=options("nbd", "debugfs"))
        assert report.handler == "debugfs"
        assert report.unavailable[0][0] == "nbd"
        assert_full_injection(image)
        fsck_clean(image)
        assert leftovers(tmp_path) == []

    def test_replaced_file_keeps_mode_and_owner(self, tmp_path):
        tree = guest_tree(tmp_path / "tree")
        motd = tree / "etc" / "motd"
        motd.write_text("old\n")
        motd.chmod(0o604)
        owner = (1, 42) if os.geteuid() == 0 else (os.getuid(), os.getgid())
        if os.geteuid() == 0:
            os.chown(motd, *owner)
        image = ext4_image(tree, tmp_path / "disk.raw")
        inject(
            image,
            "raw",
            InjectionRequest(files=(("/etc/motd", b"new\n"),)),
            options=options("debugfs"),
        )
        assert guest_cat(image, "/etc/motd") == b"new\n"
        assert guest_stat(image, "/etc/motd") == ("regular", 0o604, *owner)
        fsck_clean(image)

    @needs("sfdisk", "dd")
    def test_partition(self, tmp_path):
        image = partitioned_image(guest_tree(tmp_path / "tree"), tmp_path / "disk.raw")
        table = run("sfdisk", "--json", str(image))
        inject(image, "raw", FULL_REQUEST, options=options("debugfs", partition=1))
        assert_full_injection(image, partition=1)
        assert run("sfdisk", "--json", str(image)) == table

    def test_selinux_hook_through_rhel_link(self, tmp_path):
        image = ext4_image(guest_tree(tmp_path / "tree", selinux=True), tmp_path / "disk.raw")
        inject(image, "raw", InjectionRequest(key_data=KEY), options=options("debugfs"))
        assert guest_stat(image, "/etc/rc.local")[0] == "symlink"
        rc = guest_cat(image, "/etc/rc.d/rc.local").decode()
        assert rc.startswith("#!/bin/bash\ntouch /var/lock/subsys/local\n")
        assert rc.endswith("restorecon -RF /root/.ssh 2>/dev/null || :\n")
        assert guest_stat(image, "/etc/rc.d/rc.local")[1] == 0o700

    @pytest.mark.parametrize("target", ["/etc", "../etc"])
    def test_symlink_escape_refused_and_original_untouched(self, tmp_path, target):
        tree = guest_tree(tmp_path / "tree")
        (tree / "root" / ".ssh").symlink_to(target)
        image = ext4_image(tree, tmp_path / "disk.raw")
        before = sha256(image)
        with pytest.raises(GuestRefused, match=r"/root/\.ssh is a symlink"):
            inject(image, "raw", InjectionRequest(key_data=KEY), options=options("debugfs"))
        assert sha256(image) == before
        assert leftovers(tmp_path) == []

    def test_failure_half_way_leaves_original_byte_identical(self, tmp_path):
        tree = guest_tree(tmp_path / "tree")
        (tree / "etc" / "shadow").unlink()
        image = ext4_image(tree, tmp_path / "disk.raw")
        before = sha256(image)
        # The key goes in first (into the working copy); then the password cannot.
        with pytest.raises(GuestRefused, match="no /etc/passwd or /etc/shadow"):
            inject(
                image,
                "raw",
                InjectionRequest(key_data=KEY, admin_password="pw"),
                options=options("debugfs"),
            )
        assert sha256(image) == before
        assert leftovers(tmp_path) == []


# -- refusals before any handler runs ---------------------------------------------------------


@needs("mke2fs", "qemu-img", "prlimit")
class TestRefusals:
    def test_qcow2_declared_raw(self, tmp_path):
        raw = ext4_image(guest_tree(tmp_path / "tree"), tmp_path / "disk.raw")
        qcow2 = tmp_path / "disk.qcow2"
        run("qemu-img", "convert", "-f", "raw", "-O", "qcow2", str(raw), str(qcow2))
        # qemu-img itself accepts the lie: with -f raw it reports "raw"…
        assert (
            json.loads(run("qemu-img", "info", "--output=json", "-f", "raw", str(qcow2)))["format"]
            == "raw"
        )
        # …so the header is checked too.
        before = sha256(qcow2)
        with pytest.raises(ImageFormatMismatch, match="its header is a qcow2 header"):
            inject(qcow2, "raw", InjectionRequest(key_data=KEY), options=options("debugfs"))
        assert sha256(qcow2) == before

    def test_raw_declared_qcow2(self, tmp_path):
        raw = ext4_image(guest_tree(tmp_path / "tree"), tmp_path / "disk.raw")
        with pytest.raises(ImageFormatMismatch, match="not in qcow2 format"):
            inject(raw, "qcow2", InjectionRequest(key_data=KEY), options=options("guestfs"))

    def test_backing_file_refused(self, tmp_path):
        base = ext4_image(guest_tree(tmp_path / "tree"), tmp_path / "base.raw")
        overlay = tmp_path / "overlay.qcow2"
        run("qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", str(base), str(overlay))
        with pytest.raises(UnsafeImage, match="backing file"):
            inject(overlay, "qcow2", InjectionRequest(key_data=KEY), options=options("nbd"))

    def test_no_handler_lists_every_reason(self, tmp_path):
        raw = ext4_image(guest_tree(tmp_path / "tree"), tmp_path / "disk.raw")
        qcow2 = tmp_path / "disk.qcow2"
        run("qemu-img", "convert", "-f", "raw", "-O", "qcow2", str(raw), str(qcow2))
        before = sha256(qcow2)
        with pytest.raises(NoHandlerAvailable) as caught:
            inject(
                qcow2,
                "qcow2",
                InjectionRequest(key_data=KEY),
                options=options("debugfs", "loop", "nbd"),
            )
        reasons = dict(caught.value.reasons)
        assert list(reasons) == ["debugfs", "loop", "nbd"]
        assert "raw images only" in reasons["debugfs"]
        assert "copy-on-write" in reasons["loop"]
        assert reasons["nbd"]  # root, module or tool: whatever is missing here, said
        for name in ("debugfs:", "loop:", "nbd:"):
            assert name in caught.value.message
        assert sha256(qcow2) == before
        assert leftovers(tmp_path) == []

    def test_inspection_needs_guestfs(self, tmp_path):
        raw = ext4_image(guest_tree(tmp_path / "tree"), tmp_path / "disk.raw")
        with pytest.raises(NoHandlerAvailable, match="needs guestfs"):
            inject(
                raw,
                "raw",
                InjectionRequest(key_data=KEY),
                options=options("debugfs", "loop", partition=-1),
            )

    def test_disabled_and_nothing_to_do(self, tmp_path):
        raw = ext4_image(guest_tree(tmp_path / "tree"), tmp_path / "disk.raw")
        with pytest.raises(InjectionDisabled):
            inject(raw, "raw", InjectionRequest(key_data=KEY), options=InjectionOptions())
        before = raw.stat().st_mtime_ns, raw.stat().st_ino
        # inject_key is off, so the key is dropped and nothing is left to do.
        report = inject(
            raw,
            "raw",
            InjectionRequest(key_data=KEY),
            options=InjectionOptions(partition=0, handlers=("debugfs",)),
        )
        assert report.handler is None and report.written == ()
        assert (raw.stat().st_mtime_ns, raw.stat().st_ino) == before


# -- host mounts: paths are walked without following links ------------------------------------


class TestLocalFilesystem:
    """``LocalFilesystem`` on a plain directory: the rules a loop or nbd mount relies on."""

    def make(self, tmp_path):
        guest = guest_tree(tmp_path / "guest")
        outside = tmp_path / "host-etc"
        outside.mkdir()
        (outside / "precious").write_text("host data\n")
        return guest, outside

    @pytest.mark.parametrize("how", ["absolute", "relative"])
    def test_symlinked_directory_is_never_entered(self, tmp_path, how):
        guest, outside = self.make(tmp_path)
        target = str(outside) if how == "absolute" else "../../host-etc"
        (guest / "root" / ".ssh").symlink_to(target)
        fs = LocalFilesystem(guest)
        for attempt in (
            lambda: fs.write("/root/.ssh/precious", b"owned"),
            lambda: fs.read("/root/.ssh/precious"),
            lambda: fs.lstat("/root/.ssh/precious"),
            lambda: fs.chmod("/root/.ssh/precious", 0o777),
            lambda: fs.mkdir("/root/.ssh/new"),
        ):
            with pytest.raises(GuestRefused, match=r"/root/\.ssh is a symlink"):
                attempt()
        with pytest.raises(GuestRefused):
            write_request(fs, InjectionRequest(key_data=KEY), password_hash=None)
        assert sorted(p.name for p in outside.iterdir()) == ["precious"]
        assert (outside / "precious").read_text() == "host data\n"
        assert oct((outside / "precious").stat().st_mode & 0o777) == oct(0o644)

    def test_symlinked_file_is_never_written_or_chmodded(self, tmp_path):
        guest, outside = self.make(tmp_path)
        (guest / "meta.js").symlink_to(outside / "precious")
        fs = LocalFilesystem(guest)
        assert fs.lstat("/meta.js").kind == "symlink"  # type: ignore[union-attr]
        for attempt in (
            lambda: fs.write("/meta.js", b"owned"),
            lambda: fs.chmod("/meta.js", 0o777),
            lambda: fs.chown("/meta.js", 1, 1),
        ):
            with pytest.raises(GuestRefused, match="is a symlink"):
                attempt()
        assert (outside / "precious").read_text() == "host data\n"

    def test_fifo_is_refused_without_hanging(self, tmp_path):
        guest, _ = self.make(tmp_path)
        os.mkfifo(guest / "meta.js")
        with pytest.raises(GuestRefused, match="not a regular file"):
            LocalFilesystem(guest).write("/meta.js", b"x")

    def test_writes_keep_inode_mode_and_owner(self, tmp_path):
        guest, _ = self.make(tmp_path)
        shadow = guest / "etc" / "shadow"
        inode = shadow.stat().st_ino
        write_request(
            LocalFilesystem(guest),
            InjectionRequest(admin_password="x"),
            password_hash="$6$s$" + "h" * 86,
        )
        assert shadow.stat().st_ino == inode and shadow.stat().st_mode & 0o777 == 0o640
        assert shadow.read_text().startswith("root:$6$s$")


def loop_usable() -> str | None:
    """Why the loop handler cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root"
    if not os.path.exists("/dev/loop-control"):
        return "no loop device support in this kernel"
    if shutil.which("losetup") is None:
        return "needs losetup (util-linux)"
    return None


@needs("mke2fs", "debugfs", "qemu-img", "openssl", "prlimit", "sfdisk")
@pytest.mark.skipif(loop_usable() is not None, reason=f"loop handler: {loop_usable()}")
class TestLoop:
    def test_partition(self, tmp_path):
        image = partitioned_image(guest_tree(tmp_path / "tree"), tmp_path / "disk.raw")
        try:
            report = inject(image, "raw", FULL_REQUEST, options=options("loop", partition=1))
        except NoHandlerAvailable as exc:
            pytest.skip(f"loop handler cannot run here: {exc.message}")
        assert report.handler == "loop"
        assert_full_injection(image, partition=1)
        assert leftovers(tmp_path) == []

    def test_symlink_to_host_path_refused(self, tmp_path):
        host_dir = tmp_path / "host-etc"
        host_dir.mkdir()
        tree = guest_tree(tmp_path / "tree")
        # In the mounted image this absolute link points at a real host directory.
        (tree / "root" / ".ssh").symlink_to(host_dir)
        image = ext4_image(tree, tmp_path / "disk.raw")
        before = sha256(image)
        try:
            inject(image, "raw", InjectionRequest(key_data=KEY), options=options("loop"))
        except NoHandlerAvailable as exc:
            pytest.skip(f"loop handler cannot run here: {exc.message}")
        except GuestRefused as exc:
            assert "/root/.ssh is a symlink" in exc.message
        else:
            pytest.fail("the symlinked /root/.ssh was written through")
        assert list(host_dir.iterdir()) == []
        assert sha256(image) == before


# -- libguestfs ------------------------------------------------------------------------------


def guestfish_read(image: Path, fmt: str, *commands: str) -> str:
    argv = ["guestfish", "--ro", "--format=" + fmt, "-a", str(image), "-i"]
    for command in commands:
        argv += [*command.split(), ":"]
    env = {"LC_ALL": "C", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/tmp"}
    result = subprocess.run(argv[:-1], capture_output=True, env=env)
    if result.returncode != 0:  # KVM present but unusable: software emulation
        env["LIBGUESTFS_BACKEND_SETTINGS"] = "force_tcg"
        result = subprocess.run(argv[:-1], capture_output=True, env=env, check=True)
    return result.stdout.decode()


SLOW_GUESTFS = os.environ.get("CLOUDSEED_TEST_SLOW_GUESTFS") == "1"


@needs("mke2fs", "debugfs", "qemu-img", "openssl", "prlimit", "sfdisk")
class TestGuestfs:
    def qcow2_image(self, tmp_path: Path) -> Path:
        raw = partitioned_image(guest_tree(tmp_path / "tree"), tmp_path / "disk.raw")
        image = tmp_path / "disk.qcow2"
        run("qemu-img", "convert", "-f", "raw", "-O", "qcow2", str(raw), str(image))
        raw.unlink()
        return image

    def inject_or_skip(self, image: Path, partition: int):
        try:
            return inject(
                image,
                "qcow2",
                FULL_REQUEST,
                options=options("debugfs", "guestfs", partition=partition),
            )
        except NoHandlerAvailable as exc:
            pytest.skip(f"libguestfs cannot run here: {exc.message}")

    def read_back_flat(self, image: Path, tmp_path: Path) -> None:
        # qemu's qcow2 driver and e2fsprogs: tools libguestfs does not share.
        flat = tmp_path / "flat.raw"
        run("qemu-img", "convert", "-f", "qcow2", "-O", "raw", str(image), str(flat))
        assert_full_injection(flat, partition=1)

    def test_qcow2_partition(self, tmp_path):
        image = self.qcow2_image(tmp_path)
        report = self.inject_or_skip(image, partition=1)
        assert report.handler == "guestfs"
        assert report.unavailable == (
            ("debugfs", "debugfs reads raw images only, this one is qcow2"),
        )
        self.read_back_flat(image, tmp_path)

    @pytest.mark.skipif(
        not SLOW_GUESTFS,
        reason="OS inspection and a guestfish read-back "
        "boot two more appliances (15-30 s each without KVM); set "
        "CLOUDSEED_TEST_SLOW_GUESTFS=1",
    )
    def test_qcow2_by_inspection_read_back_with_guestfish(self, tmp_path):
        image = self.qcow2_image(tmp_path)
        report = self.inject_or_skip(image, partition=-1)
        assert report.handler == "guestfs"
        self.read_back_flat(image, tmp_path)
        out = guestfish_read(image, "qcow2", "cat /root/.ssh/authorized_keys", "cat /meta.js")
        assert KEY in out and '{"role": "web"}' in out


# -- the CLI ---------------------------------------------------------------------------------


@needs("mke2fs", "debugfs", "qemu-img", "openssl", "prlimit")
class TestCli:
    def invoke(self, tmp_path, *args, input=None):
        env = {"CLOUDSEED_LIBVIRT__INJECT_HANDLERS": "nbd,debugfs"}
        return CliRunner().invoke(
            cli,
            ["--data-dir", str(tmp_path / "var"), "inject", *args],
            env=env,
            input=input,
            catch_exceptions=False,
        )

    def test_key_password_file_metadata(self, tmp_path):
        image = ext4_image(guest_tree(tmp_path / "tree"), tmp_path / "disk.raw")
        key = tmp_path / "id.pub"
        key.write_text(KEY + "\n")
        src = tmp_path / "motd"
        src.write_text("hello\n")
        result = self.invoke(
            tmp_path,
            str(image),
            "--key",
            str(key),
            "--password",
            "--file",
            f"{src}:/etc/motd",
            "--metadata",
            "role=web",
            "--partition",
            "0",
            input=f"{PASSWORD}\n{PASSWORD}\n",
        )
        assert result.exit_code == 0, result.output
        assert f"injected into {image} with debugfs: /root/.ssh" in result.output
        assert "nbd: cannot serve this image" in result.output
        assert KEY in guest_cat(image, "/root/.ssh/authorized_keys").decode()
        assert guest_cat(image, "/etc/motd") == b"hello\n"
        assert guest_cat(image, "/etc/shadow").decode().startswith("root:$6$")

    def test_partition_must_be_chosen_when_injection_is_off(self, tmp_path):
        image = ext4_image(guest_tree(tmp_path / "tree"), tmp_path / "disk.raw")
        key = tmp_path / "id.pub"
        key.write_text(KEY)
        result = self.invoke(tmp_path, str(image), "--key", str(key))
        assert result.exit_code == 2
        assert "inject_partition is -2" in result.output

    def test_errors_are_messages(self, tmp_path):
        image = ext4_image(guest_tree(tmp_path / "tree"), tmp_path / "disk.raw")
        key = tmp_path / "id.pub"
        key.write_text(KEY)
        result = self.invoke(
            tmp_path, str(image), "--key", str(key), "--partition", "0", "--format", "qcow2"
        )
        assert result.exit_code == 1
        assert "is not a qcow2 image" in result.output
