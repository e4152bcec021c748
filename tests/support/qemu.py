"""The QEMU driver's test material: a small ext4 root image, a guest spec and settings for the
driver (the ports of its SSH forwards come from ports.free_port_range)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from cloudseed.compute.interfaces import BootImage, GuestSpec
from cloudseed.settings import Settings, load_settings
from tests.support.flavors import stored_flavor

UUID = "3c6e1a52-8d1b-4f7e-b5a4-2b9d0e6f1a77"
SECRET = "relay-secret"
TOOLS = {"LC_ALL": "C", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


def settings_for(state: Path, **env: str) -> Settings:
    return load_settings(
        environ={
            "CLOUDSEED_STATE_PATH": str(state),
            "CLOUDSEED_COMPUTE_DRIVER": "qemu",
            "CLOUDSEED_NEUTRON__SERVICE_METADATA_PROXY": "true",
            "CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET": SECRET,
            "CLOUDSEED_QEMU__ACCEL": "tcg",
            "CLOUDSEED_QEMU__SHUTDOWN_TIMEOUT": "1",
            "CLOUDSEED_QEMU__METADATA_URL": "http://127.0.0.1:9",
            **env,
        }
    )


def ext4_image(path: Path) -> Path:
    tree = path.parent / "tree"
    (tree / "etc").mkdir(parents=True)
    (tree / "root").mkdir(mode=0o700)
    (tree / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (tree / "etc" / "group").write_text("root:x:0:\n")
    (tree / "etc" / "shadow").write_text("root:*:19000:0:99999:7:::\n")
    subprocess.run(
        ["mke2fs", "-q", "-t", "ext4", "-d", str(tree), "-F", str(path), "8M"],
        check=True,
        capture_output=True,
        env=TOOLS,
    )
    return path


def guest(boot: BootImage, /, **changes: object) -> GuestSpec:
    values: dict[str, object] = dict(
        uuid=UUID,
        name="vm",
        hostname="vm",
        image_ref="img",
        flavor=stored_flavor(ram=64, vcpus=1),
        key_data=None,
        user_data=None,
        config_drive=False,
        ports=[{"mac_address": "fa:16:3e:12:34:56"}],
        project_id="proj",
        image=boot,
    )
    values.update(changes)
    return GuestSpec(**values)  # type: ignore[arg-type]
