"""Fixtures shared by the functional tests (tests/conftest.py has the databases, the compute API
and ``cloud``): metadata services (one per test, or more with options changed), an
identity-enabled compute API and metadata service pair, and vendordata targets (one set per
module; test_vendordata.py resets them per test with a ``targets`` of its own)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from cloudseed.db.engines import Database
from cloudseed.settings import Settings
from tests.support.guests import MetadataServer
from tests.support.identity import Identity, identity_settings
from tests.support.server import running_api, running_metadata, with_options
from tests.support.vendordata_targets import Targets, running_targets


@pytest.fixture()
def metadata_url(
    migrated_settings: Settings, api_db: Database, clean_cell_db: Database
) -> Iterator[str]:
    # One server per test: the tests empty the tables behind its back, which the change
    # feed (rightly) never hears of.
    settings = with_options(migrated_settings, "metadata", trusted_proxies="127.0.0.250")
    with running_metadata(settings, api_db=api_db) as url:
        yield url


@pytest.fixture()
def metadata_server(migrated_settings: Settings, api_db: Database) -> MetadataServer:
    """Start another metadata service with some options changed: ``(section, {name: v})``."""

    def start(*changes: tuple[str, dict[str, Any]]) -> AbstractContextManager[str]:
        settings = migrated_settings
        for section, values in changes:
            settings = with_options(settings, section, **values)
        return running_metadata(settings, api_db=api_db)

    return start


@pytest.fixture()
def servers(migrated_settings: Settings, clean_api_db: Database) -> Iterator[Identity]:
    settings = identity_settings(migrated_settings)
    with (
        running_api(settings, api_db=clean_api_db, compute=False) as api,
        running_metadata(settings, api_db=clean_api_db) as md,
    ):
        yield Identity(api, md)


@pytest.fixture(scope="module")
def targets() -> Iterator[Targets]:
    """DynamicJSON targets on a loopback port, started once per module."""
    with running_targets() as running:
        yield running
