"""The suite's cloud for a whole test module: the session's compute API (tests/conftest.py's
``api_url``) with tables emptied once at the start and at the end, the small cloud of
tests/support/cloud.py on the loopback network, and a metadata service in Neutron-proxy mode
of the module's own, for modules that boot their guests once and let several tests read
them (tests/compat/test_cloudbase_init.py, test_ignition.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import delete
from sqlalchemy.orm import Session

from cloudseed.db.base import ApiBase, CellBase
from cloudseed.db.engines import Database
from cloudseed.settings import Settings
from tests.support.cloud import Cloud, make_cloud
from tests.support.cloudinit_run import SECRET
from tests.support.databases import KEPT_TABLES, make_settings
from tests.support.guests import add_loop_network
from tests.support.server import running_metadata


@dataclass
class ModuleCloud:
    api: httpx.Client
    cloud: Cloud
    metadata_url: str  # in proxy mode: guests reach it through a relay (cloudinit_run.SECRET)
    settings: Settings  # the API server's: where its drives are


def empty(api_db: Database, cell_db: Database) -> None:
    for db, metadata in ((cell_db, CellBase.metadata), (api_db, ApiBase.metadata)):

        def work(session: Session, metadata: Any = metadata) -> None:
            for table in reversed(metadata.sorted_tables):
                if table.name not in KEPT_TABLES:
                    session.execute(delete(table))

        db.run(work, write=True)


@contextmanager
def module_cloud(
    *,
    api_url: str,
    api_db: Database,
    cell_db: Database,
    settings: Settings,
    database_url: str,
    tmp: Path,
    **metadata_options: str,
) -> Iterator[ModuleCloud]:
    """``metadata_options``: more CLOUDSEED_* settings for the metadata service."""
    empty(api_db, cell_db)
    proxy_settings = make_settings(
        database_url,
        tmp / "metadata-state",
        CLOUDSEED_NEUTRON__SERVICE_METADATA_PROXY="true",
        CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET=SECRET,
        **metadata_options,
    )
    try:
        with (
            httpx.Client(
                base_url=api_url, headers={"X-Auth-Token": "alice:proj"}, timeout=30
            ) as api,
            running_metadata(proxy_settings, api_db=api_db) as metadata_url,
        ):
            cloud = make_cloud(api, api_db, tmp)
            add_loop_network(api_db, cloud)
            yield ModuleCloud(api, cloud, metadata_url, settings)
    finally:
        empty(api_db, cell_db)
