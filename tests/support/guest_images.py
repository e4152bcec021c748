"""Guest disk images to inject into: a Debian-like root tree and an ext4 image made from it."""

from __future__ import annotations

import subprocess
from pathlib import Path


def run(*argv: str, input: bytes | None = None) -> bytes:
    return subprocess.run(
        argv,
        input=input,
        capture_output=True,
        check=True,
        env={"LC_ALL": "C", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
    ).stdout


def guest_tree(root: Path, *, selinux: bool = False) -> Path:
    (root / "etc").mkdir(parents=True)
    (root / "root").mkdir(mode=0o700)
    (root / "bin").mkdir()
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "etc" / "passwd").write_text(
        "root:x:0:0:root:/root:/bin/sh\ndaemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n"
    )
    (root / "etc" / "group").write_text("root:x:0:\nshadow:x:42:\n")
    shadow = root / "etc" / "shadow"
    shadow.write_text("root:*:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n")
    shadow.chmod(0o640)
    (root / "etc" / "os-release").write_text('ID=debian\nVERSION_ID="12"\nNAME="Debian"\n')
    (root / "etc" / "fstab").write_text("/dev/sda1 / ext4 defaults 0 1\n")
    if selinux:
        (root / "etc" / "selinux").mkdir()
        (root / "etc" / "rc.d").mkdir()
        rc = root / "etc" / "rc.d" / "rc.local"
        rc.write_text("#!/bin/bash\ntouch /var/lock/subsys/local\n")
        (root / "etc" / "rc.local").symlink_to("rc.d/rc.local")
    return root


def ext4_image(tree: Path, image: Path, size: str = "16M") -> Path:
    run("mke2fs", "-q", "-t", "ext4", "-d", str(tree), "-F", str(image), size)
    return image
