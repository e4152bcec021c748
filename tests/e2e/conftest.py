"""End-to-end scenarios boot real guests under QEMU: minutes each, so they run only from
``make e2e`` (which builds the image and sets ``CLOUDSEED_TEST_E2E_DIR``), never in
``make test``."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from tests.e2e import bridged
from tests.e2e.harness import E2ECloud, tidy
from tests.support import databases, keys
from tests.support.metadata_relay import Target, vendordata_target

E2E_DIR = os.environ.get("CLOUDSEED_TEST_E2E_DIR")
VENDOR_SCRIPT = '#!/bin/sh\necho "E2E VENDOR run=vendor from-dynamic-target" > /dev/ttyS0\n'


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if E2E_DIR:
        return
    skip = pytest.mark.skip(reason="boots real guests for minutes: run with `make e2e`")
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def vendordata() -> Iterator[Target]:
    # The target is named cloud-init, so its answer is what cloud-init takes from
    # vendor_data2.json.
    with vendordata_target(VENDOR_SCRIPT) as target:
        yield target


@contextmanager
def e2e_database(work: Path) -> Iterator[str]:
    """The cloud's database: PostgreSQL, as a deployment of several hosts has it, when the
    server answers (CI: it must); else SQLite in a directory of its own beside the data
    directory, which an extra host (scenario 6) must not see."""
    try:
        with databases.scratch_database("postgresql", str(work)) as url:
            yield url
            return
    except databases.Unavailable:
        if databases.required():
            raise
    (work / "db").mkdir()
    yield f"sqlite:///{work}/db/cloudseed.sqlite"


@pytest.fixture(scope="session")
def e2e_cloud(vendordata: Target) -> Iterator[tuple[E2ECloud, dict[str, str]]]:
    assert E2E_DIR is not None
    image_dir = Path(E2E_DIR).resolve()
    work = Path(tempfile.mkdtemp(prefix="cloudseed-e2e-"))
    with ExitStack() as stack:  # the database is dropped last
        cloud = E2ECloud(
            image_dir=image_dir,
            work=work,
            vendordata_url=vendordata.url,
            database_url=stack.enter_context(e2e_database(work)),
        )
        try:
            ids = cloud.set_up()
            with cloud.serving():
                yield cloud, ids
            assert cloud.leftover_qemus() == [], "QEMU still running after the service stopped"
        finally:
            cloud.client.close()
            log = work / "cloudseed.log"
            if log.exists():
                (image_dir / "last-run.log").write_bytes(log.read_bytes())
            tidy(work)


@pytest.fixture(scope="session")
def keypairs(e2e_cloud: tuple[E2ECloud, dict[str, str]]) -> dict[str, str]:
    """key1 and key2, for every scenario: name to public key."""
    cloud, _ = e2e_cloud
    pairs = {"key1": keys.ed25519_public("e2e-one"), "key2": keys.ed25519_public("e2e-two")}
    for name, public_key in pairs.items():
        cloud.add_keypair(name, public_key)
    return pairs


@pytest.fixture(scope="session")
def bridged_networks(e2e_cloud: tuple[E2ECloud, dict[str, str]]) -> dict[str, str]:
    """The bridged networks of scenarios 7 (IPv4) and 8 (IPv6 only): "ipv4"/"ipv6" to id."""
    cloud, _ = e2e_cloud
    return bridged.register_networks(cloud)


@pytest.fixture(scope="session")
def ipv6_image(e2e_cloud: tuple[E2ECloud, dict[str, str]]) -> str:
    """The image again, its cloud-init told to ask fe80::a9fe:a9fe (bridged.py says why)."""
    cloud, _ = e2e_cloud
    return bridged.register_ipv6_image(cloud)


@pytest.fixture(scope="session")
def timings() -> Iterator[dict[str, dict[str, float]]]:
    found: dict[str, dict[str, float]] = {}
    yield found
    if E2E_DIR and found:
        path = Path(E2E_DIR) / "timings.json"
        path.write_text(json.dumps(found, indent=2) + "\n")
        for name, values in found.items():
            print(f"\ne2e timing {name}: {values}")
