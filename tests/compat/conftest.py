"""Fixtures for driving the real openstack CLI (python-openstackclient in its own venv) against
a running cloudseed: the binary, an identity stub, a recording proxy, and a ``Cli`` runner with
a clouds.yaml of its own per test."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudseed.db.engines import Database
from tests.support import databases, osc
from tests.support.cloudinit_run import (
    DEBIAN_PYTHON,
    DYNAMIC_VENDORDATA,
    SECRET,
    STATIC_VENDORDATA,
    _ensure_cloud_init,
)
from tests.support.databases import make_settings
from tests.support.metadata_relay import Target, vendordata_target
from tests.support.osc_cli import TOKEN, Cli
from tests.support.server import running_metadata


@pytest.fixture(scope="session")
def openstack() -> Path:
    try:
        return osc.openstack_binary()
    except osc.OscUnavailable as exc:
        if osc.required():
            pytest.fail(f"CLOUDSEED_REQUIRE_DBS=1 but python-openstackclient is unavailable: {exc}")
        pytest.skip(f"python-openstackclient cannot be installed here: {exc}")


@pytest.fixture()
def identity() -> Iterator[osc.IdentityStub]:
    with osc.identity_stub() as stub:
        yield stub


@pytest.fixture()
def proxy(api_url: str) -> Iterator[osc.RecordingProxy]:
    with osc.recording_proxy(api_url) as recorder:
        yield recorder


@pytest.fixture()
def cli(
    openstack: Path, proxy: osc.RecordingProxy, identity: osc.IdentityStub, tmp_path: Path
) -> Cli:
    config = tmp_path / "osc"
    config.mkdir()
    env = osc.cloud_env(config, f"{proxy.url}/v2.1", TOKEN, identity.url)
    return Cli(openstack, env, tmp_path)


@pytest.fixture(scope="session")
def cloud_init() -> Path:
    """The interpreter that runs cloud-init's code (installing the package if need be)."""
    problem = _ensure_cloud_init()
    if problem is not None:
        if databases.required():
            pytest.fail(f"CLOUDSEED_REQUIRE_DBS=1 but {problem}")
        pytest.skip(problem)
    return DEBIAN_PYTHON


@pytest.fixture()
def target() -> Iterator[Target]:
    with vendordata_target(DYNAMIC_VENDORDATA) as running:
        yield running


@pytest.fixture()
def metadata_url(
    database_url: str, api_db: Database, tmp_path: Path, target: Target
) -> Iterator[str]:
    """A metadata service in proxy mode with StaticJSON and DynamicJSON vendordata."""
    static = tmp_path / "vendor_data.json"
    static.write_text(json.dumps({"cloud-init": STATIC_VENDORDATA}))
    settings = make_settings(
        database_url,
        tmp_path / "state",
        CLOUDSEED_NEUTRON__SERVICE_METADATA_PROXY="true",
        CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET=SECRET,
        CLOUDSEED_API__VENDORDATA_PROVIDERS="StaticJSON,DynamicJSON",
        CLOUDSEED_API__VENDORDATA_JSONFILE_PATH=str(static),
        CLOUDSEED_API__VENDORDATA_DYNAMIC_TARGETS=f"cloud-init@{target.url}",
    )
    with running_metadata(settings, api_db=api_db) as url:
        yield url
