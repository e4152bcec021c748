"""Loading: defaults < config file (INI, nova.conf layout) < ``CLOUDSEED_*`` environment <
command-line flags, each raw value cast to its option's type and checked, naming where it came
from; then the checks of list-valued options item by item."""

from __future__ import annotations

import configparser
import ipaddress
import math
import os
import re
import types
import typing
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from cloudseed.errors import ConfigError
from cloudseed.settings._options import Secret, parse_port_range, split_list
from cloudseed.settings._registry import (
    ENV_PREFIX,
    SECTIONS,
    OptionInfo,
    Settings,
    all_options,
)

# Environment variables with our prefix that are not settings (the test suite's own start
# with CLOUDSEED_TEST_).
NON_SETTING_ENV = frozenset({"CLOUDSEED_CONFIG", "CLOUDSEED_REQUIRE_DBS"})
NON_SETTING_ENV_PREFIX = "CLOUDSEED_TEST_"
# Sections handed to a library as they are; their option names are the library's business.
PASSTHROUGH_SECTIONS = frozenset({"keystone_authtoken", "service_user", "vendordata_dynamic_auth"})

# Pass-through options whose values are secrets, by the name the library gives them
# (keystonemiddleware's password, admin_token, memcache_secret_key; keystoneauth's password,
# application_credential_secret, token ...).
SECRET_PASSTHROUGH_NAME = re.compile(r"(password|secret|secret_key|_token|^token)$")


def load_settings(
    *,
    config_file: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[tuple[str, str], Any] | None = None,
) -> Settings:
    """Build Settings from defaults, the config file, the environment and explicit overrides.

    ``overrides`` are the command-line flags, keyed by (INI section, option name).
    ``config_file`` falls back to ``CLOUDSEED_CONFIG`` from ``environ``.
    Raises ConfigError for an unreadable file or an invalid value; unknown options become
    ``Settings.warnings``.
    """
    environ = os.environ if environ is None else environ
    config_file = config_file or environ.get("CLOUDSEED_CONFIG") or None
    options = {(o.section, o.name): o for o in all_options()}
    raw: dict[tuple[str, str], tuple[Any, str]] = {}  # value, where it came from
    warnings: list[str] = []
    passthrough: dict[str, dict[str, str]] = {}

    if config_file is not None:
        parser = _read_ini(Path(config_file))
        for section in ["DEFAULT", *parser.sections()]:
            items = (
                parser.defaults()
                if section == "DEFAULT"
                else {
                    k: v for k, v in parser.items(section, raw=True) if k not in parser.defaults()
                }
            )
            if section in PASSTHROUGH_SECTIONS:
                passthrough[section] = {
                    name: Secret(value) if SECRET_PASSTHROUGH_NAME.search(name) else value
                    for name, value in items.items()
                }
                continue
            for name, value in items.items():
                if (section, name) in options:
                    raw[(section, name)] = (value, f"{config_file} [{section}] {name}")
                else:
                    warnings.append(f"unknown option [{section}] {name} in {config_file} (ignored)")

    by_env = {o.env_var: key for key, o in options.items()}
    for var, value in environ.items():
        if (
            not var.startswith(ENV_PREFIX)
            or var in NON_SETTING_ENV
            or var.startswith(NON_SETTING_ENV_PREFIX)
        ):
            continue
        if var in by_env:
            raw[by_env[var]] = (value, f"environment variable {var}")
        else:
            warnings.append(f"unknown environment variable {var} (ignored)")

    for key, value in (overrides or {}).items():
        if key not in options:
            raise ConfigError(f"unknown option [{key[0]}] {key[1]}")
        if value is not None:
            raw[key] = (value, f"command-line option for [{key[0]}] {key[1]}")

    sections: dict[str, dict[str, Any]] = {attr: {} for attr in SECTIONS}
    attr_of = {section: attr for attr, section in SECTIONS.items()}
    for key, (value, origin) in raw.items():
        sections[attr_of[key[0]]][key[1]] = _cast(options[key], value, origin)

    hints = typing.get_type_hints(Settings)
    built = {attr: hints[attr](**values) for attr, values in sections.items()}
    settings = Settings(**built, passthrough=passthrough, warnings=tuple(warnings))
    _check_lists(settings)
    return settings


def _check_lists(settings: Settings) -> None:
    """Comma-separated options are checked item by item, so a typo stops start-up."""

    def fail(section: str, name: str, item: str, why: str) -> None:
        raise ConfigError(f"invalid item {item!r} in [{section}] {name}: {why}")

    apis = split_list(settings.default.enabled_apis)
    for item in apis:
        if item not in ("osapi_compute", "metadata"):
            fail("DEFAULT", "enabled_apis", item, "must be osapi_compute or metadata")
    if not apis:
        raise ConfigError("[DEFAULT] enabled_apis is empty: name osapi_compute, metadata or both")
    for item in split_list(settings.api.vendordata_providers):
        if item not in ("StaticJSON", "DynamicJSON"):
            fail("api", "vendordata_providers", item, "must be StaticJSON or DynamicJSON")
    names: set[str] = set()
    for item in split_list(settings.api.vendordata_dynamic_targets):
        name, at, url = item.partition("@")
        if not at or not name or not url.startswith(("http://", "https://")):
            fail("api", "vendordata_dynamic_targets", item, "must be name@http(s)://...")
        if name in names or name == "static":
            fail("api", "vendordata_dynamic_targets", item, f"the name {name!r} is taken")
        names.add(name)
    networks = (("metadata", "trusted_proxies"), ("metrics", "allow_from"))
    for section, name in networks:
        for item in split_list(getattr(getattr(settings, section), name)):
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                fail(section, name, item, "not an address or network")
    for item in split_list(settings.glance.api_servers):
        parts = urllib.parse.urlsplit(item)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query:
            fail("glance", "api_servers", item, "must be http(s)://host[:port][/path]")
    name = settings.image_cache.subdirectory_name
    if not name or "/" in name or name in (".", ".."):
        raise ConfigError(
            f"invalid value {name!r} for [image_cache] subdirectory_name: a directory name"
        )
    url = settings.qemu.metadata_url
    if url and not _is_host_port_url(url):
        raise ConfigError(
            f"invalid value {url!r} for [qemu] metadata_url: must be http://host:port"
        )
    cpu_model = settings.qemu.cpu_model
    if cpu_model and not _CPU_MODEL.fullmatch(cpu_model):
        raise ConfigError(
            f"invalid value {cpu_model!r} for [qemu] cpu_model: a QEMU CPU model name, "
            "optionally with +feature/-feature flags (e.g. qemu64, max, Haswell,-hle)"
        )
    try:
        parse_port_range(settings.qemu.ssh_forward_ports)
    except ValueError as exc:
        raise ConfigError(
            f"invalid value {settings.qemu.ssh_forward_ports!r} for [qemu] ssh_forward_ports: {exc}"
        ) from None
    try:
        ipaddress.IPv4Address(settings.qemu.ssh_forward_address)
    except ValueError:
        raise ConfigError(
            f"invalid value {settings.qemu.ssh_forward_address!r} for [qemu] "
            "ssh_forward_address: must be an IPv4 address"
        ) from None
    for item in split_list(settings.libvirt.inject_handlers):
        if item not in ("guestfs", "debugfs", "loop", "nbd"):
            fail("libvirt", "inject_handlers", item, "must be guestfs, debugfs, loop or nbd")
    seed_url = urllib.parse.urlsplit(settings.metadata.nocloud_seed_url)
    if (
        seed_url.scheme not in ("http", "https")
        or not seed_url.hostname
        or not seed_url.path.endswith("/")
        or seed_url.query
        or seed_url.fragment
    ):
        raise ConfigError(
            f"invalid value {settings.metadata.nocloud_seed_url!r} for [metadata] "
            "nocloud_seed_url: must be http(s)://host[:port]/path/ (ending in /)"
        )
    identity = settings.identity
    # A token signed just before a rotation must stay verifiable until it expires.
    least = identity.token_ttl_seconds + 2 * identity.key_cache_seconds
    if identity.key_grace_seconds < least:
        raise ConfigError(
            f"invalid value {identity.key_grace_seconds} for [identity] key_grace_seconds: "
            f"must be at least token_ttl_seconds + 2 * key_cache_seconds ({least})"
        )


def _is_host_port_url(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return False
    return (
        parts.scheme == "http"
        and bool(parts.hostname)
        and port is not None
        and parts.path in ("", "/")
        and not parts.query
        and not parts.fragment
    )


def _read_ini(path: Path) -> configparser.RawConfigParser:
    # Interpolation off: a password with '%' in it must mean itself.
    parser = configparser.RawConfigParser(strict=True)
    try:
        with path.open(encoding="utf-8") as fh:
            parser.read_file(fh)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    except (configparser.Error, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path} is not a valid INI file: {exc}") from exc
    return parser


# A -cpu value: a model name and its feature flags, nothing that could start another option.
_CPU_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*(,[+-]?[A-Za-z0-9_.-]+(=[A-Za-z0-9_.-]+)?)*")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _cast(opt: OptionInfo, value: Any, origin: str) -> Any:
    """Turn a raw value into the option's type, or stop with a message naming its origin
    (and the value, unless the option is secret)."""
    target = opt.type
    shown = "(secret value)" if opt.secret else repr(value)
    if isinstance(target, types.UnionType) or typing.get_origin(target) is Literal:
        raise AssertionError(f"unsupported option type for {opt.name}")  # pragma: no cover
    try:
        if target is bool:
            if isinstance(value, bool):
                result: Any = value
            elif str(value).strip().lower() in _TRUE:
                result = True
            elif str(value).strip().lower() in _FALSE:
                result = False
            else:
                raise ValueError("expected true or false")
        elif target is int:
            if isinstance(value, bool):
                raise ValueError("expected an integer")
            result = int(str(value).strip(), 10) if not isinstance(value, int) else value
        elif target is float:
            if isinstance(value, bool):
                raise ValueError("expected a number")
            result = float(str(value).strip())
            if not math.isfinite(result) or result <= 0:
                raise ValueError("expected a positive number")
        else:
            result = str(value).strip()
    except ValueError as exc:
        raise ConfigError(
            f"invalid value {shown} for [{opt.section}] {opt.name} (from {origin}): {exc}"
        ) from exc
    if opt.choices and result not in opt.choices:
        raise ConfigError(
            f"invalid value {shown} for [{opt.section}] {opt.name} "
            f"(from {origin}): must be one of {', '.join(opt.choices)}"
        )
    if opt.minimum is not None and result < opt.minimum:
        raise ConfigError(
            f"invalid value {shown} for [{opt.section}] {opt.name} "
            f"(from {origin}): must be at least {opt.minimum}"
        )
    if opt.maximum is not None and result > opt.maximum:
        raise ConfigError(
            f"invalid value {shown} for [{opt.section}] {opt.name} "
            f"(from {origin}): must be at most {opt.maximum}"
        )
    if opt.secret and isinstance(result, str):
        result = Secret(result)
    return result
