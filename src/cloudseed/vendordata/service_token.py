"""The service token DynamicJSON sends as ``X-Auth-Token``: the token of cloudseed's own
service user, obtained by keystoneauth1 from ``[vendordata_dynamic_auth]`` (the options and
their names are keystoneauth's, as in nova.conf: ``service_auth.py`` reads them).

keystoneauth caches the token and fetches a new one shortly before it expires; its calls block,
so they run in one thread of our own: a slow Keystone then holds that thread and not the
thread pool the rest of the service needs, and concurrent calls on a cold start wait for the
one login instead of each logging in.

This module imports keystoneauth1, an optional dependency (the ``keystone`` extra); it is only
imported when ``[vendordata_dynamic_auth]`` is configured.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

from keystoneauth1 import session

from cloudseed.service_auth import load_session
from cloudseed.vendordata.errors import TargetFailure

SECTION = "vendordata_dynamic_auth"


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
    """A ServiceToken from the section's raw options (``auth_type`` must be set); ConfigError
    for a mistake in them (``service_auth.load_session``)."""
    return ServiceToken(
        load_session(
            options,
            section=SECTION,
            default_timeout=default_timeout,
            app_name="cloudseed-vendordata",
        )
    )
