"""The apps of one ``cloudseed serve`` worker (``serve.listeners`` served by
``serve.serve_sockets``) share the worker's API database, and so its announcer: a change
committed through the worker's compute API is what its metadata service answers as soon as
the API has answered, with no change feed to wait for (its poll set to a minute)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from cloudseed import listening, serve
from cloudseed.db.engines import Database
from cloudseed.settings import Settings
from cloudseed.types import ASGIApp
from tests.support.cloud import Cloud
from tests.support.guests import boot
from tests.support.server import with_options
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.databases, pytest.mark.loopback_guests]

META = "/openstack/latest/meta_data.json"


@contextmanager
def one_worker(settings: Settings, given: list[Database]) -> Iterator[dict[str, str]]:
    """The listeners of ``serve.listeners`` (API without compute agent) on loopback ports,
    served as one worker serves them; yields each one's base URL by kind, and notes in
    ``given`` the API database each app was built with."""

    def noting(listener: listening.Listener) -> listening.Listener:
        def factory(settings: Settings, api_db: Database | None) -> ASGIApp:
            assert api_db is not None
            given.append(api_db)
            return listener.factory(settings, api_db)

        return dataclasses.replace(listener, host="127.0.0.1", port=0, factory=factory)

    bound = [
        (listener, listening.bind("127.0.0.1", 0))
        for listener in map(noting, serve.listeners(settings, compute=False))
    ]
    urls = {listener.kind: f"http://127.0.0.1:{sock.getsockname()[1]}" for listener, sock in bound}
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    thread = threading.Thread(
        target=lambda: loop.run_until_complete(
            serve.serve_sockets(settings, bound, stop_event=stop)
        ),
        daemon=True,
    )
    thread.start()
    try:

        def answering() -> bool:
            assert thread.is_alive(), "the worker stopped"
            try:
                return (
                    httpx.get(urls["api"] + "/healthz").status_code == 200
                    and httpx.get(urls["metadata"] + "/").status_code == 200
                )
            except httpx.TransportError:
                return False

        wait_until(answering, what="both apps answering")
        yield urls
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=30)
        loop.close()
        for _, sock in bound:
            sock.close()


def test_a_change_through_the_api_is_what_the_metadata_service_answers_next(
    migrated_settings: Settings, api: httpx.Client, cloud: Cloud
) -> None:
    guest = boot(api, cloud)
    settings = with_options(migrated_settings, "metadata", change_poll_interval_ms=60000)
    given: list[Database] = []
    with one_worker(settings, given) as urls, guest.client(urls["metadata"]) as md:
        assert [db.name for db in given] == ["api", "api"]
        assert given[0] is given[1]
        assert md.get(META).json()["name"] != "renamed"  # cached now
        renamed = httpx.put(
            f"{urls['api']}/v2.1/servers/{guest.id}",
            json={"server": {"name": "renamed"}},
            headers={"X-Auth-Token": "alice:proj"},
        )
        assert renamed.status_code == 200, renamed.text
        assert md.get(META).json()["name"] == "renamed"
