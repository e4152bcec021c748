"""nova.conf as the drop-in reads it: Nova's own options (names, types and defaults as Nova 34
declares them), read with oslo.config, the library nova.conf is written for (``$var``
interpolation, repeated keys, several ``--config-file``, the later winning), and cloudseed's
additions in a ``[cloudseed_metadata]`` section of the same files (all declared in
``options.py``).

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
serve``; ``[cloudseed_metadata] identity_*`` become its ``[identity]``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from oslo_config import cfg

from cloudseed.errors import ConfigError
from cloudseed.nova_metadata.options import GROUPS, NEUTRON, OURS, VENDORDATA_AUTH, register
from cloudseed.settings import SECRET_PASSTHROUGH_NAME, Secret, Settings, load_settings

CELL0_UUID = "00000000-0000-0000-0000-000000000000"
NOVA_TEMPLATE = "/nova/virt/interfaces.template"


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
    host_boot_misses: int  # hosts.py; 0: off
    security_groups_ttl: float  # seconds
    neutron_retries: int
    # [DEFAULT] injected_network_template, and whether it is Nova's own (the one rendered).
    injected_network_template: str
    # [cloudseed_metadata] connection: signed identity's keys; None: no signed identity.
    identity_database_url: Secret | None
    listen_host: str
    listen_port: int
    workers: int
    # The parsed files, for keystoneauth's loaders ([neutron] auth, session and endpoint).
    conf: cfg.ConfigOpts = dataclasses.field(repr=False, compare=False)

    @property
    def network_template(self) -> bool:
        """Whether network_config is rendered: the option names Nova's own template (by its
        place in Nova's package), which interfaces.py writes; empty, as in Nova, means none,
        and a template of the operator's own is not rendered (preflight warns)."""
        return self.injected_network_template.endswith(NOVA_TEMPLATE)

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
    conf = register()
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
    unknown = sorted(set(raw.get(OURS, {})) - {opt.dest for opt in GROUPS[OURS]})
    if unknown:
        where = origin[(OURS, unknown[0])]
        raise ConfigError(f"unknown option [{OURS}] {unknown[0]} in {where}")
    values = {
        (group, opt.dest): _value(conf, group, opt.dest)
        for group, opts in GROUPS.items()
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
    database = get("database", "connection")
    identity_url = get(OURS, "connection") or None
    if identity_url is not None and identity_url in (api_database, database):
        raise ConfigError(
            f"[{OURS}] connection must be a database of its own, not one of Nova's: the "
            "drop-in writes to it"
        )
    settings = _cloudseed_settings(
        get, raw, host=host, port=port, workers=count, identity=identity_url is not None
    )
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
        host_boot_misses=get(OURS, "host_boot_misses"),
        security_groups_ttl=float(cache_expiration if sg_ttl < 0 else sg_ttl),
        neutron_retries=get(NEUTRON, "http_retries"),
        injected_network_template=get("DEFAULT", "injected_network_template") or "",
        identity_database_url=Secret(identity_url) if identity_url else None,
        listen_host=host,
        listen_port=port,
        workers=count,
        conf=conf,
    )


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
    get: Any,
    raw: Mapping[str, Mapping[str, str]],
    *,
    host: str,
    port: int,
    workers: int,
    identity: bool,
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
        **_identity_overrides(get, host=host, port=port, enabled=identity),
    }
    settings = load_settings(environ={}, overrides=overrides)
    auth = {
        name: Secret(value) if SECRET_PASSTHROUGH_NAME.search(name) else value
        for name, value in raw.get(VENDORDATA_AUTH, {}).items()
    }
    return dataclasses.replace(settings, passthrough={VENDORDATA_AUTH: auth} if auth else {})


def _identity_overrides(
    get: Any, *, host: str, port: int, enabled: bool
) -> dict[tuple[str, str], Any]:
    """``[identity]`` of cloudseed's Settings from ``[cloudseed_metadata] identity_*``, with the
    drop-in's names in the one check cloudseed's loader would make with its own."""
    ttl = get(OURS, "identity_token_ttl_seconds")
    cache = get(OURS, "identity_key_cache_seconds")
    grace = get(OURS, "identity_key_grace_seconds")
    # A token signed just before a rotation must stay verifiable until it expires.
    if grace < ttl + 2 * cache:
        raise ConfigError(
            f"invalid value {grace} for [{OURS}] identity_key_grace_seconds: must be at least "
            f"identity_token_ttl_seconds + 2 * identity_key_cache_seconds ({ttl + 2 * cache})"
        )
    issuer = get(OURS, "identity_issuer")
    if enabled and not issuer:
        issuer = default_issuer(host, port)
    return {
        ("identity", "issuer"): issuer,
        ("identity", "region"): get(OURS, "identity_region"),
        ("identity", "token_ttl_seconds"): ttl,
        ("identity", "key_grace_seconds"): grace,
        ("identity", "key_cache_seconds"): cache,
        ("identity", "key_encryption_secret"): get(OURS, "identity_key_encryption_secret"),
    }


def default_issuer(host: str, port: int) -> str:
    """Where the listener is reached: its address (a wildcard replaced by this host's fully
    qualified name) and port. Relying parties find the discovery document and the keys there."""
    if host in ("", "0.0.0.0", "::"):
        host = socket.getfqdn()
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"
