"""GET /metrics on both listeners (docs/metrics.md), scraped over real HTTP: requests counted
by route template, metadata documents, the guest cache, the change feed, vendordata targets and
operations; who may scrape; and the sum over the workers of a real `cloudseed serve --workers 2`.
"""

from __future__ import annotations

import dataclasses
import json
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.mmap_dict import MmapedDict

from cloudseed.db.engines import Database
from cloudseed.settings import Settings
from tests.support import databases
from tests.support.cloud import Cloud
from tests.support.cluster import healthy, running_cluster, wait
from tests.support.guests import boot
from tests.support.metrics import SCRAPER, scrape, value
from tests.support.ports import free_port
from tests.support.server import running_api, running_metadata, with_options
from tests.support.vendordata_targets import Targets
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.loopback_guests,
    pytest.mark.databases,
    pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True),
]


def per_worker(path: Path, route: str) -> float:
    """A worker's count of GET ``route`` answered 200 on the API listener, from its own file."""
    total = 0.0
    for key, count, _timestamp, _pos in MmapedDict.read_all_values_from_file(str(path)):
        _name, sample, labels, _help = json.loads(key)
        if sample == "cloudseed_http_requests_total" and labels == {
            "listener": "api",
            "route": route,
            "method": "GET",
            "status": "200",
        }:
            total += count
    return total


def metrics_settings(settings: Settings, **values: Any) -> Settings:
    return dataclasses.replace(settings, metrics=dataclasses.replace(settings.metrics, **values))


# -- the compute API ----------------------------------------------------------------------


def test_api_requests_by_route_template(
    migrated_settings: Settings, api_db: Database, api: httpx.Client
) -> None:
    with running_api(migrated_settings, api_db=api_db, compute=False) as base:
        auth = {"X-Auth-Token": "alice:proj"}
        for _ in range(3):
            assert httpx.get(f"{base}/v2.1/os-keypairs", headers=auth).status_code == 200
        assert httpx.get(f"{base}/v2.1/proj/os-keypairs", headers=auth).status_code == 200
        assert httpx.get(f"{base}/v2.1/os-keypairs/nope", headers=auth).status_code == 404
        assert httpx.get(f"{base}/v2.1/no-such-thing/at/all", headers=auth).status_code == 404
        samples = scrape(base)
    requests = "cloudseed_http_requests_total"
    common = {"listener": "api", "method": "GET"}
    assert value(samples, requests, route="/v2.1/os-keypairs", status="200", **common) == 3
    assert (
        value(samples, requests, route="/v2.1/{project_id}/os-keypairs", status="200", **common)
        == 1
    )
    assert value(samples, requests, route="/v2.1/os-keypairs/{name}", status="404", **common) == 1
    assert value(samples, requests, route="unmatched", status="404", **common) == 1
    # Raw paths never become labels.
    assert not any("nope" in str(key) or "no-such-thing" in str(key) for key in samples)
    count = value(
        samples,
        "cloudseed_http_request_duration_seconds_count",
        listener="api",
        route="/v2.1/os-keypairs",
    )
    assert count == 3
    # Operations are counted in the cells at scrape time, every state present.
    for state in ("queued", "running", "failed"):
        assert ("cloudseed_operations", frozenset({("state", state)})) in samples


def test_api_refuses_other_addresses_with_a_fault(migrated_settings: Settings) -> None:
    settings = metrics_settings(migrated_settings, allow_from="127.0.0.2/32")
    with running_api(settings, compute=False) as base:
        r = httpx.get(f"{base}/metrics")
        assert r.status_code == 403
        assert r.json()["forbidden"]["message"] == "Metrics are not served to this address."
        # The scraper allowed needs no token.
        assert "cloudseed_http_requests_total" in str(scrape(base, source="127.0.0.2"))


def test_api_metrics_disabled(migrated_settings: Settings) -> None:
    settings = metrics_settings(migrated_settings, enabled=False)
    with running_api(settings, compute=False) as base:
        r = httpx.get(f"{base}/metrics", headers={"X-Auth-Token": "alice:proj"})
        assert r.status_code == 404
        assert "itemNotFound" in r.json()


# -- the metadata listener ---------------------------------------------------------------


def test_metadata_documents_cache_and_change_lag(
    api: httpx.Client, cloud: Cloud, migrated_settings: Settings, api_db: Database
) -> None:
    guest = boot(api, cloud)
    settings = metrics_settings(migrated_settings, allow_from=f"{SCRAPER}/32")
    # Nothing loaded ahead: the guest's first request is the miss counted below.
    settings = with_options(settings, "metadata", load_ahead_seconds=0)
    with running_metadata(settings, api_db=api_db) as base, guest.client(base) as md:
        for _ in range(4):
            assert md.get("/openstack/latest/meta_data.json").status_code == 200
        assert md.get("/openstack/2018-08-27/meta_data.json").status_code == 200
        assert md.get("/latest/meta-data/hostname").status_code == 200
        assert md.get("/latest/meta-data/no-such-key").status_code == 404
        samples = scrape(base)
        docs = "cloudseed_metadata_documents_total"
        assert value(samples, docs, document="openstack/meta_data.json") == 5
        assert value(samples, docs, document="ec2/meta-data/hostname") == 1
        assert not any("no-such-key" in str(key) for key in samples)
        route = {"listener": "metadata", "route": "/openstack/{version}/meta_data.json"}
        assert (
            value(samples, "cloudseed_http_requests_total", method="GET", status="200", **route)
            == 5
        )
        assert value(samples, "cloudseed_http_request_duration_seconds_count", **route) == 5
        assert value(samples, "cloudseed_metadata_cache_misses_total") == 1
        assert value(samples, "cloudseed_metadata_cache_hits_total") == 6
        assert value(samples, "cloudseed_metadata_cache_guests") == 1

        # A change is read from the feed (and its lag observed); the guest is dropped.
        r = api.put(f"/v2.1/servers/{guest.id}", json={"server": {"name": "renamed"}})
        assert r.status_code == 200, r.text

        def lag_seen() -> bool:
            seen = scrape(base)
            return value(seen, "cloudseed_metadata_change_lag_seconds_count") >= 1

        eventually(lag_seen, timeout=10)
        assert value(scrape(base), "cloudseed_metadata_cache_guests") == 0


def test_guests_get_404_for_metrics(
    api: httpx.Client, cloud: Cloud, migrated_settings: Settings, api_db: Database
) -> None:
    guest = boot(api, cloud)
    # Even with the guests' own network allowed, a relayed request is a guest's.
    settings = metrics_settings(migrated_settings, allow_from="127.0.0.1/32")
    with running_metadata(settings, api_db=api_db) as base, guest.client(base) as md:
        unknown = md.get("/no/such/path")
        r = md.get("/metrics")
        assert (r.status_code, r.text) == (unknown.status_code, unknown.text) == (404, unknown.text)
        relayed = httpx.get(f"{base}/metrics", headers={"X-Forwarded-For": guest.address})
        assert relayed.status_code == 404
        proxied = httpx.get(f"{base}/metrics", headers={"X-Instance-ID": guest.id})
        assert proxied.status_code == 404
        assert "cloudseed_http_requests_total" in httpx.get(f"{base}/metrics").text


def test_metadata_metrics_disabled(migrated_settings: Settings) -> None:
    settings = metrics_settings(migrated_settings, enabled=False)
    with running_metadata(settings) as base:
        assert httpx.get(f"{base}/metrics").status_code == 404


def test_vendordata_target_latency_and_errors(
    api: httpx.Client,
    cloud: Cloud,
    migrated_settings: Settings,
    api_db: Database,
    targets: Targets,
) -> None:
    targets.reset()
    settings = with_options(
        metrics_settings(migrated_settings, allow_from=f"{SCRAPER}/32"),
        "api",
        vendordata_providers="DynamicJSON",
        vendordata_dynamic_targets=f"good@{targets.url('/record')},bad@{targets.url('/error')}",
    )
    guest = boot(api, cloud)
    with running_metadata(settings, api_db=api_db) as base, guest.client(base) as md:
        assert md.get("/openstack/latest/vendor_data2.json").status_code == 200
        samples = scrape(base)
    duration = "cloudseed_vendordata_target_duration_seconds_count"
    assert value(samples, duration, target="good") == 1
    assert value(samples, duration, target="bad") == 1
    assert value(samples, "cloudseed_vendordata_target_errors_total", target="bad") == 1
    assert value(samples, "cloudseed_vendordata_target_errors_total", target="good") == 0


# -- several workers -----------------------------------------------------------------------


def test_two_workers_sum(backend: str, tmp_path: Path) -> None:
    try:
        with running_cluster(backend, tmp_path) as cluster:
            _two_workers(cluster, tmp_path)
    except databases.Unavailable as exc:
        if databases.required():
            raise
        pytest.skip(str(exc))


def _two_workers(cluster: Any, tmp_path: Path) -> None:
    api_port, md_port = free_port(), free_port()
    metrics_tmp = tmp_path / "tmpdir"
    metrics_tmp.mkdir()
    serve = cluster.start(
        "workers",
        "serve",
        "--no-compute",
        "--workers",
        "2",
        "--api-listen",
        f"127.0.0.1:{api_port}",
        "--metadata-listen",
        f"127.0.0.1:{md_port}",
        TMPDIR=str(metrics_tmp),
    )
    api = f"http://127.0.0.1:{api_port}"
    wait(lambda: healthy(api), 60, cluster, "serve answering")
    (directory,) = metrics_tmp.glob("cloudseed-metrics-*")
    # New connections are spread over the workers by the kernel (SO_REUSEPORT).
    requests = 60
    for _ in range(requests):
        assert httpx.get(f"{api}/v2.1/").status_code == 200
    route = {"listener": "api", "route": "/v2.1/", "method": "GET", "status": "200"}
    # Workers hand their tallies over every second; then every scrape, whichever worker
    # answers it, shows the sum over both.
    wait(
        lambda: value(scrape(api), "cloudseed_http_requests_total", **route) == requests,
        5,
        cluster,
        "both workers' requests in a scrape",
    )
    for _ in range(6):
        for target in (api, f"http://127.0.0.1:{md_port}"):
            assert value(scrape(target), "cloudseed_http_requests_total", **route) == requests
    # Each worker's own file holds its share: both served some, and the shares add up.
    shares = [per_worker(path, "/v2.1/") for path in directory.glob("counter_*.db")]
    assert len(shares) == 2 and all(shares) and sum(shares) == requests, shares
    serve.send_signal(signal.SIGTERM)
    assert serve.wait(timeout=60) == 0
    cluster.processes.pop("workers")
    assert not directory.exists(), "the serve parent removes its metrics directory"
