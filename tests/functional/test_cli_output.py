"""One output style for every list and show command (-f table|json|value, -c COLUMN), and
``image add`` registering its own copies of the image, kernel and initramfs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from cloudseed.cli import cli
from cloudseed.db.engines import Database
from cloudseed.images import service
from cloudseed.images.errors import FlavorDiskSmallerThanImage
from tests.support import keys


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.output


@pytest.fixture
def data_dir(tmp_path: Path) -> list[str]:
    d = ["--data-dir", str(tmp_path / "state")]
    assert run(*d, "db", "sync")[0] == 0
    return d


def test_every_list_draws_a_table_with_a_header_by_default(data_dir, tmp_path):
    pub = tmp_path / "k.pub"
    pub.write_text(keys.ed25519_public() + "\n")
    assert (
        run(*data_dir, "keypair", "import", "k1", "--user", "u1", "--public-key", str(pub))[0] == 0
    )
    assert (
        run(*data_dir, "flavor", "add", "m1.tiny", "--vcpus", "1", "--ram", "512", "--disk", "1")[0]
        == 0
    )
    assert run(*data_dir, "network", "add", "private", "--cidr", "10.1.0.0/24")[0] == 0
    headers = {
        ("keypair", "list", "--user", "u1"): ["name", "type", "fingerprint", "fingerprint_sha256"],
        ("flavor", "list"): ["id", "name", "vcpus", "ram", "disk"],
        ("network", "list"): ["id", "name", "cidr", "gateway", "mtu", "mode"],
        ("image", "list"): ["id", "name", "disk_format", "size"],
    }
    for command, columns in headers.items():
        code, out = run(*data_dir, *command)
        assert code == 0, out
        lines = out.splitlines()
        assert lines[0].startswith("+-") and lines[-1].startswith("+-"), out
        assert [c.strip() for c in lines[1].strip("|").split("|")] == columns, out


def test_formats_and_columns(data_dir):
    code, out = run(
        *data_dir, "flavor", "add", "m1.small", "--vcpus", "2", "--ram", "2048", "--disk", "10",
        "--id", "2",
    )  # fmt: skip
    assert code == 0
    assert "| ram         | 2048" in out  # a show table: Field | Value
    code, out = run(*data_dir, "flavor", "list", "-f", "json")
    assert json.loads(out) == [{"id": "2", "name": "m1.small", "vcpus": 2, "ram": 2048, "disk": 10}]
    assert run(*data_dir, "flavor", "list", "-f", "value")[1] == "2 m1.small 2 2048 10\n"
    assert run(*data_dir, "flavor", "list", "-f", "value", "-c", "ram", "-c", "id")[1] == "2048 2\n"
    # -c may name any field of the records, not only the default columns.
    assert run(*data_dir, "flavor", "list", "-f", "value", "-c", "is_public")[1] == "True\n"
    code, out = run(*data_dir, "flavor", "list", "-c", "nonsense")
    assert code == 2 and "no column 'nonsense'" in out


def test_show_finds_one_record_by_id_or_name(data_dir, tmp_path):
    """What the README's walkthroughs look up before adding, so they can run twice."""
    assert run(*data_dir, "flavor", "show", "m1.tiny")[0] == 1  # none yet: the walkthrough adds
    run(
        *data_dir,
        "flavor",
        "add",
        "m1.tiny",
        "--vcpus",
        "1",
        "--ram",
        "512",
        "--disk",
        "1",
        "--id",
        "7",
    )
    assert run(*data_dir, "flavor", "show", "m1.tiny", "-f", "value", "-c", "id")[1] == "7\n"
    assert run(*data_dir, "flavor", "show", "7", "-f", "value", "-c", "name")[1] == "m1.tiny\n"
    code, out = run(
        *data_dir, "network", "add", "net", "--cidr", "10.9.0.0/24", "-f", "value", "-c", "id"
    )
    assert run(*data_dir, "network", "show", "net", "-f", "value", "-c", "id")[1] == out
    code, out = run(*data_dir, "network", "show", "elsewhere")
    assert code == 1 and "no network with the id or name 'elsewhere'" in out
    # Image names may repeat (as in Glance): a shared name is an error that lists the ids.
    disk = tmp_path / "d.raw"
    disk.write_bytes(b"\0" * 4096)
    ids = [
        run(*data_dir, "image", "add", "twin", "--file", str(disk), "--disk-format", "raw",
            "-f", "value", "-c", "id")[1].strip()
        for _ in range(2)
    ]  # fmt: skip
    code, out = run(*data_dir, "image", "show", "twin")
    assert code == 1 and "2 images are named 'twin'" in out and all(i in out for i in ids)
    assert run(*data_dir, "image", "show", ids[1], "-f", "value", "-c", "id")[1] == ids[1] + "\n"


def test_image_add_registers_a_copy_that_outlives_the_original(data_dir, tmp_path):
    original = tmp_path / "disk.raw"
    original.write_bytes(b"first" + b"\0" * 4096)
    code, out = run(
        *data_dir, "image", "add", "demo", "--file", str(original), "--disk-format", "raw",
        "-f", "json",
    )  # fmt: skip
    assert code == 0, out
    shown = json.loads(out)
    copy = Path(shown["file"])
    assert (
        copy.parent == tmp_path / "state" / "images" and copy.read_bytes() == original.read_bytes()
    )
    # The operator's file may change or go; the registered image does not.
    original.write_bytes(b"changed")
    original.unlink()
    assert copy.read_bytes().startswith(b"first")
    code, out = run(*data_dir, "image", "list", "-f", "json", "-c", "id", "-c", "file")
    assert json.loads(out) == [{"id": shown["id"], "file": str(copy)}]
    assert not list(copy.parent.glob(".*partial"))


def test_image_add_with_kernel_and_initrd_links_them(data_dir, tmp_path):
    disk, kernel, initrd = (tmp_path / n for n in ("disk.raw", "vmlinuz", "initrd.img"))
    for f in (disk, kernel, initrd):
        f.write_bytes(f.name.encode())
    code, out = run(
        *data_dir, "image", "add", "debian", "--file", str(disk), "--disk-format", "raw",
        "--kernel", str(kernel), "--initrd", str(initrd), "-f", "json",
    )  # fmt: skip
    assert code == 0, out
    image = json.loads(out)
    code, out = run(
        *data_dir, "image", "list", "-f", "json", "-c", "name", "-c", "id", "-c", "file"
    )
    listed = {i["name"]: i for i in json.loads(out)}
    assert image["properties"] == {
        "kernel_id": listed["debian-kernel"]["id"],
        "ramdisk_id": listed["debian-ramdisk"]["id"],
    }
    assert Path(listed["debian-kernel"]["file"]).read_bytes() == b"vmlinuz"
    assert Path(listed["debian-ramdisk"]["file"]).read_bytes() == b"initrd.img"


def test_a_refused_image_leaves_no_copy_behind(data_dir, tmp_path):
    raw = tmp_path / "disk.raw"
    raw.write_bytes(b"\0" * 1024)
    code, out = run(*data_dir, "image", "add", "fake", "--file", str(raw), "--disk-format", "qcow2")
    assert (code, "is not a qcow2 image" in out) == (1, True)
    code, out = run(
        *data_dir, "image", "add", "x", "--file", str(raw), "--disk-format", "raw",
        "--kernel", str(raw), "--property", "kernel_id=abc",
    )  # fmt: skip
    assert code == 1 and "not both" in out
    images = tmp_path / "state" / "images"
    assert (
        list(images.iterdir()) == [] and run(*data_dir, "image", "list", "-f", "json")[1] == "[]\n"
    )


def test_a_qcow2_image_records_its_virtual_size_and_may_not_refer_to_other_files(
    data_dir, tmp_path
):
    base, overlay = tmp_path / "base.qcow2", tmp_path / "overlay.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(base), "3G"], check=True)
    add = (*data_dir, "image", "add")
    code, out = run(*add, "big", "--file", str(base), "--disk-format", "qcow2", "-f", "json")
    assert code == 0, out
    image_id = json.loads(out)["id"]
    subprocess.run(
        ["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", str(base), str(overlay)],
        check=True,
    )
    code, out = run(*add, "o", "--file", str(overlay), "--disk-format", "qcow2")
    assert code == 1 and "refers to another file" in out, out
    db = Database.connect("api", f"sqlite:///{tmp_path / 'state' / 'cloudseed_api.sqlite'}")
    try:
        with db.read() as session:
            image = service.get_image(session, image_id)
            assert image.virtual_size == 3 << 30
            service.check_flavor_fits(image, root_gb=3, memory_mb=512)
            service.check_flavor_fits(image, root_gb=0, memory_mb=512)  # 0: the image's size
            expected = "Flavor disk is 2147483648 bytes, image is 3221225472 bytes"
            with pytest.raises(FlavorDiskSmallerThanImage, match=expected):
                service.check_flavor_fits(image, root_gb=2, memory_mb=512)
    finally:
        db.dispose()
