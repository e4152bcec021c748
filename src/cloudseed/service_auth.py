"""The keystoneauth1 session of one of cloudseed's own service users, from a pass-through
section of keystoneauth's options as nova.conf spells them: ``[vendordata_dynamic_auth]``
(DynamicJSON's service token, ``vendordata/service_token.py``) and ``[service_user]`` (what a
compute agent downloads images from the API with, ``images/cache.py``).

A mistake (an unknown plugin, a missing required option, a bad value) is a ConfigError, so it
stops start-up instead of failing every call; an option the plugin does not know is logged.

This module imports keystoneauth1, an optional dependency (the ``keystone`` extra): import it
only when such a section is configured, and turn its ModuleNotFoundError into the advice to
install ``cloudseed[keystone]`` (``missing_keystoneauth``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from keystoneauth1 import exceptions, loading, session

from cloudseed.errors import ConfigError

log = logging.getLogger(__name__)

# keystoneauth's session options (keystoneauth1.loading.session), as nova.conf spells them.
SESSION_OPTIONS = frozenset(
    {"cafile", "certfile", "keyfile", "insecure", "timeout", "collect_timing", "split_loggers"}
)
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def _flag(section: str, name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in _TRUE | _FALSE:
        raise ConfigError(f"[{section}] {name} = {value!r}: expected true or false")
    return lowered in _TRUE


def _config_names(opt: loading.Opt) -> list[str]:
    """The INI spellings of a keystoneauth option: its name with underscores, then the
    deprecated ones."""
    return [o.name.replace("-", "_") for o in [opt, *opt.deprecated]]


def load_session(
    options: Mapping[str, str], *, section: str, default_timeout: float, app_name: str
) -> session.Session:
    """A keystoneauth session from the section's raw options (``auth_type`` must be set)."""
    auth_type = options["auth_type"].strip()
    try:
        loader: loading.BaseLoader[Any] = loading.get_plugin_loader(auth_type)
    except exceptions.NoMatchingPlugin:
        raise ConfigError(
            f"[{section}] auth_type = {auth_type}: no such keystoneauth plugin"
        ) from None
    plugin_options = loader.get_options()
    known = {"auth_type"} | SESSION_OPTIONS
    known.update(name for opt in plugin_options for name in _config_names(opt))
    for name in sorted(set(options) - known):
        log.warning(
            "[%s] %s is not an option of keystoneauth's %s plugin (ignored)",
            section,
            name,
            auth_type,
        )

    def value_of(opt: loading.Opt) -> Any:
        for name in _config_names(opt):
            if options.get(name, "").strip():
                raw = options[name].strip()
                if opt.type is bool:
                    return _flag(section, name, raw)
                return raw if opt.type is str else opt.type(raw)
        return None

    try:
        plugin = loader.load_from_options_getter(value_of)
    except exceptions.MissingRequiredOptions as exc:
        missing = ", ".join(opt.name.replace("-", "_") for opt in exc.options)
        raise ConfigError(f"[{section}] auth_type = {auth_type} needs: {missing}") from None
    except (exceptions.ClientException, TypeError, ValueError) as exc:
        raise ConfigError(f"[{section}]: {exc}") from None

    cafile = options.get("cafile", "").strip()
    insecure = _flag(section, "insecure", options["insecure"]) if options.get("insecure") else False
    certfile = options.get("certfile", "").strip()
    keyfile = options.get("keyfile", "").strip()
    timeout = options.get("timeout", "").strip()
    try:
        timeout_seconds = float(timeout) if timeout else default_timeout
    except ValueError:
        raise ConfigError(f"[{section}] timeout = {timeout!r}: expected seconds") from None
    return session.Session(
        auth=plugin,
        verify=cafile or not insecure,
        cert=(certfile, keyfile) if certfile and keyfile else certfile or None,
        timeout=timeout_seconds,
        app_name=app_name,
        collect_timing=_flag(section, "collect_timing", options.get("collect_timing") or "false"),
        split_loggers=_flag(section, "split_loggers", options.get("split_loggers") or "false"),
    )


def missing_keystoneauth(exc: ModuleNotFoundError, section: str) -> ConfigError:
    """The ConfigError for a configured ``section`` when keystoneauth1 is not installed; the
    error itself again when something else is missing."""
    if (exc.name or "").partition(".")[0] != "keystoneauth1":
        raise exc
    return ConfigError(f"[{section}] needs keystoneauth1: install cloudseed[keystone]")
