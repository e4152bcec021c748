"""cloudbase-init's own metadata readers against cloudseed: a script, not a module.

    <cloudbase-init venv>/bin/python -I -B cloudbase_init_client.py SPEC.json

It is run by the interpreter of the venv that holds cloudbase-init (tests/support/
cloudbase_init.py builds it), never imported into pytest. ``SPEC.json`` names:

- ``http``: ``[{"name", "url", "password"?}]``: ``HttpService`` (``[openstack]
  metadata_base_url`` = url) is loaded and read; with ``password``, the
  ``SetUserPasswordPlugin``'s own metadata step (``_set_metadata_password``: is a password
  set, the first public key as the encryption key, RSA PKCS#1 v1.5, ``post_password``) runs
  twice, as it does on a second boot;
- ``drives``: ``[{"name", "image", "format"}]``: ``ConfigDriveService`` is loaded with
  ``[config_drive] types`` = format (``iso`` or ``vfat``) and ``locations = hdd``, and finds
  the drive with cloudbase-init's own Windows config drive manager: for ISO it reads the
  raw disk for the ISO 9660 volume descriptor, copies the volume out and unpacks it with
  ``bsdtar``; for VFAT it checks the label with ``mlabel`` and copies the files out with
  ``mcopy`` (the Windows build ships both tools; here they are Debian's, called through
  ``*.exe`` scripts in the ``mtools_path`` directory);
- ``tools``: ``{"bsdtar": path, "mtools": dir}``, ``work``: a scratch directory.

What is not Linux is replaced, and only that: ``cloudbaseinit.utils.windows.disk`` (Win32
``CreateFileW``/``ReadFile`` on ``\\\\.\\PHYSICALDRIVEn``) by ``FileDisk``, which reads the image
file in whole sectors the same way, and the OS utilities' ``get_physical_disks`` (WMI) by the
list of images. Prints one JSON object keyed by name; bytes as ``{"base64": ...}``.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import types
from typing import Any

SECTOR = 512


class FileDisk:
    """``cloudbaseinit.utils.windows.disk.Disk`` for an image file: sector-aligned seeks
    and reads (``seek`` answers the aligned offset, ``read`` skips into the sector), as the
    Win32 device it stands for."""

    def __init__(self, path: str, allow_write: bool = False) -> None:
        self._path = path
        self._file: Any = None
        self.fixed: bool | None = None

    def __repr__(self) -> str:
        return f"<FileDisk: {self._path}>"

    def __enter__(self) -> FileDisk:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> None:
        self._file = open(self._path, "rb")  # noqa: SIM115 (closed by close())
        self.fixed = True  # a hard disk, as Nova attaches a config drive in "hdd" mode

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def seek(self, offset: int) -> int:
        safe = offset // SECTOR * SECTOR
        self._file.seek(safe)
        return safe

    def read(self, size: int, skip: int = 0) -> bytes:
        total = size + skip
        whole = -(-total // SECTOR) * SECTOR
        data: bytes = self._file.read(whole)
        return data[skip:total]

    @property
    def size(self) -> int:
        return os.path.getsize(self._path)

    def partitions(self) -> list[Any]:
        return []


def plain(value: Any) -> Any:
    """JSON for what cloudbase-init returns: bytes as base64, named tuples as objects."""
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode()}
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [plain(v) for v in value]
    return value


def configure(spec: dict[str, Any]) -> None:
    from cloudbaseinit import conf as cloudbaseinit_conf

    conf = cloudbaseinit_conf.CONF
    conf([], project="cloudbase-init", default_config_files=[])
    # Routes and retries are the guest OS's business, not the reader's: no route is added
    # for 169.254.169.254, and a failure shows at once instead of after 5 x 4 s.
    conf.set_override("add_metadata_private_ip_route", False, "openstack")
    conf.set_override("retry_count", 1)
    conf.set_override("retry_count_interval", 0.1)
    conf.set_override("bsdtar_path", spec["tools"]["bsdtar"])
    conf.set_override("mtools_path", spec["tools"]["mtools"])
    conf.set_override("locations", ["hdd"], "config_drive")
    # The deprecated switches would add their types and locations to those.
    for switch in ("cdrom", "raw_hdd", "vfat"):
        conf.set_override(switch, False, "config_drive")


def install_disk_stand_in() -> None:
    """The raw disk module, which has no Linux counterpart (Win32 calls at import)."""
    disk = types.ModuleType("cloudbaseinit.utils.windows.disk")
    disk.Disk = FileDisk  # type: ignore[attr-defined]
    sys.modules["cloudbaseinit.utils.windows.disk"] = disk


def read_service(service: Any) -> dict[str, Any]:
    from cloudbaseinit.metadata.services import base

    def attempt(fn: Any) -> Any:
        try:
            return plain(fn())
        except base.NotExistingMetadataException:
            return {"missing": True}

    return {
        "instance_id": attempt(service.get_instance_id),
        "host_name": attempt(service.get_host_name),
        "public_keys": sorted(service.get_public_keys()),
        "user_pwd_encryption_key": attempt(service.get_user_pwd_encryption_key),
        "admin_username": attempt(service.get_admin_username),
        "admin_password": attempt(service.get_admin_password),
        "user_data": attempt(service.get_user_data),
        "decoded_user_data": attempt(service.get_decoded_user_data),
        "client_auth_certs": sorted(service.get_client_auth_certs()),
        "network_details": attempt(service.get_network_details),
        "network_details_v2": attempt(service.get_network_details_v2),
        "instance_data": attempt(service.get_instance_data),
    }


def read_http(entry: dict[str, Any]) -> dict[str, Any]:
    from cloudbaseinit import conf as cloudbaseinit_conf
    from cloudbaseinit.metadata.services import httpservice
    from cloudbaseinit.plugins.common import setuserpassword

    cloudbaseinit_conf.CONF.set_override("metadata_base_url", entry["url"] + "/", "openstack")
    service = httpservice.HttpService()
    result: dict[str, Any] = {"loaded": service.load()}
    result.update(read_service(service))
    if entry.get("password") is not None:
        plugin = setuserpassword.SetUserPasswordPlugin()
        result["can_post_password"] = service.can_post_password
        result["password_set_before"] = service.is_password_set
        result["first_post"] = plugin._set_metadata_password(entry["password"], service)
        result["password_set_after"] = service.is_password_set
        # A second boot: the password is there, so nothing is posted again.
        result["second_post"] = plugin._set_metadata_password(entry["password"], service)
    return result


def read_drive(entry: dict[str, Any]) -> dict[str, Any]:
    from cloudbaseinit import conf as cloudbaseinit_conf
    from cloudbaseinit.metadata.services import configdrive
    from cloudbaseinit.metadata.services.osconfigdrive import factory, windows

    cloudbaseinit_conf.CONF.set_override("types", [entry["format"]], "config_drive")
    # WMI's list of physical disks: this entry's image alone while it is read.
    from cloudbaseinit.osutils import posix

    posix.PosixUtils.get_physical_disks = lambda self: [entry["image"]]
    factory.get_config_drive_manager = windows.WindowsConfigDriveManager
    service = configdrive.ConfigDriveService()
    loaded = service.load()
    result: dict[str, Any] = {"loaded": loaded}
    if loaded:
        result["files"] = sorted(
            os.path.relpath(os.path.join(top, name), service._metadata_path)
            for top, _dirs, names in os.walk(service._metadata_path)
            for name in names
        )
        result.update(read_service(service))
        service.cleanup()
    return result


def main() -> int:
    with open(sys.argv[1]) as stream:
        spec = json.load(stream)
    os.chdir(spec["work"])
    configure(spec)
    install_disk_stand_in()
    import cloudbaseinit.version

    out: dict[str, Any] = {"version": cloudbaseinit.version.get_version()}
    for entry in spec.get("http", []):
        out[entry["name"]] = read_http(entry)
    for entry in spec.get("drives", []):
        out[entry["name"]] = read_drive(entry)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
