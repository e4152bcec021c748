"""cloudseed beside real Nova 34, measured in one run on one machine (``make bench-nova``).

One run stands up, on 127.0.0.1:

- Keystone (the team's ``peers/keystone.sh``: gunicorn x2, SQLite, fernet), the same one for
  both sides: every compute API request carries a real token, validated by keystonemiddleware
  on both sides;
- Nova 34.0.0's compute API and metadata API (``peers/nova_api.sh``: gunicorn x2 each, SQLite,
  Neutron-proxy metadata mode, Glance/Neutron stubs) and Nova's metadata app once more under
  uwsgi x2 (its faster server here), on the same database;
- cloudseed: ``cloudseed serve --workers 2`` on SQLite with ``auth_strategy = keystone`` and
  the metadata service behind signed proxy headers (the same secret as Nova's);
- nginx x2 serving cloudseed's metadata documents as static files (the ceiling).

Both sides get ``--guests`` ACTIVE servers owned by the admin project (cloudseed's through its
API, multi-create on the fake driver; Nova's written into its database by
``bench/nova_seed_servers.py``, as no scheduler or compute service runs), each with a key pair,
the same cloud-config user data and server metadata.

Measured with ``wrk`` (``--threads`` threads) in alternating rounds, the best of ``--rounds``:

- metadata, ``--only metadata``: the boot storm first (every guest requests cloud-init's 8
  usual paths once, 256 connections, every cache cold: Nova misses its cache on each guest's
  first request, cloudseed loads each guest once per worker), then one warm guest requesting
  the same 8 paths at 8 and at 256 connections;
- compute API, ``--only api``: key pair list (100 key pairs, microversion 2.10), key pair show,
  server show, server list (``limit=100``) at 8 connections; key pair import and delete as the
  median of sequential requests.

Usage (from the repository root; needs Debian's wrk and nginx-light, matplotlib from the
``bench`` extra, and the peers installed as their README says)::

    .venv/bin/python bench/side_by_side.py [--only metadata|api] [--guests 2000]
        [--duration 5] [--rounds 2] [--write docs/benchmarks.md]

``--write`` replaces the sections between ``<!-- bench:side-by-side-<part>:start -->`` and
``...:end -->`` and writes the charts to ``docs/img/side-by-side-<part>.png``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import keypairs as kp_bench
import metadata_storm as storm
import peers
from report import cpu_model, write_section
from side_by_side_report import (
    CLOUDSEED,
    NGINX,
    Measurement,
    ratio_table,
    results_table,
    write_chart,
)

API_WRK_SCRIPT = storm.BENCH_DIR / "side_by_side_wrk.lua"
PATHS = storm.CLOUD_INIT_PATHS  # the same for every target
NOVA_GUNICORN = "Nova 34 (gunicorn x2)"
NOVA_UWSGI = "Nova 34 (uwsgi x2)"
NOVA_API = "Nova 34"
KEY_PAIRS = 100
MICROVERSION = "2.10"
GOALS = {
    "metadata, one warm guest, 8 conn.": ">= 5x Nova, >= 50 % of nginx",
    "metadata, one warm guest, 256 conn.": ">= 5x Nova, >= 50 % of nginx",
    "key pair list (100, 2.10)": ">= 10x Nova",
    "key pair import (median, sequential)": ">= 10x Nova",
    "server show": ">= 10x Nova",
}


@dataclass
class Run:
    args: argparse.Namespace
    results: list[Measurement] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    loads: list[str] = field(default_factory=list)

    def add(self, measurement: Measurement) -> None:
        self.results.append(measurement)
        self.loads.append(storm.load_average())


# --- set-up ---------------------------------------------------------------------------------------


def cloudseed_config(directory: Path, identity: peers.Identity) -> Path:
    """keystone auth against the peers' Keystone, with its admin as the service user (as
    nova_api.sh configures Nova)."""
    config = directory / "cloudseed.conf"
    config.write_text(f"""\
[api]
auth_strategy = keystone

[keystone_authtoken]
www_authenticate_uri = {identity.auth_url}
auth_url = {identity.auth_url}
auth_type = password
username = admin
password = {peers.ADMIN_PASSWORD}
project_name = admin
user_domain_name = Default
project_domain_name = Default

[quota]
key_pairs = -1
""")
    return config


def public_key() -> str:
    return kp_bench.ed25519_public_keys(1)[0]


def storm_files(directory: Path, instances: list[str], project: str) -> storm.StormFiles:
    """wrk's input (bench/metadata_storm_wrk.lua): one line per guest, one per path."""
    directory.mkdir()
    files = storm.StormFiles(directory / "instances.txt", directory / "paths.txt")
    files.instances.write_text("".join(f"{i} {project} {storm.sign(i)}\n" for i in instances))
    files.paths.write_text("".join(f"{p} {storm.flat_name(p)}\n" for p in PATHS))
    return files


# --- metadata -------------------------------------------------------------------------------------


def one_cycle_at_most(what: str, command: list[str], threads: int) -> tuple[storm.WrkResult, bool]:
    """Like metadata_storm's run_wrk_one_cycle, but wrk's own -d may end the pass first: the
    result, and whether every guest was crawled once."""
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=storm.pacing_env(0)
    )
    assert process.stdout is not None
    output: list[str] = []
    finished = 0
    for line in process.stdout:
        output.append(line)
        if line.startswith("CYCLE-DONE"):
            finished += 1
            if finished == threads:
                process.send_signal(signal.SIGINT)
    stderr = process.stderr.read() if process.stderr else ""
    if process.wait() != 0:
        raise RuntimeError(f"wrk failed ({process.returncode}):\n{''.join(output)}{stderr}")
    result = storm.parse_wrk(what, "".join(output))
    print(f"  {result.describe()}", flush=True)
    return result, finished == threads


def metadata_wrk(
    args: argparse.Namespace, url: str, target: str, files: storm.StormFiles, one_cycle: bool
) -> list[str]:
    command_args = argparse.Namespace(threads=args.threads, connections=args.connections)
    return storm.wrk_command(
        command_args,
        url,
        "nginx" if target == NGINX else "cloudseed",
        files,
        args.duration if not one_cycle else args.storm_seconds,
        one_cycle,
    )


def measurement(scenario: str, target: str, result: storm.WrkResult, note: str) -> Measurement:
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
    files = {
        name: storm_files(tmp / f"wrk-{i}", guests, project)
        for i, (name, (_url, guests)) in enumerate(targets.items())
    }
    storm_scenario = f"metadata boot storm, {len(targets[CLOUDSEED][1]):,} guests, cold"
    args.connections = 256
    for name, (url, guests) in targets.items():
        done = storm.step(f"storm: {name}")
        # Nova's cold path may be too slow for every guest in one locked run: each target
        # gets at most --storm-seconds, every guest it reaches still a first contact.
        command = metadata_wrk(args, url, name, files[name], one_cycle=True)
        result, whole = one_cycle_at_most(name, command, args.threads)
        reached = min(len(guests), result.requests // len(PATHS))
        note = "each guest's 8 paths once" if whole else f"~{reached:,} guests reached"
        run.add(measurement(storm_scenario, name, result, f"{note}, 256 conn."))
        done()
    guests = targets[CLOUDSEED][1]
    tree = storm.fetch_documents(cloudseed_port, guests, PATHS, tmp / "static")
    if set(tree.statuses) != {200}:
        run.notes.append(f"cloudseed's documents for nginx: statuses {dict(tree.statuses)}")
    with storm.running_nginx(tree.root, tmp / "nginx", workers=2) as nginx_url:
        nginx_files = files[CLOUDSEED]
        args.connections = 256
        result = storm.run_wrk_one_cycle(
            NGINX, metadata_wrk(args, nginx_url, NGINX, nginx_files, one_cycle=True), args.threads
        )
        run.add(measurement(storm_scenario, NGINX, result, "the same documents, static"))
        everyone = {**targets, NGINX: (nginx_url, guests)}
        files[NGINX] = nginx_files
        # One guest, once per wrk thread: the Lua script shares guests out among threads.
        warm = {
            name: storm_files(tmp / f"warm-{i}", [guests_[0]] * args.threads, project)
            for i, (name, (_u, guests_)) in enumerate(everyone.items())
        }
        for connections in (8, 256):
            scenario = f"metadata, one warm guest, {connections} conn."
            rounds: dict[str, list[storm.WrkResult]] = {name: [] for name in everyone}
            for round_ in range(args.rounds):
                for name, (url, _g) in everyone.items():
                    args.connections = connections
                    storm.step(f"{scenario}: {name}, round {round_ + 1}")
                    rounds[name].append(
                        storm.run_wrk(
                            name, metadata_wrk(args, url, name, warm[name], one_cycle=False)
                        )
                    )
            for name, results in rounds.items():
                run.add(
                    measurement(
                        scenario, name, storm.best(results), f"best of {args.rounds} rounds"
                    )
                )


# --- compute API ----------------------------------------------------------------------------------


def api_headers(token: str) -> dict[str, str]:
    return {
        "X-Auth-Token": token,
        "OpenStack-API-Version": f"compute {MICROVERSION}",
        "X-OpenStack-Nova-API-Version": MICROVERSION,
    }


def api_wrk(args: argparse.Namespace, url: str, token: str) -> list[str]:
    command = [storm.require_tool("wrk", "wrk"), f"-t{args.threads}", "-c8"]
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


def sequential(
    client: httpx.Client, requests: list[Callable[[httpx.Client], httpx.Response]], ok: int
) -> tuple[list[float], int]:
    """Each request in turn; its milliseconds, and how many did not answer ``ok``."""
    latencies: list[float] = []
    errors = 0
    for send in requests:
        started = time.perf_counter()
        response = send(client)
        latencies.append((time.perf_counter() - started) * 1000)
        errors += response.status_code != ok
    return latencies, errors


def measure_imports_and_deletes(run: Run, name: str, client: httpx.Client) -> None:
    count = run.args.sequential
    keys = kp_bench.ed25519_public_keys(count)
    names = [f"seq-{i:03d}" for i in range(count)]

    def importer(i: int) -> Callable[[httpx.Client], httpx.Response]:
        body = {"keypair": {"name": names[i], "public_key": keys[i]}}
        return lambda c: c.post("/v2.1/os-keypairs", json=body)

    def deleter(i: int) -> Callable[[httpx.Client], httpx.Response]:
        return lambda c: c.delete(f"/v2.1/os-keypairs/{names[i]}")

    for scenario, requests, ok in (
        ("key pair import (median, sequential)", [importer(i) for i in range(count)], 201),
        # 204 since microversion 2.2 (202 before).
        ("key pair delete (median, sequential)", [deleter(i) for i in range(count)], 204),
    ):
        latencies, errors = sequential(client, requests, ok)
        run.add(
            Measurement(
                scenario,
                name,
                None,
                statistics.median(latencies),
                storm.percentile(latencies, 99),
                errors,
                f"{count} requests, one connection",
            )
        )


def measure_api(run: Run, targets: dict[str, tuple[str, str]], token: str) -> None:
    """``targets``: name -> (compute API base URL, a server id)."""
    args = run.args
    urls: dict[str, dict[str, str]] = {}
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
        urls[name] = {
            f"key pair list ({KEY_PAIRS}, {MICROVERSION})": f"{base}/v2.1/os-keypairs",
            "key pair show": f"{base}/v2.1/os-keypairs/bench-050",
            "server show": f"{base}/v2.1/servers/{server}",
            "server list (limit=100)": f"{base}/v2.1/servers?limit=100",
        }
    for scenario in urls[CLOUDSEED]:
        rounds: dict[str, list[storm.WrkResult]] = {name: [] for name in targets}
        for round_ in range(args.rounds):
            for name in targets:
                storm.step(f"{scenario}: {name}, round {round_ + 1}")
                rounds[name].append(storm.run_wrk(name, api_wrk(args, urls[name][scenario], token)))
        for name, results in rounds.items():
            best = storm.best(results)
            run.add(measurement(scenario, name, best, f"8 conn., best of {args.rounds} rounds"))
    for name, (base, _server) in targets.items():
        with httpx.Client(base_url=base, headers=api_headers(token), timeout=120) as client:
            measure_imports_and_deletes(run, name, client)


# --- the run --------------------------------------------------------------------------------------


def seed_cloudseed(run: Run, server: storm.Server, registries: storm.Registries) -> list[str]:
    """--guests servers through cloudseed's API (metadata_storm's multi-create batches); the
    ACTIVE ones. Servers that end in ERROR are noted with their fault and left out: Nova then
    gets as many as cloudseed has ACTIVE."""
    with httpx.Client(base_url=server.api, headers=storm.AUTH, timeout=120) as api:
        key_name = storm.import_key_pair(api)
        asyncio.run(
            storm._create_batches(server.api, registries, key_name, run.args.guests, 100, 1)
        )
        deadline = time.monotonic() + 600
        while storm.count_servers(api, "BUILD") and time.monotonic() < deadline:
            time.sleep(0.5)
        failed = api.get("/v2.1/servers/detail", params={"status": "ERROR", "limit": 1000})
        errored = failed.json()["servers"]
        if errored:
            faults = sorted({s.get("fault", {}).get("message", "?") for s in errored})
            run.notes.append(
                f"cloudseed: {len(errored)} of {run.args.guests:,} servers went to ERROR while "
                f"seeding ({'; '.join(faults[:3])}); left out on both sides"
            )
            print(f"  {run.notes[-1]}", flush=True)
        bad = {s["id"] for s in errored}
        return sorted(i for i in storm.all_server_ids(api) if i not in bad)


@contextlib.contextmanager
def stood_up(run: Run, tmp: Path) -> Iterator[dict[str, object]]:
    """Keystone, cloudseed, Nova (+ uwsgi metadata); both seeded with ``--guests`` servers."""
    args = run.args
    directory = peers.check_installed()
    storm.require_tool("wrk", "wrk")
    storm.require_tool("nginx", "nginx-light")
    storm.SECRET = "side-by-side-" + os.urandom(8).hex()  # shared by both metadata services
    with contextlib.ExitStack() as stack:
        done = storm.step("Keystone")
        identity = stack.enter_context(peers.running_keystone(directory, tmp / "keystone"))
        done()
        # metadata_storm's helpers read these module settings: the admin project and token.
        storm.PROJECT = identity.project_id
        storm.AUTH = {"X-Auth-Token": identity.token}
        os.environ["CLOUDSEED_CONFIG"] = str(cloudseed_config(tmp, identity))
        data_dir = tmp / "cloudseed"
        data_dir.mkdir()
        done = storm.step("cloudseed: db sync, registries, serve --workers 2")
        registries = storm.register(data_dir)
        server = stack.enter_context(storm.running_server(data_dir, workers=2))
        done()
        done = storm.step("Nova 34: setup (databases, cells, catalog) and start")
        nova = stack.enter_context(peers.running_nova(directory, tmp / "nova", storm.SECRET))
        uwsgi_url = stack.enter_context(peers.running_nova_metadata_uwsgi(nova, processes=2))
        done()
        done = storm.step(f"seeding {args.guests:,} servers on each side")
        ours = seed_cloudseed(run, server, registries)
        user_data = tmp / "user_data"
        user_data.write_bytes(storm.USER_DATA)
        nova_servers = peers.seed_nova_servers(
            directory,
            nova,
            identity,
            len(ours),
            ("storm-key", public_key()),
            user_data=user_data,
            metadata=json.dumps(storm.SERVER_METADATA),
        )
        done()
        yield {
            "identity": identity,
            "server": server,
            "cloudseed_guests": ours,
            "nova": nova,
            "nova_uwsgi": uwsgi_url,
            "nova_guests": nova_servers,
        }


def run_all(run: Run, tmp: Path) -> None:
    with stood_up(run, tmp) as up:
        identity = up["identity"]
        server = up["server"]
        nova = up["nova"]
        assert isinstance(identity, peers.Identity) and isinstance(server, storm.Server)
        assert isinstance(nova, peers.Nova)
        ours: list[str] = up["cloudseed_guests"]  # type: ignore[assignment]
        theirs: list[str] = up["nova_guests"]  # type: ignore[assignment]
        if run.args.only in (None, "metadata"):
            measure_metadata(
                run,
                tmp,
                {
                    NOVA_GUNICORN: (nova.metadata_gunicorn, theirs),
                    NOVA_UWSGI: (str(up["nova_uwsgi"]), theirs),
                    CLOUDSEED: (f"http://127.0.0.1:{server.metadata_port}", ours),
                },
                server.metadata_port,
                identity.project_id,
            )
        if run.args.only in (None, "api"):
            measure_api(
                run,
                {NOVA_API: (nova.api, theirs[0]), CLOUDSEED: (server.api, ours[0])},
                identity.token,
            )


# --- the report -----------------------------------------------------------------------------------


def section(run: Run, part: str, chart: Path, doc: Path) -> str:
    args = run.args
    command = shlex.join(["python", "bench/side_by_side.py", *sys.argv[1:]])
    link = os.path.relpath(chart, doc.parent)
    title = {"metadata": "Metadata service", "api": "Compute API through Keystone"}[part]
    load = f"{run.loads[0]} at the first result, {run.loads[-1]} at the last"
    return "\n".join(
        [
            f"## Side by side with Nova 34: {title}",
            "",
            f"`{command}` on {time.strftime('%Y-%m-%d', time.gmtime())}: {cpu_model()}, "
            f"{os.cpu_count()} cores, Python {platform.python_version()}, Nova "
            f"{peers.nova_version()} and Keystone from PyPI (the team's `peers` scripts), "
            f"cloudseed and Nova each with 2 worker processes on SQLite, `wrk -t{args.threads}` "
            f"on the same cores, {args.duration:g} s per round, the best of {args.rounds} "
            f"alternating rounds. Load average {load}. {args.guests:,} servers on each side.",
            "",
            f"![{title}: requests/s and p99, cloudseed beside Nova and nginx]({link})",
            "",
            ratio_table(run.results, GOALS),
            "",
            "Ratios are against Nova's best server in the row (most requests/s); for the "
            "sequential rows, Nova's median over cloudseed's. The peers come from the team's "
            "`shared/peers` scripts (`keystone.sh install`, `nova_api.sh install`, then "
            "`pip install uwsgi` into the Nova venv), found at `../shared/peers` or "
            "`$CLOUDSEED_PEERS_DIR`; without them the benchmark says what to run and exits 2.",
            "",
            "<details><summary>Every target</summary>",
            "",
            results_table(run.results),
            "",
            "</details>",
            "",
            *[f"- {note}" for note in run.notes],
        ]
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["metadata", "api"])
    parser.add_argument(
        "--guests",
        type=int,
        default=2000,
        help="servers on each side, all in the storm (the issue's storm is 10,000)",
    )
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per wrk round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--storm-seconds",
        type=float,
        default=30.0,
        help="the cold storm's time limit per target (Nova does not reach every guest)",
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sequential", type=int, default=40, help="imports, then deletes")
    parser.add_argument("--write", type=Path, help="the Markdown file to update")
    parser.add_argument("--charts", type=Path, default=Path("docs/img"))
    args = parser.parse_args(argv)
    args.connections = 8
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    run = Run(args)
    try:
        with tempfile.TemporaryDirectory(prefix="side-by-side-") as tmp:
            run_all(run, Path(tmp))
    except peers.PeersUnavailable as exc:
        print(f"skipped: {exc}", file=sys.stderr)
        return 2
    print(results_table(run.results))
    parts = [args.only] if args.only else ["metadata", "api"]
    for part in parts:
        chosen = [r for r in run.results if is_metadata(r) == (part == "metadata")]
        sub = Run(args, chosen, run.notes if part == "metadata" else [], run.loads)
        print(ratio_table(chosen, GOALS))
        if args.write:
            chart = write_chart(
                chosen,
                args.charts / f"side-by-side-{part}.png",
                f"cloudseed beside Nova 34 and nginx: {part}",
            )
            write_section(
                args.write,
                f"<!-- bench:side-by-side-{part}:start -->",
                f"<!-- bench:side-by-side-{part}:end -->",
                section(sub, part, chart, args.write),
            )
    return 0


def is_metadata(result: Measurement) -> bool:
    return result.scenario.startswith("metadata")


if __name__ == "__main__":
    sys.exit(main())
