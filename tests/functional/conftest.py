"""Fixtures shared by the functional tests: metadata services (one per test, or more
with options changed) and an identity-enabled API and metadata service pair."""

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


@pytest.fixture()
def metadata_url(migrated_settings: Settings, clean_cell_db: Database) -> Iterator[str]:
    # One server per test: the tests empty the tables behind its back, which the change
    # feed (rightly) never hears of.
    settings = with_options(migrated_settings, "metadata", trusted_proxies="127.0.0.250")
    with running_metadata(settings) as url:
        yield url


@pytest.fixture()
def metadata_server(migrated_settings: Settings) -> MetadataServer:
    """Start another metadata service with some options changed: ``(section, {name: v})``."""

    def start(*changes: tuple[str, dict[str, Any]]) -> AbstractContextManager[str]:
        settings = migrated_settings
        for section, values in changes:
            settings = with_options(settings, section, **values)
        return running_metadata(settings)

    return start


@pytest.fixture()
def servers(migrated_settings: Settings, clean_api_db: Database) -> Iterator[Identity]:
    settings = identity_settings(migrated_settings)
    with running_api(settings, compute=False) as api, running_metadata(settings) as md:
        yield Identity(api, md)
