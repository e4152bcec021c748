"""Guests loaded ahead of their first request (``[metadata] load_ahead_seconds``): the compute
agent writes a boot to the change feed as a build, reboot or start finishes, and every metadata
worker loads that guest before it asks; a worker that starts loads the boots of the last
``load_ahead_seconds``. Loading ahead changes nothing a guest sees: a reboot keeps its
documents and their tags. Each worker counted with its own metrics (cache hits and misses), on
every backend, the service in this process beside the session's API and agent."""

from __future__ import annotations

import datetime as dt

import httpx
import pytest
from sqlalchemy import update

from cloudseed.db.base import utcnow
from cloudseed.db.engines import Database
from cloudseed.metadata import render, store
from cloudseed.metadata.app import MetadataApp
from cloudseed.metadata.documents import GuestDocuments
from cloudseed.servers.models import GuestChange
from cloudseed.settings import Settings
from tests.support.cloud import Cloud, b64, mv, wait_for
from tests.support.guests import Guest, boot
from tests.support.metrics import scrape, value
from tests.support.server import running_metadata_app, with_options
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.databases, pytest.mark.loopback_guests]

META = "/openstack/latest/meta_data.json"


@pytest.fixture()
def settings(migrated_settings: Settings, clean_cell_db: Database) -> Settings:
    return migrated_settings


def cache_counts(base: str) -> tuple[float, float]:
    """The worker's cache hits and misses so far."""
    samples = scrape(base)
    return (
        value(samples, "cloudseed_metadata_cache_hits_total"),
        value(samples, "cloudseed_metadata_cache_misses_total"),
    )


def cached(app: MetadataApp, uuid: str) -> GuestDocuments | None:
    """The worker's copy of ``uuid``'s guest, if it holds one (never loads)."""
    assert app.store is not None
    return app.store.cached_by_uuid(uuid)


def loaded(app: MetadataApp, guest: Guest) -> None:
    wait_until(
        lambda: cached(app, guest.id) is not None,
        what=f"{guest.id} loaded ahead",
    )


def not_rendered_now(*args: object, **kwargs: object) -> object:
    raise AssertionError("meta_data.json rendered at the request")


def first_request_is_a_hit(base: str, guest: Guest) -> str:
    """Ask for the guest's meta_data.json; it must come from the cache. Returns its tag."""
    hits, misses = cache_counts(base)
    with guest.client(base) as md:
        r = md.get(META)
    assert r.status_code == 200, r.text
    assert r.json()["uuid"] == guest.id
    assert cache_counts(base) == (hits + 1, misses)
    return r.headers["etag"]


def test_a_built_guest_is_loaded_before_it_asks_and_a_reboot_keeps_its_documents(
    api: httpx.Client,
    cloud: Cloud,
    settings: Settings,
    api_db: Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The last step counts the miss of a change that closely follows the reboot. With the
    # store's gathering window, the reboot's load-ahead could start after the change and load
    # the changed guest (right, but not the miss counted here): the boot's load goes at once.
    monkeypatch.setattr(store, "AHEAD_GATHER_SECONDS", 0.0)
    with running_metadata_app(settings, api_db=api_db) as (base, app):
        guest = boot(api, cloud, key_name="key1", user_data=b64("#cloud-config\n"))
        loaded(app, guest)
        # Prepared as it was loaded: its first meta_data.json is not rendered at its request.
        with monkeypatch.context() as m:
            m.setattr(render, "meta_data", not_rendered_now)
            tag = first_request_is_a_hit(base, guest)
        held = cached(app, guest.id)
        # A reboot boots the guest again: a boot, not a change. The copy stays (no reload,
        # no long-poll woken) and so does its tag.
        r = api.post(f"/v2.1/servers/{guest.id}/action", json={"reboot": {"type": "HARD"}})
        assert r.status_code == 202, r.text
        wait_for(api, guest.id, "ACTIVE", version="2.37")
        with guest.client(base) as md:
            r = md.get(META)
        assert r.headers["etag"] == tag
        assert cached(app, guest.id) is held
        # A change drops it; the change is no boot, so the next request loads it.
        r = api.put(
            f"/v2.1/servers/{guest.id}", json={"server": {"name": "renamed"}}, headers=mv("2.37")
        )
        assert r.status_code == 200, r.text
        wait_until(lambda: cached(app, guest.id) is None, what="the copy dropped")
        hits, misses = cache_counts(base)
        with guest.client(base) as md:
            assert md.get(META).json()["name"] == "renamed"
        assert cache_counts(base) == (hits, misses + 1)


def test_a_worker_that_starts_loads_the_recent_boots_only(
    api: httpx.Client, cloud: Cloud, settings: Settings, api_db: Database, cell_db: Database
) -> None:
    old, recent, gone = (boot(api, cloud, name=name) for name in ("old", "recent", "gone"))
    r = api.delete(f"/v2.1/servers/{gone.id}")
    assert r.status_code == 204, r.text
    wait_until(lambda: api.get(f"/v2.1/servers/{gone.id}").status_code == 404, what="deleted")
    # The old one booted longer ago than load_ahead_seconds (60 s here).
    cell_db.run(
        lambda session: session.execute(
            update(GuestChange)
            .where(GuestChange.instance_uuid == old.id)
            .values(changed_at=utcnow() - dt.timedelta(seconds=120))
        ),
        write=True,
    )
    ahead = with_options(settings, "metadata", load_ahead_seconds=60)
    with running_metadata_app(ahead, api_db=api_db) as (base, app):
        loaded(app, recent)
        first_request_is_a_hit(base, recent)
        assert cached(app, old.id) is None
        assert cached(app, gone.id) is None
        hits, misses = cache_counts(base)
        with old.client(base) as md:
            assert md.get(META).status_code == 200
        assert cache_counts(base) == (hits, misses + 1)


def test_nothing_is_loaded_ahead_when_turned_off(
    api: httpx.Client, cloud: Cloud, settings: Settings, api_db: Database
) -> None:
    before = boot(api, cloud, name="before")
    off = with_options(settings, "metadata", load_ahead_seconds=0)
    with running_metadata_app(off, api_db=api_db) as (base, app):
        after = boot(api, cloud, name="after")
        for guest in (before, after):
            hits, misses = cache_counts(base)
            assert cached(app, guest.id) is None
            with guest.client(base) as md:
                assert md.get(META).status_code == 200
            assert cache_counts(base) == (hits, misses + 1)
