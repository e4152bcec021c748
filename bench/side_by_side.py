"""cloudseed beside real Nova 34, measured in one run on one machine (``make bench-nova``).

One run stands up, on 127.0.0.1:

- Keystone (the team's ``peers/keystone.sh``: gunicorn x2, SQLite, fernet), the same one for
  both sides: every compute API request carries a real token, validated by keystonemiddleware
  on both sides;
- Nova 34.0.0's compute API and metadata API (``peers/nova_api.sh``: gunicorn x2 each, SQLite,
  Neutron-proxy metadata mode, Glance/Neutron stubs) and Nova's metadata app once more under
  uwsgi x2 (its faster server here), on the same database;
- cloudseed: ``cloudseed serve --workers 2 --no-compute`` on SQLite with ``auth_strategy =
  keystone`` and the metadata service behind signed proxy headers (the same secret as Nova's),
  and its compute agent in a ``cloudseed compute`` of its own (stopped while server creates
  are measured);
- nginx x2 serving cloudseed's metadata documents as static files (the ceiling).

Both sides get ``--guests`` ACTIVE servers owned by the admin project (cloudseed's through its
API, multi-create on the fake driver; Nova's written into its database by
``bench/nova_seed_servers.py``, as no scheduler or compute service runs), each with a key pair,
the same cloud-config user data and server metadata.

Measured with ``wrk`` (``--threads`` threads) in alternating rounds, the best of ``--rounds``:

- metadata, ``--only metadata``: the boot storm first (every guest requests cloud-init's 8
  usual paths once, 256 connections, each guest's first contact: Nova misses its cache on
  each guest's first request; cloudseed's workers loaded each guest ahead as its build
  finished, as they do for every guest that boots), then one warm guest requesting the same
  8 paths at 8 and at 256 connections;
- compute API, ``--only api``: key pair list (100 key pairs, microversion 2.10), key pair show,
  server show, server list (``limit=100``) at 8 connections; key pair import and delete, and
  server create (no network, microversion 2.37), as the median of sequential requests. Nova's
  peer runs no conductor, scheduler or compute service: its create ends at the cast to the
  conductor (oslo.messaging's in-memory fake transport), which is all its API does before it
  answers 202.

Usage (from the repository root; needs Debian's wrk and nginx-light, matplotlib from the
``bench`` extra, and the peers installed as their README says)::

    .venv/bin/python bench/side_by_side.py [--only metadata|api] [--guests 2000]
        [--duration 5] [--rounds 2] [--write docs/benchmarks.md]

``--write`` replaces the sections between ``<!-- bench:side-by-side-<part>:start -->`` and
``...:end -->`` and writes the charts to ``docs/img/side-by-side-<part>.png``.

This file stands the targets up, seeds them and writes the report; the measured rounds are in
side_by_side_rounds.py, the tables and charts in side_by_side_report.py.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import keypairs as kp_bench
import peers
import storm_identity
from report import cpu_model, write_section
from side_by_side_report import (
    CLOUDSEED,
    Measurement,
    ratio_table,
    results_table,
    write_chart,
)
from side_by_side_rounds import Run, measure_api, measure_metadata
from storm_host import require_tool, step
from storm_seeding import (
    SERVER_METADATA,
    USER_DATA,
    Registries,
    all_server_ids,
    count_servers,
    create_batches,
    import_key_pair,
    register,
)
from storm_server import Server, paused, running_server, standalone_agent

NOVA_GUNICORN = "Nova 34 (gunicorn x2)"
NOVA_UWSGI = "Nova 34 (uwsgi x2)"
NOVA_API = "Nova 34"
# Issue 36's targets, with the earlier ones kept (issue 19's 5x Nova). Each applies to every
# scenario whose name starts with its key.
GOALS = {
    "metadata boot storm": ">= 50 % of nginx",
    "metadata, one warm guest, 8 conn.": ">= 5x Nova, >= 95 % of nginx",
    "metadata, one warm guest, 256 conn.": ">= 5x Nova, >= 90 % of nginx",
    "key pair": ">= 10x Nova",
    "server": ">= 10x Nova",
}


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


# --- the run --------------------------------------------------------------------------------------


def seed_cloudseed(run: Run, server: Server, registries: Registries) -> list[str]:
    """--guests servers for each of --storms cold storms through cloudseed's API
    (storm_seeding's multi-create batches); the ACTIVE ones. Servers that end in ERROR are
    noted with their fault and left out."""
    total = run.args.guests * run.args.storms
    with httpx.Client(base_url=server.api, headers=storm_identity.AUTH, timeout=120) as api:
        key_name = import_key_pair(api)
        asyncio.run(create_batches(server.api, registries, key_name, total, 100, 1))
        deadline = time.monotonic() + 600
        while count_servers(api, "BUILD") and time.monotonic() < deadline:
            time.sleep(0.5)
        failed = api.get("/v2.1/servers/detail", params={"status": "ERROR", "limit": 1000})
        errored = failed.json()["servers"]
        if errored:
            faults = sorted({s.get("fault", {}).get("message", "?") for s in errored})
            run.notes.append(
                f"cloudseed: {len(errored)} of {total:,} servers went to ERROR while "
                f"seeding ({'; '.join(faults[:3])}); left out"
            )
            print(f"  {run.notes[-1]}", flush=True)
        bad = {s["id"] for s in errored}
        return sorted(i for i in all_server_ids(api) if i not in bad)


@contextlib.contextmanager
def stood_up(run: Run, tmp: Path) -> Iterator[dict[str, object]]:
    """Keystone, cloudseed, Nova (+ uwsgi metadata); both seeded with ``--guests`` servers."""
    args = run.args
    directory = peers.check_installed()
    require_tool("wrk", "wrk")
    require_tool("nginx", "nginx-light")
    # Shared by both metadata services.
    storm_identity.SECRET = "side-by-side-" + os.urandom(8).hex()
    with contextlib.ExitStack() as stack:
        done = step("Keystone")
        identity = stack.enter_context(peers.running_keystone(directory, tmp / "keystone"))
        done()
        # The storm_* helpers read these storm_identity settings: the admin project and token.
        storm_identity.PROJECT = identity.project_id
        storm_identity.AUTH = {"X-Auth-Token": identity.token}
        os.environ["CLOUDSEED_CONFIG"] = str(cloudseed_config(tmp, identity))
        data_dir = tmp / "cloudseed"
        data_dir.mkdir()
        done = step("cloudseed: db sync, registries, serve --workers 2 --no-compute, its agent")
        registries = register(data_dir)
        server = stack.enter_context(running_server(data_dir, workers=2, compute=False))
        # The agent in a process of its own (as docs/deployment.md lays a node out), so the
        # server creates can be measured with it stopped: Nova's peer builds nothing.
        agent = stack.enter_context(standalone_agent(data_dir, host=None))
        done()
        done = step("Nova 34: setup (databases, cells, catalog) and start")
        nova = stack.enter_context(
            peers.running_nova(directory, tmp / "nova", storm_identity.SECRET)
        )
        uwsgi_url = stack.enter_context(peers.running_nova_metadata_uwsgi(nova, processes=2))
        done()
        done = step(
            f"seeding {args.guests * args.storms:,} servers in cloudseed ({args.storms} storms), "
            f"{args.guests:,} in Nova"
        )
        ours = seed_cloudseed(run, server, registries)
        user_data = tmp / "user_data"
        user_data.write_bytes(USER_DATA)
        nova_servers = peers.seed_nova_servers(
            directory,
            nova,
            identity,
            min(len(ours), args.guests),
            ("storm-key", public_key()),
            user_data=user_data,
            metadata=json.dumps(SERVER_METADATA),
        )
        done()
        yield {
            "agent": agent,
            "cloudseed_data": data_dir,
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
        assert isinstance(identity, peers.Identity) and isinstance(server, Server)
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
            agent, data_dir = up["agent"], up["cloudseed_data"]
            assert isinstance(agent, subprocess.Popen) and isinstance(data_dir, Path)
            measure_api(
                run,
                {NOVA_API: (nova.api, theirs[0]), CLOUDSEED: (server.api, ours[0])},
                identity.token,
                {CLOUDSEED: lambda: paused(agent, data_dir)},
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
            f"alternating rounds. Load average {load}. {args.guests:,} servers on each side"
            + (
                f" (cloudseed: {args.storms} sets of them, one for each cold storm)."
                if args.storms > 1
                else "."
            ),
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
    parser.add_argument(
        "--storms",
        type=int,
        default=3,
        help="cold storms of --guests other guests each, for cloudseed and nginx (the median "
        "is the row: one storm of 500 guests is 4,000 requests, under a second); Nova's "
        "reaches a few dozen guests in --storm-seconds, and runs once",
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sequential", type=int, default=40, help="imports, then deletes")
    parser.add_argument("--write", type=Path, help="the Markdown file to update")
    parser.add_argument("--charts", type=Path, default=Path("docs/img"))
    args = parser.parse_args(argv)
    if args.storms < 1:
        parser.error("--storms must be at least 1")
    if args.only == "api":
        args.storms = 1  # no storm: the same servers on each side
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
