"""qcow2 data whose header qemu-img refuses (issue 30, defect 2): an upload through the Glance
slice is a 400 that names neither the store's path nor qemu-img's words and keeps nothing;
``cloudseed image add`` refuses the file with one line. Only the server's own trouble (qemu-img
missing, stopped by its limits) stays a 503."""

from __future__ import annotations

import logging
import struct
import subprocess
from pathlib import Path

import httpx
import pytest

from cloudseed.db.engines import Database
from cloudseed.errors import ServiceUnavailable
from cloudseed.images import store
from cloudseed.images.contents import QCOW2_MAGIC, check_format
from cloudseed.images.errors import NotValidImage
from cloudseed.programs import run as program
from cloudseed.settings import Settings
from tests.support.cli import run
from tests.support.snapshot import changes, snapshot

OCTETS = {"Content-Type": "application/octet-stream"}
# Offsets of the qcow2 header's fields (docs/interop/qcow2.txt in QEMU), big-endian.
VERSION, CLUSTER_BITS, L1_SIZE = 4, 20, 36
# qemu-img's reasons for each, as qemu-img 7.2 words them.
REASONS = {
    "version 99": "Unsupported qcow2 version 99",
    "cluster_bits 63": "Unsupported cluster size: 2^63",
    "truncated header": "qcow2 header too short",
    "L1 table of 2^32-1 entries": "Active L1 table too large",
}


def valid_qcow2(directory: Path) -> bytes:
    path = directory / "valid.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(path), "16M"], check=True)
    return path.read_bytes()


def patched(valid: bytes, offset: int, value: int) -> bytes:
    data = bytearray(valid)
    struct.pack_into(">I", data, offset, value)
    return bytes(data)


def bad_headers(valid: bytes) -> dict[str, bytes]:
    """The four headers of the adversarial run, each a valid header with one field broken."""
    assert valid[:4] == QCOW2_MAGIC
    return {
        "version 99": patched(valid, VERSION, 99),
        "cluster_bits 63": patched(valid, CLUSTER_BITS, 63),
        "truncated header": valid[:40],
        "L1 table of 2^32-1 entries": patched(valid, L1_SIZE, 2**32 - 1),
    }


def stored_files(settings: Settings) -> set[str]:
    directory = store.images_dir(settings.state_dir)
    return {p.name for p in directory.iterdir()} if directory.exists() else set()


def test_an_upload_qemu_img_cannot_open_is_a_400_that_keeps_nothing(
    api: httpx.Client,
    api_db: Database,
    migrated_settings: Settings,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    valid = valid_qcow2(tmp_path)
    body = {"name": "hostile", "disk_format": "qcow2", "container_format": "bare"}
    image = api.post("/image/v2/images", json=body).json()
    url = f"/image/v2/images/{image['id']}/file"
    files, rows = stored_files(migrated_settings), snapshot(api_db)
    caplog.set_level(logging.WARNING, logger="cloudseed.images.glance_api")
    for name, data in bad_headers(valid).items():
        r = api.put(url, content=data, headers=OCTETS)
        assert r.status_code == 400, (name, r.text)
        assert r.json()["message"] == "The image data is not a valid qcow2 image", name
        for secret in (str(migrated_settings.state_dir), "qemu-img", REASONS[name]):
            assert secret not in r.text, (name, secret)
        # Nothing kept: the image is queued without data, no file (partial or whole) stays.
        assert changes(rows, snapshot(api_db)) == [], name
        assert stored_files(migrated_settings) == files, name
        shown = api.get(f"/image/v2/images/{image['id']}").json()
        assert (shown["status"], shown["size"], shown["checksum"]) == ("queued", None, None)
        # The operator reads the reason (and the file) in the log.
        assert REASONS[name] in caplog.text and image["id"] in caplog.text, name
    assert api.put(url, content=valid, headers=OCTETS).status_code == 204  # a retry works
    assert api.get(f"/image/v2/images/{image['id']}").json()["virtual_size"] == 16 << 20


def test_image_add_refuses_them_with_one_line(tmp_path: Path) -> None:
    d = ["--data-dir", str(tmp_path / "data")]
    assert run(*d, "db", "sync")[0] == 0
    for name, data in bad_headers(valid_qcow2(tmp_path)).items():
        file = tmp_path / f"{name.replace(' ', '_')}.qcow2"
        file.write_bytes(data)
        code, out = run(*d, "image", "add", "bad", "--file", str(file), "--disk-format", "qcow2")
        assert code == 1, (name, out)
        assert out == f"Error: {file} is not a valid qcow2 image: {REASONS[name]}\n"
        assert list((tmp_path / "data" / "images").iterdir()) == [], name  # no copy kept
    code, out = run(*d, "image", "list", "-f", "value", "-c", "id")
    assert (code, out) == (0, "")


def test_qemu_img_missing_stays_a_server_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = bad_headers(valid_qcow2(tmp_path))["version 99"]
    path = tmp_path / "image.qcow2"
    path.write_bytes(data)
    with pytest.raises(NotValidImage):
        check_format(path, "qcow2", head=data[:4], size=len(data), shown="it")
    monkeypatch.setattr(program, "which", lambda name: None)  # prlimit not installed
    with pytest.raises(ServiceUnavailable) as caught:
        check_format(path, "qcow2", head=data[:4], size=len(data), shown="it")
    assert not isinstance(caught.value, NotValidImage)
