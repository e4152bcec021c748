"""What ``cloudseed nova-metadata`` checks before anything listens (and before workers fork):
every database answers, Neutron's auth options load, the vendordata configuration holds. Each
problem is a ConfigError naming the option or the database (its password masked)."""

from __future__ import annotations

import asyncio
import logging

from cloudseed.nova_metadata.config import NovaMetadataConfig
from cloudseed.nova_metadata.databases import NovaDatabases
from cloudseed.nova_metadata.neutron import Neutron
from cloudseed.vendordata import Vendordata

log = logging.getLogger(__name__)


def preflight(config: NovaMetadataConfig) -> None:
    databases = NovaDatabases.open(config.api_database_url, config.database_url)
    try:
        databases.check(local=config.local_metadata_per_cell)
    finally:
        databases.dispose()
    Neutron(config.conf, retries=config.neutron_retries)
    vendordata = Vendordata(config.settings)
    asyncio.run(vendordata.aclose())
    if config.enable_proxy_headers_parsing and not config.settings.metadata.trusted_proxies:
        log.warning(
            "[oslo_middleware] enable_proxy_headers_parsing is on, but X-Forwarded-For is "
            "believed only from [cloudseed_metadata] trusted_proxies, which names none: "
            "callers are identified by their own address"
        )
    neutron = config.settings.neutron
    if neutron.service_metadata_proxy and not neutron.metadata_proxy_shared_secret:
        log.warning(
            "metadata_proxy_shared_secret is not configured, the metadata information "
            "returned by the proxy cannot be trusted"
        )
    if not neutron.service_metadata_proxy:
        log.info("direct mode: callers are identified by their fixed IP (asked of Neutron)")
