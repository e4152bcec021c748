"""nova.conf as the drop-in reads it: Nova's own options (names, types and defaults as Nova 34
declares them), read with oslo.config, the library nova.conf is written for (``$var``
interpolation, repeated keys, several ``--config-file``, the later winning), and cloudseed's
additions in a ``[cloudseed_metadata]`` section of the same files.

Everything is read and checked once, at start: a file that cannot be read or parsed, an
option of ours whose value is not of its type, or an unknown option in ``[cloudseed_metadata]``
is a ``ConfigError`` with one line naming the option and the file. The hundreds of Nova
options the drop-in does not use are left alone, as Nova's other services leave ours.

``[DEFAULT] metadata_listen``, ``metadata_listen_port`` and ``metadata_workers`` were Nova's
until its eventlet servers were removed (Nova 34 runs its metadata API under a WSGI server);
the drop-in reads them with their old defaults so an old nova.conf still says where it
listens. What the shared metadata code of cloudseed needs (vendordata, the proxy's secret,
the listener's limits, tokens, metrics) is handed on as a cloudseed ``Settings`` built from
these values (``settings``), so that code reads one typed object as it does in ``cloudseed
serve``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from oslo_config import cfg, types

from cloudseed.errors import ConfigError
from cloudseed.settings import SECRET_PASSTHROUGH_NAME, Secret, Settings, load_settings

OURS = "cloudseed_metadata"
NEUTRON = "neutron"
VENDORDATA_AUTH = "vendordata_dynamic_auth"
CELL0_UUID = "00000000-0000-0000-0000-000000000000"

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
]


def our_options() -> list[tuple[str, str]]:
    """The ``[cloudseed_metadata]`` options: (name, help)."""
    return [(opt.name, opt.help or "") for opt in _OURS]


def our_defaults() -> dict[str, object]:
    """The ``[cloudseed_metadata]`` options' defaults, by name."""
    return {opt.name: opt.default for opt in _OURS}


@dataclass(frozen=True)
class NovaMetadataConfig:
    """What ``cloudseed nova-metadata`` runs with; read once at start (``load``)."""

    files: tuple[str, ...]
    settings: Settings  # cloudseed's typed settings for the shared metadata code
    api_database_url: Secret
    database_url: Secret | None  # [database] connection: the cell templates' defaults
    local_metadata_per_cell: bool
    metadata_cache_expiration: int
    enable_proxy_headers_parsing: bool
    change_poll_interval: float  # seconds
    load_recent: float  # seconds: instances updated this recently are loaded at start
    security_groups_ttl: float  # seconds
    neutron_retries: int
    listen_host: str
    listen_port: int
    workers: int
    # The parsed files, for keystoneauth's loaders ([neutron] auth, session and endpoint).
    conf: cfg.ConfigOpts = dataclasses.field(repr=False, compare=False)

    @property
    def neutron_configured(self) -> bool:
        """Whether ``[neutron]`` names an auth plugin (``none`` counts: keystoneauth's
        noauth plugin with an endpoint_override)."""
        return bool(self.conf[NEUTRON].auth_type)


def load(
    files: list[str],
    *,
    listen: tuple[str, int] | None = None,
    workers: int | None = None,
) -> NovaMetadataConfig:
    """Read ``files`` (later ones win); ``listen`` and ``workers`` from the command line
    override the files. ConfigError, one line, for anything unreadable."""
    if not files:
        raise ConfigError("at least one --config-file is needed")
    conf = _options()
    try:
        conf(
            args=[arg for path in files for arg in ("--config-file", path)],
            project=None,
            default_config_files=[],
            default_config_dirs=[],
            # Only the files: OS_* variables in a service's environment are no nova.conf.
            use_env=False,
        )
    except cfg.ConfigFilesNotFoundError as exc:
        raise ConfigError(f"cannot read config file {', '.join(exc.config_files)}") from None
    except cfg.ConfigFilesPermissionDeniedError as exc:
        raise ConfigError(
            f"cannot read config file {', '.join(exc.config_files)}: permission denied"
        ) from None
    except cfg.ConfigFileParseError as exc:
        raise ConfigError(f"config file {exc.config_file} is not valid: {exc.msg}") from None
    except cfg.Error as exc:
        raise ConfigError(f"cannot read the configuration: {exc}") from None
    raw, origin = _raw_sections(files)
    unknown = sorted(set(raw.get(OURS, {})) - {opt.dest for opt in _OURS})
    if unknown:
        where = origin[(OURS, unknown[0])]
        raise ConfigError(f"unknown option [{OURS}] {unknown[0]} in {where}")
    values = {
        (group, opt.dest): _value(conf, group, opt.dest)
        for group, opts in _GROUPS.items()
        for opt in opts
    }

    def get(group: str, name: str) -> Any:
        return values[(group, name)]

    api_database = get("api_database", "connection")
    if not api_database:
        raise ConfigError(
            "[api_database] connection is not set: the drop-in reads Nova's API database"
        )
    host, port = listen or (
        get("DEFAULT", "metadata_listen"),
        get("DEFAULT", "metadata_listen_port"),
    )
    count = workers or get("DEFAULT", "metadata_workers") or os.cpu_count() or 1
    _value(conf, NEUTRON, "auth_type")  # keystoneauth's options are read when first used
    cache_expiration = get("api", "metadata_cache_expiration")
    sg_ttl = get(OURS, "security_groups_cache_seconds")
    settings = _cloudseed_settings(get, raw, host=host, port=port, workers=count)
    database = get("database", "connection")
    return NovaMetadataConfig(
        files=tuple(os.path.abspath(f) for f in files),
        settings=settings,
        api_database_url=Secret(api_database),
        database_url=Secret(database) if database else None,
        local_metadata_per_cell=get("api", "local_metadata_per_cell"),
        metadata_cache_expiration=cache_expiration,
        enable_proxy_headers_parsing=get("oslo_middleware", "enable_proxy_headers_parsing"),
        change_poll_interval=get(OURS, "change_poll_interval_ms") / 1000,
        load_recent=float(get(OURS, "load_recent_seconds")),
        security_groups_ttl=float(cache_expiration if sg_ttl < 0 else sg_ttl),
        neutron_retries=get(NEUTRON, "http_retries"),
        listen_host=host,
        listen_port=port,
        workers=count,
        conf=conf,
    )


_GROUPS: dict[str, Sequence[cfg.Opt]] = {
    "DEFAULT": _DEFAULT,
    "api": _API,
    NEUTRON: _NEUTRON,
    "oslo_middleware": _OSLO_MIDDLEWARE,
    "database": _DATABASE,
    "api_database": _API_DATABASE,
    OURS: _OURS,
}


def _options() -> cfg.ConfigOpts:
    from keystoneauth1 import loading

    conf = cfg.ConfigOpts()
    for group, opts in _GROUPS.items():
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


def _value(conf: cfg.ConfigOpts, group: str, name: str) -> Any:
    try:
        return conf[name] if group == "DEFAULT" else conf[group][name]
    except (cfg.ConfigFileValueError, ValueError) as exc:
        reason = str(exc).rpartition(" is not valid: ")[2] or str(exc)
        raise ConfigError(
            f"invalid value for [{group}] {name} in {_where(exc)}: {reason}"
        ) from None
    except cfg.Error as exc:  # a $reference to an unknown option, say
        raise ConfigError(f"cannot read [{group}] {name}: {exc}") from None


def _where(exc: Exception) -> str:
    """The file oslo.config names in a value error (its LocationInfo), or "the
    configuration"."""
    found = re.search(r"detail='([^']*)'", str(exc))
    return found[1] if found else "the configuration"


def _raw_sections(
    files: list[str],
) -> tuple[dict[str, dict[str, str]], dict[tuple[str, str], str]]:
    """Every section's options as written (the last value of each, the last file winning),
    and the file each came from: for the checks oslo.config does not make and the sections
    handed to keystoneauth."""
    merged: dict[str, dict[str, str]] = {}
    origin: dict[tuple[str, str], str] = {}
    for path in files:
        sections: dict[str, dict[str, list[str]]] = {}
        cfg.ConfigParser(path, sections).parse()
        for section, options in sections.items():
            for name, values in options.items():
                merged.setdefault(section, {})[name] = values[-1]
                origin[(section, name)] = os.path.abspath(path)
    return merged, origin


def _cloudseed_settings(
    get: Any, raw: Mapping[str, Mapping[str, str]], *, host: str, port: int, workers: int
) -> Settings:
    """cloudseed's Settings for the code this service shares with ``cloudseed serve``."""
    overrides: dict[tuple[str, str], Any] = {
        ("DEFAULT", "metadata_listen"): host,
        ("DEFAULT", "metadata_listen_port"): port,
        ("DEFAULT", "workers"): workers,
        ("api", "dhcp_domain"): get("api", "dhcp_domain"),
        ("api", "vendordata_providers"): ",".join(get("api", "vendordata_providers")),
        ("api", "vendordata_jsonfile_path"): get("api", "vendordata_jsonfile_path") or "",
        ("api", "vendordata_dynamic_targets"): ",".join(get("api", "vendordata_dynamic_targets")),
        ("api", "vendordata_dynamic_ssl_certfile"): get("api", "vendordata_dynamic_ssl_certfile"),
        ("api", "vendordata_dynamic_connect_timeout"): get(
            "api", "vendordata_dynamic_connect_timeout"
        ),
        ("api", "vendordata_dynamic_read_timeout"): get("api", "vendordata_dynamic_read_timeout"),
        ("api", "vendordata_dynamic_failure_fatal"): get("api", "vendordata_dynamic_failure_fatal"),
        ("neutron", "service_metadata_proxy"): get(NEUTRON, "service_metadata_proxy"),
        ("neutron", "metadata_proxy_shared_secret"): get(NEUTRON, "metadata_proxy_shared_secret"),
        ("metadata", "trusted_proxies"): ",".join(get(OURS, "trusted_proxies"))
        if get("oslo_middleware", "enable_proxy_headers_parsing")
        else "",
        ("metadata", "token_secret"): get(OURS, "token_secret"),
        ("metadata", "require_token"): get(OURS, "require_token"),
        ("metadata", "cache_size"): get(OURS, "cache_size"),
        ("metadata", "access_log"): get(OURS, "access_log"),
        ("metrics", "enabled"): get(OURS, "metrics"),
        ("metrics", "allow_from"): ",".join(get(OURS, "metrics_allow_from")),
    }
    settings = load_settings(environ={}, overrides=overrides)
    auth = {
        name: Secret(value) if SECRET_PASSTHROUGH_NAME.search(name) else value
        for name, value in raw.get(VENDORDATA_AUTH, {}).items()
    }
    return dataclasses.replace(settings, passthrough={VENDORDATA_AUTH: auth} if auth else {})
