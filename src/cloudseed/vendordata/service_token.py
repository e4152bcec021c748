"""The service token DynamicJSON sends as ``X-Auth-Token``: the token of cloudseed's own
service user, obtained by keystoneauth1 from ``[vendordata_dynamic_auth]`` (the options and
their names are keystoneauth's, as in nova.conf).

keystoneauth caches the token and fetches a new one shortly before it expires; its calls block,
so they run in one thread of our own: a slow Keystone then holds that thread and not the
thread pool the rest of the service needs, and concurrent calls on a cold start wait for the
one login instead of each logging in.

This module imports keystoneauth1, an optional dependency (the ``keystone`` extra); it is only
imported when ``[vendordata_dynamic_auth]`` is configured.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from keystoneauth1 import exceptions, loading, session

from cloudseed.errors import ConfigError
from cloudseed.vendordata.errors import TargetFailure

log = logging.getLogger(__name__)

SECTION = "vendordata_dynamic_auth"
# keystoneauth's session options (keystoneauth1.loading.session), as nova.conf spells them.
SESSION_OPTIONS = frozenset(
    {"cafile", "certfile", "keyfile", "insecure", "timeout", "collect_timing", "split_loggers"}
)
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def _flag(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in _TRUE | _FALSE:
        raise ConfigError(f"[{SECTION}] {name} = {value!r}: expected true or false")
    return lowered in _TRUE


def _config_names(opt: loading.Opt) -> list[str]:
    """The INI spellings of a keystoneauth option: its name with underscores, then the
    deprecated ones."""
    return [o.name.replace("-", "_") for o in [opt, *opt.deprecated]]


class ServiceToken:
    """Token headers for target calls, from a keystoneauth session."""

    def __init__(self, auth_session: session.Session) -> None:
        self._session = auth_session
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="vendordata-token")

    async def headers(self) -> Mapping[str, str]:
        loop = asyncio.get_running_loop()
        try:
            headers = await loop.run_in_executor(self._thread, self._session.get_auth_headers)
        except Exception as exc:  # keystoneauth's own errors, and requests' beneath them
            raise TargetFailure(f"no service token: {exc}") from None
        if not headers:
            raise TargetFailure("no service token: keystoneauth returned none")
        return headers

    async def invalidate(self) -> bool:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self._session.invalidate)

    def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)


def load_service_token(options: Mapping[str, str], *, default_timeout: float) -> ServiceToken:
    """A ServiceToken from the section's raw options (``auth_type`` must be set).

    Raises ConfigError for an unknown plugin, a missing required option or a bad value, so a
    mistake stops start-up instead of failing every target call.
    """
    auth_type = options["auth_type"].strip()
    try:
        loader: loading.BaseLoader[Any] = loading.get_plugin_loader(auth_type)
    except exceptions.NoMatchingPlugin:
        raise ConfigError(
            f"[{SECTION}] auth_type = {auth_type}: no such keystoneauth plugin"
        ) from None
    plugin_options = loader.get_options()
    known = {"auth_type"} | SESSION_OPTIONS
    known.update(name for opt in plugin_options for name in _config_names(opt))
    for name in sorted(set(options) - known):
        log.warning(
            "[%s] %s is not an option of keystoneauth's %s plugin (ignored)",
            SECTION,
            name,
            auth_type,
        )

    def value_of(opt: loading.Opt) -> Any:
        for name in _config_names(opt):
            if options.get(name, "").strip():
                raw = options[name].strip()
                if opt.type is bool:
                    return _flag(name, raw)
                return raw if opt.type is str else opt.type(raw)
        return None

    try:
        plugin = loader.load_from_options_getter(value_of)
    except exceptions.MissingRequiredOptions as exc:
        missing = ", ".join(opt.name.replace("-", "_") for opt in exc.options)
        raise ConfigError(f"[{SECTION}] auth_type = {auth_type} needs: {missing}") from None
    except (exceptions.ClientException, TypeError, ValueError) as exc:
        raise ConfigError(f"[{SECTION}]: {exc}") from None

    cafile = options.get("cafile", "").strip()
    insecure = _flag("insecure", options["insecure"]) if options.get("insecure") else False
    certfile = options.get("certfile", "").strip()
    keyfile = options.get("keyfile", "").strip()
    timeout = options.get("timeout", "").strip()
    try:
        timeout_seconds = float(timeout) if timeout else default_timeout
    except ValueError:
        raise ConfigError(f"[{SECTION}] timeout = {timeout!r}: expected seconds") from None
    auth_session = session.Session(
        auth=plugin,
        verify=cafile or not insecure,
        cert=(certfile, keyfile) if certfile and keyfile else certfile or None,
        timeout=timeout_seconds,
        app_name="cloudseed-vendordata",
        collect_timing=_flag("collect_timing", options.get("collect_timing") or "false"),
        split_loggers=_flag("split_loggers", options.get("split_loggers") or "false"),
    )
    return ServiceToken(auth_session)
