"""An image's virtual size is bounded where it arrives (issue 30, defect 3): ``[glance]
image_size_cap`` counts only the bytes sent, and a sparse qcow2 of a few hundred kilobytes can
claim terabytes, the disk a server booted from it grows to. Over ``[glance]
image_virtual_size_cap`` (1 TiB by default) an upload through the Glance slice is a 400 that
keeps nothing, and ``cloudseed image add`` refuses the file with one line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx

from cloudseed.db.engines import Database
from cloudseed.images import store
from cloudseed.settings import Settings
from tests.support.cli import run
from tests.support.snapshot import changes, snapshot

OCTETS = {"Content-Type": "application/octet-stream"}
CAP = 1 << 40  # the default
OVER = CAP + (64 << 10)  # one qcow2 cluster more


def sparse_qcow2(path: Path, virtual_size: int) -> Path:
    """A qcow2 with no data that claims ``virtual_size`` bytes (its file is tiny)."""
    subprocess.run(
        ["qemu-img", "create", "-q", "-f", "qcow2", str(path), str(virtual_size)], check=True
    )
    assert path.stat().st_size < 1 << 20
    return path


def stored_files(settings: Settings) -> set[str]:
    directory = store.images_dir(settings.state_dir)
    return {p.name for p in directory.iterdir()} if directory.exists() else set()


def test_an_upload_claiming_more_than_the_cap_is_a_400_that_keeps_nothing(
    api: httpx.Client, api_db: Database, migrated_settings: Settings, tmp_path: Path
) -> None:
    assert migrated_settings.glance.image_virtual_size_cap == CAP
    body = {"name": "huge", "disk_format": "qcow2", "container_format": "bare"}
    image = api.post("/image/v2/images", json=body).json()
    url = f"/image/v2/images/{image['id']}/file"
    files, rows = stored_files(migrated_settings), snapshot(api_db)
    for claimed in (OVER, 1 << 45):
        data = sparse_qcow2(tmp_path / f"{claimed}.qcow2", claimed).read_bytes()
        r = api.put(url, content=data, headers=OCTETS)
        assert r.status_code == 400, (claimed, r.text)
        assert r.json()["message"] == (
            f"The image data has a virtual size of {claimed} bytes, "
            f"more than the largest allowed ({CAP} bytes)"
        ), r.text
        assert str(migrated_settings.state_dir) not in r.text
        # Nothing kept: the image stays queued without data, no file stays in the store.
        assert changes(rows, snapshot(api_db)) == [], claimed
        assert stored_files(migrated_settings) == files, claimed
        shown = api.get(f"/image/v2/images/{image['id']}").json()
        assert (shown["status"], shown["size"], shown["virtual_size"]) == ("queued", None, None)
    # Exactly the cap is allowed.
    data = sparse_qcow2(tmp_path / "at-cap.qcow2", CAP).read_bytes()
    assert api.put(url, content=data, headers=OCTETS).status_code == 204
    shown = api.get(f"/image/v2/images/{image['id']}").json()
    assert (shown["status"], shown["virtual_size"]) == ("active", CAP)


def test_image_add_refuses_a_file_claiming_more_than_the_cap(tmp_path: Path) -> None:
    d = ["--data-dir", str(tmp_path / "data")]
    assert run(*d, "db", "sync")[0] == 0
    file = sparse_qcow2(tmp_path / "huge.qcow2", OVER)
    code, out = run(*d, "image", "add", "huge", "--file", str(file), "--disk-format", "qcow2")
    assert (code, out) == (
        1,
        f"Error: {file} has a virtual size of {OVER} bytes, more than "
        f"[glance] image_virtual_size_cap ({CAP} bytes)\n",
    )
    assert list((tmp_path / "data" / "images").iterdir()) == []  # no copy kept
    assert run(*d, "image", "list", "-f", "value", "-c", "id") == (0, "")


def test_image_add_follows_the_setting(tmp_path: Path) -> None:
    d = ["--data-dir", str(tmp_path / "data")]
    assert run(*d, "db", "sync")[0] == 0
    file = sparse_qcow2(tmp_path / "small.qcow2", 16 << 20)
    args = ("image", "add", "small", "--file", str(file), "--disk-format", "qcow2")
    lower = {"CLOUDSEED_GLANCE__IMAGE_VIRTUAL_SIZE_CAP": str(8 << 20)}
    code, out = run(*d, *args, env=lower)
    assert (code, out) == (
        1,
        f"Error: {file} has a virtual size of {16 << 20} bytes, more than "
        f"[glance] image_virtual_size_cap ({8 << 20} bytes)\n",
    )
    assert run(*d, *args, "-f", "value", "-c", "name")[0] == 0  # the default admits it
