"""The compute agent's image cache against a real compute API over HTTP (the suite's server,
on every backend), through a real proxy that spoils answers on purpose
(tests/support/image_proxy.py): what arrives is checked (size, SHA-256 and MD5, format), a
mismatch is refused and tried again, a download cut short is resumed with ``Range``, a
partial file left by a killed agent is resumed or started over, concurrent boots of one image
on one host (threads, and processes sharing the directory) fetch it once, and eviction keeps
what the host's guests use."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import update

from cloudseed.db.engines import Database
from cloudseed.images import service as images
from cloudseed.images.cache import ImageCache, entry_name
from cloudseed.images.download import ImageDownloader
from cloudseed.images.errors import ImageFetchFailed
from cloudseed.images.models import Image
from cloudseed.images.service import ImageData
from tests.support.image_proxy import Corrupt, Cut, Extra, ImageProxy, image_proxy
from tests.support.ports import free_port

OCTETS = {"Content-Type": "application/octet-stream"}
# 3 MiB and a bit: several of the cache's 1 MiB pieces, and the proxy's 64 KiB ones.
DATA = hashlib.sha256(b"seed").digest() * (3 * 32768 + 5)


def uploaded(
    api: httpx.Client, api_db: Database, data: bytes = DATA, fmt: str = "raw"
) -> ImageData:
    """A project's private image with ``data``, as the registry describes it to an agent."""
    r = api.post(
        "/image/v2/images",
        json={"name": "img", "disk_format": fmt, "container_format": "bare"},
    )
    assert r.status_code == 201, r.text
    image_id = r.json()["id"]
    r = api.put(f"/image/v2/images/{image_id}/file", content=data, headers=OCTETS)
    assert r.status_code == 204, r.text
    with api_db.read() as session:
        source = images.boot_source(session, image_id)
    assert source is not None
    return source.disk


@pytest.fixture()
def proxy(api_url: str) -> Iterator[ImageProxy]:
    with image_proxy(api_url) as made:
        yield made


def cache_in(directory: Path, proxy: ImageProxy, **options: object) -> ImageCache:
    downloads = ImageDownloader(
        servers=[proxy.url],
        sleep=lambda _seconds: None,  # no backoff between attempts in tests
        **options,  # type: ignore[arg-type]
    )
    return ImageCache(directory, downloads)


def test_fetched_once_checked_and_read_only(api, api_db, proxy, tmp_path):
    data = uploaded(api, api_db)
    cache = cache_in(tmp_path / "_base", proxy)
    path = cache.fetch(data)
    assert path == (tmp_path / "_base" / hashlib.sha256(DATA).hexdigest()).resolve()
    assert path.read_bytes() == DATA
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    assert [s.range for s in proxy.file_requests()] == [None]
    assert cache.fetch(data) == path  # there already: no request
    assert len(proxy.file_requests()) == 1
    assert cache.entries() == [path.name]
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".partial")]
    cache.close()


def test_a_qcow2_image_is_checked_with_qemu_img(api, api_db, proxy, tmp_path):
    disk = tmp_path / "disk.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(disk), "64M"], check=True)
    data = uploaded(api, api_db, disk.read_bytes(), fmt="qcow2")
    cache = cache_in(tmp_path / "_base", proxy)
    assert cache.fetch(data).read_bytes() == disk.read_bytes()
    cache.close()


def test_a_checksum_mismatch_is_refused_and_tried_again(api, api_db, proxy, tmp_path):
    data = uploaded(api, api_db)
    proxy.faults = [Corrupt(at=123_456)]
    cache = cache_in(tmp_path / "_base", proxy)
    assert cache.fetch(data).read_bytes() == DATA
    # The spoiled download was thrown away and the next one started from the first byte.
    assert [s.range for s in proxy.file_requests()] == [None, None]
    cache.close()


def test_every_attempt_spoiled_keeps_nothing(api, api_db, proxy, tmp_path):
    data = uploaded(api, api_db)
    proxy.faults = [Corrupt(), Corrupt(), Extra(b"more")]
    cache = cache_in(tmp_path / "_base", proxy, retries=2)
    with pytest.raises(ImageFetchFailed) as failed:
        cache.fetch(data)
    assert "3 attempt(s) failed" in failed.value.message
    assert "sent more than the image's" in failed.value.message
    assert failed.value.public_message == (
        f"Image {data.image_id} could not be fetched by the compute host."
    )
    assert len(proxy.file_requests()) == 3
    assert cache.entries() == []
    assert [p.name for p in (tmp_path / "_base").iterdir()] == [".locks"]
    # Builds that waited for it get the same answer at once, without trying again.
    with pytest.raises(ImageFetchFailed) as again:
        cache.fetch(data)
    assert again.value is failed.value and len(proxy.file_requests()) == 3
    cache.close()


def test_a_download_cut_short_is_resumed(api, api_db, proxy, tmp_path):
    data = uploaded(api, api_db)
    proxy.faults = [Cut(after=1_500_000), Cut(after=1_000_000)]
    cache = cache_in(tmp_path / "_base", proxy)
    assert cache.fetch(data).read_bytes() == DATA
    seen = proxy.file_requests()
    assert [s.range for s in seen] == [None, "bytes=1500000-", "bytes=2500000-"]
    assert [s.status for s in seen] == [200, 206, 206]
    assert sum(s.sent for s in seen) == len(DATA)  # no byte fetched twice
    cache.close()


def test_a_partial_download_left_by_a_killed_agent(api, api_db, proxy, tmp_path):
    data = uploaded(api, api_db)
    directory = tmp_path / "_base"
    directory.mkdir()
    partial = directory / f".{entry_name(data)}.partial"
    partial.write_bytes(DATA[:2_000_000])
    cache = cache_in(directory, proxy)
    assert cache.fetch(data).read_bytes() == DATA
    assert [s.range for s in proxy.file_requests()] == ["bytes=2000000-"]
    cache.close()


def test_a_partial_download_that_is_wrong_is_started_over(api, api_db, proxy, tmp_path):
    data = uploaded(api, api_db)
    other = uploaded(api, api_db, b"\1" * 4096)
    directory = tmp_path / "_base"
    directory.mkdir()
    (directory / f".{entry_name(data)}.partial").write_bytes(b"\7" * 1000)
    # As long as the image, but not its bytes: checked without a request, then fetched.
    (directory / f".{entry_name(other)}.partial").write_bytes(b"\2" * 4096)
    cache = cache_in(directory, proxy)
    assert cache.fetch(data).read_bytes() == DATA
    assert cache.fetch(other).read_bytes() == b"\1" * 4096
    assert [s.range for s in proxy.file_requests()] == ["bytes=1000-", None, None]
    cache.close()


def test_an_image_recorded_without_sha256_is_checked_by_its_md5(api, api_db, proxy, tmp_path):
    data = uploaded(api, api_db)

    def forget_sha256(session):
        session.execute(
            update(Image).where(Image.uuid == data.image_id).values(checksum_sha256=None)
        )

    api_db.run(forget_sha256, write=True)
    with api_db.read() as session:
        source = images.boot_source(session, data.image_id)
    assert source is not None and source.disk.checksum_sha256 is None
    proxy.faults = [Corrupt()]
    cache = cache_in(tmp_path / "_base", proxy)
    path = cache.fetch(source.disk)
    assert path.name == f"md5-{hashlib.md5(DATA).hexdigest()}"
    assert path.read_bytes() == DATA
    assert len(proxy.file_requests()) == 2  # the corrupt answer was refused
    cache.close()


def test_the_declared_format_is_checked(api, api_db, proxy, tmp_path):
    data = uploaded(api, api_db)

    def claim_qcow2(session):
        session.execute(
            update(Image).where(Image.uuid == data.image_id).values(disk_format="qcow2")
        )

    api_db.run(claim_qcow2, write=True)
    with api_db.read() as session:
        source = images.boot_source(session, data.image_id)
    assert source is not None
    cache = cache_in(tmp_path / "_base", proxy)
    with pytest.raises(ImageFetchFailed, match="is not a qcow2 image"):
        cache.fetch(source.disk)
    assert len(proxy.file_requests()) == 1  # the data was right: no second attempt
    assert cache.entries() == []
    cache.close()


def test_an_image_the_agent_may_not_see_or_that_is_gone(api, api_db, proxy, tmp_path):
    data = uploaded(api, api_db)
    cache = cache_in(tmp_path / "_base", proxy)
    cache.downloads.credentials = type(cache.downloads.credentials)(token="eve:other")  # type: ignore[call-arg]
    with pytest.raises(ImageFetchFailed, match="answered 404"):
        cache.fetch(data)
    assert len(proxy.file_requests()) == 1
    cache.close()


def test_the_next_api_server_when_one_is_down(api, api_db, proxy, tmp_path):
    data = uploaded(api, api_db)
    down = f"http://127.0.0.1:{free_port()}/image"
    downloads = ImageDownloader(servers=[down, proxy.url], sleep=lambda _s: None)
    cache = ImageCache(tmp_path / "_base", downloads)
    assert cache.fetch(data).read_bytes() == DATA
    assert len(proxy.file_requests()) == 1
    cache.close()


FETCH_IN_A_PROCESS = """
import json, sys
from pathlib import Path
from cloudseed.images.cache import ImageCache
from cloudseed.images.download import ImageDownloader
from cloudseed.images.service import ImageData
directory, url, data = sys.argv[1], sys.argv[2], ImageData(**json.loads(sys.argv[3]))
cache = ImageCache(Path(directory), ImageDownloader(servers=[url]))
print(cache.fetch(data))
"""


def test_concurrent_boots_of_one_image_fetch_it_once(api, api_db, proxy, tmp_path):
    """Four threads of one agent and two agent processes sharing the host's directory."""
    data = uploaded(api, api_db)
    proxy.pace = 0.02  # about a second and a half per download: they overlap
    directory = tmp_path / "_base"
    argv = [sys.executable, "-c", FETCH_IN_A_PROCESS, str(directory), proxy.url]
    processes = [
        subprocess.Popen([*argv, json.dumps(data.__dict__)], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    cache = cache_in(directory, proxy)
    found: list[Path] = []
    threads = [threading.Thread(target=lambda: found.append(cache.fetch(data))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    outputs = [p.communicate(timeout=60)[0].strip() for p in processes]
    assert [p.returncode for p in processes] == [0, 0]
    assert len(found) == 4 and {str(p) for p in found} == set(outputs)
    assert len(proxy.file_requests()) == 1
    assert found[0].read_bytes() == DATA
    cache.close()


def backdate(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_eviction_keeps_what_guests_use(api, api_db, proxy, tmp_path):
    used = uploaded(api, api_db, b"\1" * 4096)
    kernel = uploaded(api, api_db, b"\2" * 4096)
    unused = uploaded(api, api_db, b"\3" * 4096)
    young = uploaded(api, api_db, b"\4" * 4096)
    gone = uploaded(api, api_db, b"\5" * 4096)
    cache = cache_in(tmp_path / "_base", proxy)
    cache.use("guest-1", [entry_name(used), entry_name(kernel)])
    cache.use("guest-2", [entry_name(gone)])  # a guest deleted while its agent was away
    paths = {d.image_id: cache.fetch(d) for d in (used, kernel, unused, young, gone)}
    for d in (used, kernel, unused, gone):
        backdate(paths[d.image_id], 7200)
    for record in (tmp_path / "_base" / ".guests").iterdir():
        backdate(record, 7200)
    (tmp_path / "_base" / f".{'9' * 64}.partial").write_bytes(b"abandoned")
    backdate(tmp_path / "_base" / f".{'9' * 64}.partial", 7200)

    kept_all = cache.evict({"guest-1"}, since=time.time(), min_age=3600, remove=False)
    assert kept_all == [] and len(cache.entries()) == 5
    removed = cache.evict({"guest-1"}, since=time.time(), min_age=3600)
    assert sorted(removed) == sorted([entry_name(unused), entry_name(gone), f".{'9' * 64}.partial"])
    assert sorted(cache.entries()) == sorted(entry_name(d) for d in (used, kernel, young))
    # What guest-1 uses was marked used just now, so it outlives a later pass too.
    assert time.time() - paths[used.image_id].stat().st_mtime < 60
    assert sorted(p.name for p in (tmp_path / "_base" / ".guests").iterdir()) == ["guest-1"]

    # A guest recorded after the pass read the live guests counts as live.
    cache.use("guest-3", [entry_name(young)])
    backdate(paths[young.image_id], 7200)
    assert cache.evict({"guest-1"}, since=time.time() - 30, min_age=3600) == []
    assert entry_name(young) in cache.entries()

    # Gone from the host: the next pass may remove it, and a new boot fetches it again.
    cache.forget("guest-3")
    backdate(paths[young.image_id], 7200)
    assert cache.evict({"guest-1"}, since=time.time(), min_age=3600) == [entry_name(young)]
    assert cache.fetch(young).read_bytes() == b"\4" * 4096
    cache.close()
