"""What bench/side_by_side.py measures once every target runs and is seeded: the metadata
rounds (the cold boot storm, nginx on the same documents, one warm guest at 8 and 256
connections) and the compute API rounds (wrk at 8 connections, sequential imports, deletes
and server creates), each recorded in a Run as side_by_side_report's Measurements."""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import json
import math
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import keypairs as kp_bench
import storm_identity
from report import BENCH_DIR, percentile
from side_by_side_report import CLOUDSEED, NGINX, Measurement
from storm_crawl import CLOUD_INIT_PATHS
from storm_host import load_average, require_tool, step, wait_until_idle
from storm_nginx import fetch_documents, running_nginx
from storm_seeding import SERVER_METADATA, USER_DATA
from storm_wrk import (
    StormFiles,
    WrkResult,
    best,
    run_wrk,
    run_wrk_one_cycle,
    run_wrk_one_cycle_at_most,
    write_storm_files,
    wrk_command,
)

API_WRK_SCRIPT = BENCH_DIR / "side_by_side_wrk.lua"
PATHS = CLOUD_INIT_PATHS  # the same for every target
KEY_PAIRS = 100
MICROVERSION = "2.10"
# Server create asks for no network ("networks": "none", 2.37): Nova's peer has only a stub
# Neutron with no networks, and a port would be work on cloudseed's side only.
CREATE_MICROVERSION = "2.37"


@dataclass
class Run:
    args: argparse.Namespace
    results: list[Measurement] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    loads: list[str] = field(default_factory=list)

    def add(self, measurement: Measurement) -> None:
        self.results.append(measurement)
        self.loads.append(load_average())


# --- metadata -------------------------------------------------------------------------------------


def metadata_wrk(
    args: argparse.Namespace, url: str, target: str, files: StormFiles, one_cycle: bool
) -> list[str]:
    command_args = argparse.Namespace(threads=args.threads, connections=args.connections)
    return wrk_command(
        command_args,
        url,
        "nginx" if target == NGINX else "cloudseed",
        files,
        args.duration if not one_cycle else args.storm_seconds,
        one_cycle,
    )


def measurement(scenario: str, target: str, result: WrkResult, note: str) -> Measurement:
    socket_errors = sum(result.socket_errors.values())
    extra = f"; {socket_errors:,} socket errors" if socket_errors else ""
    return Measurement(
        scenario,
        target,
        result.rps,
        result.latency_us["p50"] / 1000,
        result.latency_us["p99"] / 1000,
        result.non_200,
        note + extra,
    )


def median_storm(storms: list[tuple[WrkResult, bool]]) -> tuple[WrkResult, bool]:
    """The storm of median requests/s (the lower middle one of an even number)."""
    ranked = sorted(storms, key=lambda storm: storm[0].rps)
    return ranked[(len(ranked) - 1) // 2]


def storms_note(storms: list[tuple[WrkResult, bool]]) -> str:
    """The connections, and each storm's requests/s where there were several."""
    if len(storms) == 1:
        return ", 256 conn."
    each = " / ".join(f"{result.rps:,.0f}" for result, _whole in storms)
    return f", 256 conn.; the median of {len(storms)} storms of other guests ({each} req/s)"


def measure_metadata(
    run: Run,
    tmp: Path,
    targets: dict[str, tuple[str, list[str]]],
    cloudseed_port: int,
    project: str,
) -> None:
    """``targets``: name -> (base URL, its guests). nginx is added once cloudseed has answered
    every guest's storm (its documents are fetched from cloudseed)."""
    args = run.args
    # cloudseed's guests come in --storms sets of --guests, one set for each of its storms
    # (and nginx's on the same documents); Nova's storm reaches a few dozen guests and runs once.
    sets = {
        name: [guests[k * args.guests : (k + 1) * args.guests] for k in range(args.storms)]
        if name == CLOUDSEED
        else [guests[: args.guests]]
        for name, (_url, guests) in targets.items()
    }
    files = {
        name: [
            write_storm_files(tmp / f"wrk-{i}-{k}", one, PATHS, project=project)
            for k, one in enumerate(sets[name])
        ]
        for i, name in enumerate(targets)
    }
    # Every guest's first contact: Nova's metadata API reads each at its first request;
    # cloudseed's workers loaded each ahead as its build finished (the seeding's builds ran on
    # the serving node), as they do for any guest that boots.
    storm_scenario = f"metadata boot storm, {len(sets[CLOUDSEED][0]):,} guests just built"
    args.connections = 256
    for name, (url, _guests) in targets.items():
        storms = []
        for k, storm_files in enumerate(files[name]):
            waited = wait_until_idle()
            done = step(f"storm {k + 1} of {len(files[name])}: {name} (idle after {waited:.1f} s)")
            # Nova's cold path may be too slow for every guest in one locked run: each target
            # gets at most --storm-seconds, every guest it reaches still a first contact.
            command = metadata_wrk(args, url, name, storm_files, one_cycle=True)
            result, whole = run_wrk_one_cycle_at_most(name, command, args.threads)
            storms.append((result, whole))
            done()
        result, whole = median_storm(storms)
        reached = min(args.guests, result.requests // len(PATHS))
        note = "each guest's 8 paths once" if whole else f"~{reached:,} guests reached"
        run.add(measurement(storm_scenario, name, result, note + storms_note(storms)))
    guests = [guest for one in sets[CLOUDSEED] for guest in one]
    tree = fetch_documents(cloudseed_port, guests, PATHS, tmp / "static")
    if set(tree.statuses) != {200}:
        run.notes.append(f"cloudseed's documents for nginx: statuses {dict(tree.statuses)}")
    with running_nginx(tree.root, tmp / "nginx", workers=2) as nginx_url:
        args.connections = 256
        storms = []
        for storm_files in files[CLOUDSEED]:
            wait_until_idle()
            command = metadata_wrk(args, nginx_url, NGINX, storm_files, one_cycle=True)
            storms.append((run_wrk_one_cycle(NGINX, command, args.threads), True))
        result, _whole = median_storm(storms)
        note = "the same documents, static" + storms_note(storms)
        run.add(measurement(storm_scenario, NGINX, result, note))
        everyone = {**targets, NGINX: (nginx_url, sets[CLOUDSEED][0])}
        # One guest, once per wrk thread: the Lua script shares guests out among threads.
        warm = {
            name: write_storm_files(
                tmp / f"warm-{i}", [guests_[0]] * args.threads, PATHS, project=project
            )
            for i, (name, (_u, guests_)) in enumerate(everyone.items())
        }
        for connections in (8, 256):
            scenario = f"metadata, one warm guest, {connections} conn."
            rounds: dict[str, list[WrkResult]] = {name: [] for name in everyone}
            for round_ in range(args.rounds):
                for name, (url, _g) in everyone.items():
                    args.connections = connections
                    waited = wait_until_idle()
                    step(f"{scenario}: {name}, round {round_ + 1} (idle after {waited:.1f} s)")
                    rounds[name].append(
                        run_wrk(name, metadata_wrk(args, url, name, warm[name], one_cycle=False))
                    )
            for name, results in rounds.items():
                run.add(measurement(scenario, name, best(results), f"best of {args.rounds} rounds"))


# --- compute API ----------------------------------------------------------------------------------


def api_headers(token: str, microversion: str = MICROVERSION) -> dict[str, str]:
    return {
        "X-Auth-Token": token,
        "OpenStack-API-Version": f"compute {microversion}",
        "X-OpenStack-Nova-API-Version": microversion,
    }


def api_wrk(args: argparse.Namespace, url: str, token: str) -> list[str]:
    command = [require_tool("wrk", "wrk"), f"-t{args.threads}", "-c8"]
    command += [f"-d{math.ceil(args.duration)}s", "--timeout", "10s", "--latency"]
    for name, value in api_headers(token).items():
        command += ["-H", f"{name}: {value}"]
    return [*command, "-s", str(API_WRK_SCRIPT), url]


def seed_key_pairs(client: httpx.Client, count: int) -> None:
    for i, key in enumerate(kp_bench.ed25519_public_keys(count)):
        body = {"keypair": {"name": f"bench-{i:03d}", "public_key": key}}
        response = client.post("/v2.1/os-keypairs", json=body)
        if response.status_code not in (200, 201):
            raise RuntimeError(f"seeding key pairs: {response.status_code} {response.text}")


class PlainClient:
    """Requests one after the other on one keep-alive connection of the standard library's
    ``http.client`` (it opens a new one when a server closes it). The sequential rows time
    the whole round trip, client included: httpx spent about 400 us of its own per request
    here, http.client about 140, and wrk (C) a few tens (docs/benchmarks.md, the issue 36
    notes), so with httpx a third of cloudseed's median delete was the client."""

    def __init__(self, base: str, headers: dict[str, str]) -> None:
        parts = urlsplit(base)
        self.prefix = parts.path.rstrip("/")
        self.headers = {**headers, "Content-Type": "application/json"}
        self.connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=120)

    def send(self, method: str, path: str, body: dict[str, object] | None = None) -> int:
        """The answer's status, its body read to the end."""
        payload = None if body is None else json.dumps(body)
        self.connection.request(method, self.prefix + path, payload, self.headers)
        response = self.connection.getresponse()
        response.read()
        return response.status

    def close(self) -> None:
        self.connection.close()


def sequential(
    client: PlainClient, requests: list[Callable[[PlainClient], int]], ok: int
) -> tuple[list[float], int]:
    """Each request in turn; its milliseconds, and how many did not answer ``ok``."""
    latencies: list[float] = []
    errors = 0
    for send in requests:
        started = time.perf_counter()
        status = send(client)
        latencies.append((time.perf_counter() - started) * 1000)
        errors += status != ok
    return latencies, errors


def record_sequential(
    run: Run,
    name: str,
    client: PlainClient,
    scenario: str,
    requests: list[Callable[[PlainClient], int]],
    ok: int,
) -> None:
    latencies, errors = sequential(client, requests, ok)
    run.add(
        Measurement(
            scenario,
            name,
            None,
            statistics.median(latencies),
            percentile(latencies, 99),
            errors,
            f"{len(requests)} requests, one connection (http.client)",
        )
    )


def measure_imports_and_deletes(run: Run, name: str, client: PlainClient) -> None:
    count = run.args.sequential
    keys = kp_bench.ed25519_public_keys(count)
    names = [f"seq-{i:03d}" for i in range(count)]

    def importer(i: int) -> Callable[[PlainClient], int]:
        body: dict[str, object] = {"keypair": {"name": names[i], "public_key": keys[i]}}
        return lambda c: c.send("POST", "/v2.1/os-keypairs", body)

    def deleter(i: int) -> Callable[[PlainClient], int]:
        return lambda c: c.send("DELETE", f"/v2.1/os-keypairs/{names[i]}")

    imports = [importer(i) for i in range(count)]
    record_sequential(run, name, client, "key pair import (median, sequential)", imports, 201)
    # 204 since microversion 2.2 (202 before).
    deletes = [deleter(i) for i in range(count)]
    record_sequential(run, name, client, "key pair delete (median, sequential)", deletes, 204)


def create_body(shown: dict[str, Any], index: int) -> dict[str, object]:
    """A server like the seeded one ``shown`` (its image and flavor), with a key pair, the
    storm's user data and metadata, and no network."""
    return {
        "server": {
            "name": f"seq-create-{index:03d}",
            "imageRef": shown["image"]["id"],
            "flavorRef": shown["flavor"]["id"],
            "networks": "none",
            "key_name": "bench-000",
            "user_data": base64.b64encode(USER_DATA).decode(),
            "metadata": SERVER_METADATA,
        }
    }


def measure_creates(
    run: Run,
    name: str,
    base: str,
    token: str,
    shown: dict[str, Any],
    builds_paused: Callable[[], AbstractContextManager[None]],
) -> None:
    """Server create, one after the other: what the API does before it answers 202. Nova's
    peer runs no conductor, scheduler or compute service (its RPC transport is oslo's
    in-memory fake), so its creates end at the cast to the conductor and nothing builds;
    ``builds_paused`` stops whatever would build the target's servers meanwhile (cloudseed's
    agent), so both sides are measured doing the same: the API's work alone."""
    client = PlainClient(base, api_headers(token, CREATE_MICROVERSION))
    try:
        quota = {"quota_set": {"instances": -1, "cores": -1, "ram": -1}}
        status = client.send("PUT", f"/v2.1/os-quota-sets/{storm_identity.PROJECT}", quota)
        if status != 200:
            raise RuntimeError(f"{name}: unlimited instance quota: {status}")
        bodies = [create_body(shown, i) for i in range(run.args.sequential)]
        creates = [lambda c, body=body: c.send("POST", "/v2.1/servers", body) for body in bodies]
        with builds_paused():
            record_sequential(run, name, client, "server create (median, sequential)", creates, 202)
    finally:
        client.close()


def measure_api(
    run: Run,
    targets: dict[str, tuple[str, str]],
    token: str,
    builds_paused: dict[str, Callable[[], AbstractContextManager[None]]],
) -> None:
    """``targets``: name -> (compute API base URL, a server id); ``builds_paused``: name ->
    what stops its builds while its creates are measured (see ``measure_creates``)."""
    args = run.args
    urls: dict[str, dict[str, str]] = {}
    shown_servers: dict[str, dict[str, Any]] = {}
    for name, (base, server) in targets.items():
        with httpx.Client(base_url=base, headers=api_headers(token), timeout=120) as client:
            # The servers' key pair was imported through cloudseed's API only (Nova's servers
            # were written into its database): gone, both sides list the same 100.
            client.delete("/v2.1/os-keypairs/storm-key")
            seed_key_pairs(client, KEY_PAIRS)
            listed = client.get("/v2.1/os-keypairs").json()["keypairs"]
            if len(listed) != KEY_PAIRS:
                raise RuntimeError(f"{name}: {len(listed)} key pairs listed, not {KEY_PAIRS}")
            shown = client.get(f"/v2.1/servers/{server}")
            if shown.status_code != 200:
                raise RuntimeError(f"{name}: server show {shown.status_code} {shown.text}")
            shown_servers[name] = shown.json()["server"]
        urls[name] = {
            f"key pair list ({KEY_PAIRS}, {MICROVERSION})": f"{base}/v2.1/os-keypairs",
            "key pair show": f"{base}/v2.1/os-keypairs/bench-050",
            "server show": f"{base}/v2.1/servers/{server}",
            "server list (limit=100)": f"{base}/v2.1/servers?limit=100",
        }
    for scenario in urls[CLOUDSEED]:
        rounds: dict[str, list[WrkResult]] = {name: [] for name in targets}
        for round_ in range(args.rounds):
            for name in targets:
                # As in the metadata rounds: a server still answering the previous round's
                # requests after wrk stopped would slow the next target's round.
                waited = wait_until_idle()
                step(f"{scenario}: {name}, round {round_ + 1} (idle after {waited:.1f} s)")
                rounds[name].append(run_wrk(name, api_wrk(args, urls[name][scenario], token)))
        for name, results in rounds.items():
            note = f"8 conn., best of {args.rounds} rounds"
            run.add(measurement(scenario, name, best(results), note))
    for name, (base, _server) in targets.items():
        wait_until_idle()
        plain = PlainClient(base, api_headers(token))
        try:
            measure_imports_and_deletes(run, name, plain)
        finally:
            plain.close()
    for name, (base, _server) in targets.items():
        wait_until_idle()
        paused = builds_paused.get(name, contextlib.nullcontext)
        measure_creates(run, name, base, token, shown_servers[name], paused)
