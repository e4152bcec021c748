"""What ``cloudseed nova-metadata`` checks before anything listens (and before workers fork):
every database answers, Neutron's auth options load, the vendordata configuration holds; with
``[cloudseed_metadata] connection``, cloudseed's own database answers, is at the newest
revision (``schema_current``, the CLI's: the schema package sits above this one) and holds a
signing key that opens (the first is made here, by one process, if there is none). Each
problem is a ConfigError (or SchemaMismatch) naming the option or the database (its password
masked)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from cloudseed.db.engines import Database
from cloudseed.nova_metadata.config import NovaMetadataConfig
from cloudseed.nova_metadata.databases import NovaDatabases
from cloudseed.nova_metadata.identity import NovaIdentity, check_database
from cloudseed.nova_metadata.neutron import Neutron
from cloudseed.vendordata import Vendordata

log = logging.getLogger(__name__)


def preflight(config: NovaMetadataConfig, *, schema_current: Callable[[Database], None]) -> None:
    databases = NovaDatabases.open(config.api_database_url, config.database_url)
    try:
        databases.check(local=config.local_metadata_per_cell)
    finally:
        databases.dispose()
    _check_identity(config, schema_current)
    Neutron(config.conf, retries=config.neutron_retries)
    vendordata = Vendordata(config.settings)
    asyncio.run(vendordata.aclose())
    if config.enable_proxy_headers_parsing and not config.settings.metadata.trusted_proxies:
        log.warning(
            "[oslo_middleware] enable_proxy_headers_parsing is on, but X-Forwarded-For is "
            "believed only from [cloudseed_metadata] trusted_proxies, which names none: "
            "callers are identified by their own address"
        )
    template = config.injected_network_template
    if template and not config.network_template:
        log.warning(
            "[DEFAULT] injected_network_template names a template of your own (%s): the "
            "drop-in renders only Nova's, so network_config and /openstack/content/0000 are "
            "left out for instances on injected networks",
            template,
        )
    neutron = config.settings.neutron
    if neutron.service_metadata_proxy and not neutron.metadata_proxy_shared_secret:
        log.warning(
            "metadata_proxy_shared_secret is not configured, the metadata information "
            "returned by the proxy cannot be trusted"
        )
    if not neutron.service_metadata_proxy:
        log.info("direct mode: callers are identified by their fixed IP (asked of Neutron)")


def _check_identity(config: NovaMetadataConfig, schema_current: Callable[[Database], None]) -> None:
    if config.identity_database_url is None:
        log.info("no [cloudseed_metadata] connection: signed instance identity is not served")
        return
    signed = NovaIdentity.open(config)
    try:
        check_database(signed.db)
        schema_current(signed.db)
        kid = signed.check()
    finally:
        signed.close()
    log.info(
        "signed instance identity: signing key %s; issuer %s",
        kid,
        config.settings.identity.issuer,
    )
