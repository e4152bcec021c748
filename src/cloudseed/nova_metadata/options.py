"""The options the drop-in reads from nova.conf, declared once: Nova's own (names, types,
defaults and bounds as Nova 34 declares them) and cloudseed's additions in
``[cloudseed_metadata]``. ``config.py`` reads them; docs/nova-dropin.md documents each of ours
(tests/unit/nova_metadata/test_config.py holds the page to ``our_options``).
"""

from __future__ import annotations

import socket
from collections.abc import Sequence

from oslo_config import cfg, types

OURS = "cloudseed_metadata"
NEUTRON = "neutron"
VENDORDATA_AUTH = "vendordata_dynamic_auth"

# [api]: the metadata options of nova/conf/api.py, with Nova's types, defaults and bounds.
_API = [
    cfg.StrOpt(
        "config_drive_skip_versions",
        default=(
            "1.0 2007-01-19 2007-03-01 2007-08-29 2007-10-10 2007-12-15 2008-02-01 2008-09-01"
        ),
    ),
    cfg.ListOpt(
        "vendordata_providers",
        item_type=types.String(choices=["StaticJSON", "DynamicJSON"]),
        default=["StaticJSON"],
    ),
    cfg.ListOpt("vendordata_dynamic_targets", default=[]),
    cfg.StrOpt("vendordata_dynamic_ssl_certfile", default=""),
    cfg.IntOpt("vendordata_dynamic_connect_timeout", default=5, min=3),
    cfg.IntOpt("vendordata_dynamic_read_timeout", default=5, min=0),
    cfg.BoolOpt("vendordata_dynamic_failure_fatal", default=False),
    cfg.IntOpt("metadata_cache_expiration", default=15, min=0),
    cfg.BoolOpt("local_metadata_per_cell", default=False),
    cfg.StrOpt("dhcp_domain", default="novalocal"),
    cfg.StrOpt("vendordata_jsonfile_path"),
]
# [DEFAULT]: where the service listens (Nova's old names and defaults), and the options
# nova.conf files commonly refer to as $state_path, $my_ip, $host (nova/conf/paths.py,
# netconf.py), so that their references resolve as in Nova.
_DEFAULT = [
    cfg.StrOpt("pybasedir", default="/usr/lib/python3/dist-packages"),
    cfg.StrOpt("bindir", default="/usr/local/bin"),
    cfg.StrOpt("state_path", default="$pybasedir"),
    cfg.StrOpt("my_ip", default="127.0.0.1"),
    cfg.StrOpt("host", default=socket.gethostname()),
    cfg.StrOpt("metadata_listen", default="0.0.0.0"),
    cfg.PortOpt("metadata_listen_port", default=8775),
    cfg.IntOpt("metadata_workers", min=1),
    # nova/conf/compute.py: read by Nova's metadata API for network_config (interfaces.py).
    cfg.StrOpt("injected_network_template", default="$pybasedir/nova/virt/interfaces.template"),
]
# [neutron]: the proxy options of nova/conf/neutron.py; keystoneauth's are added below.
_NEUTRON = [
    cfg.IntOpt("http_retries", default=3, min=0),
    cfg.BoolOpt("service_metadata_proxy", default=False),
    cfg.StrOpt("metadata_proxy_shared_secret", default="", secret=True),
]
# oslo.middleware's, which Nova 34's metadata pipeline runs (http_proxy_to_wsgi).
_OSLO_MIDDLEWARE = [cfg.BoolOpt("enable_proxy_headers_parsing", default=False)]
# oslo.db's connection option, in both database groups.
_DATABASE = [
    cfg.StrOpt(
        "connection",
        secret=True,
        deprecated_opts=[cfg.DeprecatedOpt("sql_connection", group="DEFAULT")],
    )
]
_API_DATABASE = [cfg.StrOpt("connection", secret=True)]

# [cloudseed_metadata]: what cloudseed adds. Each is documented in docs/nova-dropin.md
# (tests/unit/nova_metadata/test_config.py holds the page to this list).
_OURS = [
    cfg.IntOpt(
        "change_poll_interval_ms",
        default=500,
        min=50,
        help="How often each worker looks for changed instances in every cell database.",
    ),
    cfg.IntOpt(
        "load_recent_seconds",
        default=300,
        min=0,
        help="At start, each worker loads the live instances updated in the last this many "
        "seconds (guests booting now), newest first, at most cache_size of them, with the "
        "documents cloud-init asks first; 0: none (each loads at its first request).",
    ),
    cfg.IntOpt(
        "host_boot_misses",
        default=3,
        min=0,
        help="When this many guests of one compute host ask for the first time within 10 s "
        "(the host came back and boots them all), each worker loads the host's other active "
        "instances ahead, at most 1,000; 0: never.",
    ),
    cfg.IntOpt(
        "cache_size",
        default=100000,
        min=1,
        help="Instances whose documents each worker keeps in memory (least recently used "
        "dropped first).",
    ),
    cfg.ListOpt(
        "trusted_proxies",
        default=[],
        help="Addresses or networks of HTTP proxies in front of the service whose "
        "X-Forwarded-For is believed when [oslo_middleware] enable_proxy_headers_parsing is "
        "on (direct mode); from anyone else it is ignored.",
    ),
    cfg.StrOpt(
        "token_secret",
        default="",
        secret=True,
        help="Key of EC2-style session tokens (PUT /latest/api/token); empty: one per start.",
    ),
    cfg.BoolOpt(
        "require_token",
        default=False,
        help="Refuse requests without a session token (EC2's HttpTokens=required).",
    ),
    cfg.BoolOpt("access_log", default=False, help="Log every request."),
    cfg.BoolOpt("metrics", default=True, help="Serve GET /metrics to metrics_allow_from."),
    cfg.ListOpt(
        "metrics_allow_from",
        default=["127.0.0.0/8", "::1"],
        help="Addresses or networks of the Prometheus scrapers.",
    ),
    cfg.IntOpt(
        "security_groups_cache_seconds",
        default=-1,
        min=-1,
        help="How long an instance's security groups from Neutron are kept; -1: [api] "
        "metadata_cache_expiration, as Nova keeps them.",
    ),
    # Signed instance identity (docs/identity.md): on when ``connection`` names a database.
    cfg.StrOpt(
        "connection",
        default="",
        secret=True,
        help="URL of cloudseed's own database (SQLite, PostgreSQL, MariaDB/MySQL), which "
        "holds the identity signing keys; empty: no signed identity (its paths are 404). One "
        "database for every drop-in host; `cloudseed nova-metadata --config-file ... db "
        "sync` creates it.",
    ),
    cfg.StrOpt(
        "identity_issuer",
        default="",
        help="iss of identity tokens and issuer of the discovery document, whose jwks_uri is "
        "built from it; empty: http://<metadata_listen>:<metadata_listen_port> (a wildcard "
        "address replaced by this host's fully qualified name).",
    ),
    cfg.StrOpt(
        "identity_region",
        default="",
        help="region of EC2 identity documents; empty: the instance's availability zone.",
    ),
    cfg.IntOpt(
        "identity_token_ttl_seconds",
        default=600,
        min=30,
        help="How long an identity token is valid.",
    ),
    cfg.IntOpt(
        "identity_key_grace_seconds",
        default=86400,
        min=60,
        help="How long a retired signing key stays published; at least "
        "identity_token_ttl_seconds plus twice identity_key_cache_seconds.",
    ),
    cfg.IntOpt(
        "identity_key_cache_seconds",
        default=10,
        min=0,
        help="How long each worker keeps the signing keys it read; a rotated key signs "
        "after twice this.",
    ),
    cfg.StrOpt(
        "identity_key_encryption_secret",
        default="",
        secret=True,
        help="Passphrase the private keys are encrypted with in the database; empty: stored "
        "unencrypted.",
    ),
]


GROUPS: dict[str, Sequence[cfg.Opt]] = {
    "DEFAULT": _DEFAULT,
    "api": _API,
    NEUTRON: _NEUTRON,
    "oslo_middleware": _OSLO_MIDDLEWARE,
    "database": _DATABASE,
    "api_database": _API_DATABASE,
    OURS: _OURS,
}


def register() -> cfg.ConfigOpts:
    """A ConfigOpts with every option the drop-in reads (keystoneauth's included)."""
    from keystoneauth1 import loading

    conf = cfg.ConfigOpts()
    for group, opts in GROUPS.items():
        conf.register_opts(opts, group=None if group == "DEFAULT" else group)
    # keystoneauth's options for [neutron] (the endpoint defaults as Nova sets them) and
    # [vendordata_dynamic_auth], registered as Nova registers them.
    loading.register_session_conf_options(conf, NEUTRON)
    loading.register_auth_conf_options(conf, NEUTRON)
    adapter = loading.get_adapter_conf_options(include_deprecated=False)
    cfg.set_defaults(adapter, valid_interfaces=["internal", "public"], service_type="network")
    conf.register_opts(adapter, group=NEUTRON)
    loading.register_session_conf_options(conf, VENDORDATA_AUTH)
    loading.register_auth_conf_options(conf, VENDORDATA_AUTH)
    return conf


def our_options() -> list[tuple[str, str]]:
    """The ``[cloudseed_metadata]`` options: (name, help)."""
    return [(opt.name, opt.help or "") for opt in _OURS]


def our_defaults() -> dict[str, object]:
    """The ``[cloudseed_metadata]`` options' defaults, by name."""
    return {opt.name: opt.default for opt in _OURS}
