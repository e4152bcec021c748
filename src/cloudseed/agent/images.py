"""How a compute agent gets the images its guests boot from: the image cache of its host
(``images/cache.py``) filled over HTTP from the API, its credentials there, and the cache's
manager (eviction every ``[image_cache] manager_interval``).

Where from: ``[glance] api_servers``, else this node's own compute API (the embedded
deployment, where the agent runs inside ``cloudseed serve``). With what: under ``[api]
auth_strategy = noauth2`` the token ``admin`` (noauth2's administrator, who sees every image);
under ``keystone`` the token of cloudseed's service user from ``[service_user]`` (keystoneauth's
options, as nova.conf's section of that name; the user needs the ``admin`` role, which Glance's
and cloudseed's policies let see every image). The fake driver reads no image data: its agents
fetch only when ``api_servers`` is set (to test the cache with real processes).

Which guests are live, for eviction: the instances of this host in every cell that are not
deleted, and whatever the driver still has. When the database cannot be read, the pass is
skipped: nothing is removed on a guess.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select

from cloudseed.cells.service import CellDatabases
from cloudseed.compute.interfaces import BootImage, Driver
from cloudseed.errors import ConfigError
from cloudseed.images.cache import ImageCache
from cloudseed.images.download import Credentials, ImageDownloader, StaticToken
from cloudseed.images.service import boot_source
from cloudseed.periodic import Periodic
from cloudseed.servers.models import Instance
from cloudseed.settings import Settings, split_list

log = logging.getLogger(__name__)

SERVICE_USER = "service_user"
WILDCARDS = frozenset({"", "0.0.0.0", "::"})


class SessionCredentials(Credentials):
    """A keystoneauth session's token (``[service_user]``): cached by keystoneauth, fetched
    again shortly before it expires or after the API refused it."""

    def __init__(self, session: Any) -> None:
        self._session = session

    def headers(self) -> Mapping[str, str]:
        headers: Mapping[str, str] | None = self._session.get_auth_headers()
        if not headers:
            raise ConfigError(f"[{SERVICE_USER}]: keystoneauth returned no token")
        return headers

    def invalidate(self) -> None:
        self._session.invalidate()


def credentials(settings: Settings) -> Credentials:
    """The agent's credentials for the API (the module docstring says which)."""
    if settings.api.auth_strategy != "keystone":
        return StaticToken()
    options = settings.passthrough.get(SERVICE_USER, {})
    if not options.get("auth_type", "").strip():
        raise ConfigError(
            f"a compute agent under [api] auth_strategy = keystone downloads images with "
            f"cloudseed's service user: configure [{SERVICE_USER}] (auth_type, auth_url, "
            "username, password, ...)"
        )
    try:
        from cloudseed import service_auth
    except ModuleNotFoundError as exc:
        raise ConfigError(
            f"[{SERVICE_USER}] needs keystoneauth1: install cloudseed[keystone]"
        ) from (exc)
    session = service_auth.load_session(
        options, section=SERVICE_USER, default_timeout=60.0, app_name="cloudseed-compute"
    )
    return SessionCredentials(session)


def image_servers(settings: Settings) -> list[str]:
    """``[glance] api_servers``, else this node's own image endpoint."""
    configured = split_list(settings.glance.api_servers)
    if configured:
        return configured
    d = settings.default
    if d.osapi_compute_listen_port == 0:
        raise ConfigError(
            "the compute agent needs [glance] api_servers when [DEFAULT] "
            "osapi_compute_listen_port is 0 (picked at start)"
        )
    host = d.osapi_compute_listen
    if host in WILDCARDS:
        host = "::1" if host == "::" else "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return [f"http://{host}:{d.osapi_compute_listen_port}/image"]


def make_image_cache(settings: Settings, driver: Driver) -> ImageCache | None:
    """The host's image cache, or None when the agent needs none (the fake driver, no
    ``api_servers``)."""
    if driver.name == "fake" and not split_list(settings.glance.api_servers):
        return None
    return ImageCache(
        settings.state_dir / settings.image_cache.subdirectory_name,
        ImageDownloader(
            servers=image_servers(settings),
            credentials=credentials(settings),
            retries=settings.glance.num_retries,
            virtual_size_cap=settings.glance.image_virtual_size_cap,
        ),
    )


class AgentImages:
    """The images of one agent's guests: ``boot_image`` for an operation, the manager's passes
    in a thread of their own."""

    def __init__(
        self,
        settings: Settings,
        cells: CellDatabases,
        *,
        host: str,
        driver: Driver,
        cache: ImageCache | None,
    ) -> None:
        self.cells = cells
        self.host = host
        self.driver = driver
        self.cache = cache
        options = settings.image_cache
        self.interval = float(options.manager_interval)
        self.remove = options.remove_unused_base_images
        self.min_age = float(options.remove_unused_original_minimum_age_seconds)
        self._loop = Periodic(
            self.manage_once,
            interval=self.interval,
            name="cloudseed-image-cache",
            failure=f"image cache of {self.host}: pass failed",
        )

    def boot_image(self, guest: str, image_ref: str) -> BootImage | None:
        """The files ``guest`` boots ``image_ref`` from, on this host; None when the image is
        not registered (or has no data), or when this agent keeps no image files (fake)."""
        if self.cache is None:  # no read: a third of a fake build's own reads
            return None
        with self.cells.api_db.read() as session:  # images are registered there
            source = boot_source(session, image_ref)
        if source is None:
            return None
        return self.cache.boot_image(source, guest=guest)

    def forget(self, guest: str) -> None:
        if self.cache is not None:
            self.cache.forget(guest)

    def manage_once(self) -> list[str]:
        """One pass of the manager: the entries it removed."""
        if self.cache is None:
            return []
        since = time.time()
        try:
            live = self._live_guests()
        except Exception:
            log.exception(
                "image cache of %s: cannot tell which guests are live; no eviction", self.host
            )
            return []
        return self.cache.evict(live, since=since, min_age=self.min_age, remove=self.remove)

    def _live_guests(self) -> set[str]:
        live = set(self.driver.running())
        query = select(Instance.uuid).where(Instance.host == self.host, Instance.deleted == 0)
        for cell in self.cells.all_cells():
            with cell.read() as session:
                live.update(session.scalars(query))
        return live

    def start(self) -> None:
        if self.cache is not None:
            self._loop.start()

    def stop(self) -> None:
        self._loop.stop()

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()
