"""The metadata service's speed on one warm guest: cloud-init's 8 usual paths with the Neutron
proxy's signed headers, served by ``cloudseed serve`` (uvicorn), optionally by the code before
a change (``--before``) and by granian on its own (``--granian``), beside nginx serving the
same bytes as static files (issue 19).

Passes per server, all with wrk's 2 threads on the same 2 cores as the server's 2 workers:
8 connections and 256 connections closed-loop, and 256 connections paced to about 10,000
requests/s (the p99 target's load). Servers alternate round by round; the best round of each
is reported. ``--profile`` records one worker with py-spy during an extra 8-connection pass.

``--mixed`` adds the crawl measured without wrk's Lua: h2load (``--h1``) rotating the 8 paths
in C at 8 and 256 connections, and one path alone (``--single-path``) by h2load and by plain
wrk (no script), so that what the Lua rotation costs on the shared cores is told apart from
what the rotation costs the server.

    .venv/bin/python bench/metadata_one_guest.py --granian --profile --write docs/benchmarks.md
    .venv/bin/python bench/metadata_one_guest.py --mixed --no-paced --before /tmp/base/src
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import httpx
import storm_identity
from report import code_version, cpu_model, write_section
from storm_cpu import metered, pids_matching, with_children
from storm_crawl import CLOUD_INIT_PATHS, flat_name
from storm_h2load import H2loadResult, h2load_command, run_h2load, write_uris
from storm_host import free_port, load_average, require_tool, venv_tool
from storm_identity import proxy_headers
from storm_nginx import fetch_documents, nginx_version, running_nginx
from storm_nova_md import nova_headers, nova_instances_line, running_nova_uwsgi
from storm_profile import Profile, profile_worker
from storm_report import profile_lines
from storm_seeding import register, seed
from storm_server import running_server
from storm_wrk import StormFiles, WrkResult, best, run_wrk, write_storm_files, wrk_command

PATHS = CLOUD_INIT_PATHS
PACED_DELAY_MS = 24  # 256 connections, each waiting 24 ms after an answer: ~10,000 requests/s
START = "<!-- bench:metadata-one-guest:start -->"
END = "<!-- bench:metadata-one-guest:end -->"


@dataclass
class Results:
    passes: dict[str, list[WrkResult]] = field(default_factory=dict)
    loads: list[str] = field(default_factory=list)
    profile: Profile | None = None
    mixed: dict[str, list[H2loadResult]] = field(default_factory=dict)
    # CPU µs per request of each pass: (the load generator's, the server's), round by round.
    cpu: dict[str, list[tuple[float, float | None]]] = field(default_factory=dict)
    server_pids: Callable[[], list[int]] | None = None  # the server measured now

    def add(self, key: str, run: Callable[[], WrkResult]) -> None:
        with metered(self.server_pids) as use:
            result = run()
        self.cpu.setdefault(key, []).append(use.per_request_us(result.requests))
        self.passes.setdefault(key, []).append(result)

    def add_mixed(self, key: str, run: Callable[[], H2loadResult]) -> None:
        with metered(self.server_pids) as use:
            result = run()
        self.cpu.setdefault(key, []).append(use.per_request_us(result.done))
        self.mixed.setdefault(key, []).append(result)


@dataclass(frozen=True)
class Target:
    """One server under test as the load generators see it: its URL, the path of each of
    cloud-init's paths on it (nginx: the flat file), and the headers every request carries."""

    name: str
    url: str
    paths: list[str]
    headers: dict[str, str]


def plain_wrk(what: str, url: str, headers: dict[str, str], seconds: float) -> H2loadResult:
    """wrk without a script (one path, its headers from -H): wrk at its cheapest."""
    command = [require_tool("wrk", "wrk"), "-t2", "-c8", f"-d{int(seconds)}s"]
    for name, value in headers.items():
        command += ["-H", f"{name}: {value}"]
    done = subprocess.run([*command, url], capture_output=True, text=True, check=True)
    rate = next(x for x in done.stdout.splitlines() if x.startswith("Requests/sec:"))
    count = next(x for x in done.stdout.splitlines() if " requests in " in x)
    non_2xx = next((x for x in done.stdout.splitlines() if "Non-2xx" in x), "")
    errors = int(non_2xx.split()[-1]) if non_2xx else 0
    requests = int(count.split()[0])
    result = H2loadResult(what, float(rate.split()[1]), requests, requests, 0, errors, "")
    print(f"{what}: {result.rps:,.0f} req/s, {errors} non-2xx", flush=True)
    return result


def mixed_passes(target: Target, work: Path, args: argparse.Namespace, results: Results) -> None:
    """The crawl rotated by h2load (in C), and one path alone by h2load and by plain wrk."""
    uris = write_uris(work / f"uris-{target.name}.txt", target.url, target.paths)
    for connections in (8, 256):
        key = f"{target.name}, h2load 8 paths rotating, {connections} connections"
        command = h2load_command(uris, target.headers, connections, args.duration)
        results.add_mixed(key, partial(run_h2load, key, command))
    single = target.paths[PATHS.index(args.single_path)]
    one = write_uris(work / f"uri-{target.name}.txt", target.url, [single])
    key = f"{target.name}, h2load {args.single_path} alone, 8 connections"
    command = h2load_command(one, target.headers, 8, args.duration)
    results.add_mixed(key, partial(run_h2load, key, command))
    key = f"{target.name}, wrk (no Lua) {args.single_path} alone, 8 connections"
    results.add_mixed(
        key, lambda: plain_wrk(key, target.url + single, target.headers, args.duration)
    )


def wrk(url: str, target: str, files: StormFiles, connections: int, seconds: float) -> list[str]:
    args = SimpleNamespace(threads=2, connections=connections)
    return wrk_command(args, url, target, files, seconds, one_cycle=False)  # type: ignore[arg-type]


def check_paths(port: int, instance_id: str) -> None:
    with httpx.Client(
        base_url=f"http://127.0.0.1:{port}", headers=proxy_headers(instance_id)
    ) as client:
        for path in PATHS:
            response = client.get(path)
            if response.status_code != 200:
                sys.exit(f"{path}: {response.status_code} {response.text[:200]}")


GRANIAN_APP = """
from cloudseed.metadata.app import create_metadata_app
from cloudseed.metadata.tokens import with_shared_key
from cloudseed.settings import load_settings


def app():
    settings = load_settings(overrides={("DEFAULT", "state_path"): %r})
    return create_metadata_app(with_shared_key(settings))
"""


@contextlib.contextmanager
def running_granian(data: Path, work: Path) -> Iterator[int]:
    """granian on its own (its 2 worker processes, its sockets, its default event loop),
    serving the same metadata app as ``cloudseed serve``: granian at its best, outside
    serve.py's worker model."""
    (work / "granian_app.py").write_text(GRANIAN_APP % str(data))
    port = free_port()
    env = {
        **os.environ,
        "CLOUDSEED_NEUTRON__SERVICE_METADATA_PROXY": "true",
        "CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET": storm_identity.SECRET,
        "CLOUDSEED_LOG_LEVEL": "warning",
        "PYTHONPATH": str(work),
    }
    command = [
        venv_tool("granian", "pip install granian into the venv"),
        *("--interface", "asgi", "--workers", "2", "--factory", "--no-ws", "--http", "1"),
        *("--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"),
        "granian_app:app",
    ]
    process = subprocess.Popen(command, env=env, cwd=work)
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"http://127.0.0.1:{port}/", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("granian did not start")
            time.sleep(0.1)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)


def measure_granian(
    data: Path,
    work: Path,
    instance_id: str,
    files: StormFiles,
    args: argparse.Namespace,
    results: Results,
) -> None:
    with running_granian(data, work) as port:
        url = f"http://127.0.0.1:{port}"
        check_paths(port, instance_id)
        passes(url, "granian (standalone)", files, args, results)


def passes(
    url: str, name: str, files: StormFiles, args: argparse.Namespace, results: Results
) -> None:
    run_wrk("warm-up", wrk(url, "cloudseed", files, 8, 2))
    for connections in (8, 256):
        command = wrk(url, "cloudseed", files, connections, args.duration)
        results.add(
            f"{name}, {connections} connections",
            partial(run_wrk, f"{name} c{connections}", command),
        )
    if args.no_paced:
        return
    command = wrk(url, "cloudseed", files, 256, args.duration)
    results.add(
        f"{name}, 256 connections, paced",
        lambda: run_wrk(f"{name} paced", command, PACED_DELAY_MS),
    )


def measure_server(
    name: str,
    work: Path,
    data: Path,
    instance_id: str,
    files: StormFiles,
    args: argparse.Namespace,
    results: Results,
    source: Path | None = None,
) -> None:
    """``cloudseed serve --workers 2`` (uvicorn); ``source``: a checkout's src/ to run
    instead of the installed code (the "before" of a change)."""
    saved = os.environ.get("PYTHONPATH")
    if source is not None:
        os.environ["PYTHONPATH"] = str(source)
    try:
        with running_server(data, workers=2) as server:
            url = f"http://127.0.0.1:{server.metadata_port}"
            check_paths(server.metadata_port, instance_id)
            results.server_pids = server.worker_pids
            results.loads.append(load_average())
            passes(url, name, files, args, results)
            if args.mixed:
                headers = proxy_headers(instance_id)
                mixed_passes(Target(name, url, PATHS, headers), work, args, results)
            if args.profile and results.profile is None and source is None:
                command = wrk(url, "cloudseed", files, 8, args.profile_seconds + 4)
                results.profile = profile_worker(
                    SimpleNamespace(profile_seconds=args.profile_seconds),  # type: ignore[arg-type]
                    server.worker_pids()[0],
                    command,
                    data / "profile.txt",
                )
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def measure_nginx(
    root: Path,
    prefix: Path,
    instance_id: str,
    files: StormFiles,
    args: argparse.Namespace,
    results: Results,
) -> None:
    with running_nginx(root, prefix, workers=2) as url:
        results.server_pids = lambda: with_children(pids_matching(str(prefix)))
        if args.mixed:
            flat = [f"/{instance_id}/{flat_name(p)}" for p in PATHS]
            target = Target("nginx", url, flat, proxy_headers(instance_id))
            mixed_passes(target, prefix, args, results)
        run_wrk("warm-up", wrk(url, "nginx", files, 8, 2))
        for connections in (8, 256):
            command = wrk(url, "nginx", files, connections, args.duration)
            results.add(
                f"nginx, {connections} connections",
                partial(run_wrk, f"nginx c{connections}", command),
            )


def measure_nova(work: Path, args: argparse.Namespace, results: Results) -> None:
    """Nova's uwsgi (storm_nova_md.py): wrk's Lua rotation at 8 and 256 connections, and one
    path alone by plain wrk (uwsgi closes each connection after its answer, which h2load
    does not reconnect from; wrk does, counting a socket error each time)."""
    files = StormFiles(work / "nova-instances.txt", work / "nova-paths.txt")
    files.instances.write_text(nova_instances_line() * 2)
    files.paths.write_text("".join(f"{p} {flat_name(p)}\n" for p in PATHS))
    with running_nova_uwsgi(work / "nova-uwsgi.log") as url:
        listen = url.removeprefix("http://")
        results.server_pids = lambda: pids_matching(listen)
        run_wrk("warm-up", wrk(url, "cloudseed", files, 8, 2))
        for connections in (8, 256):
            key = f"Nova uwsgi, {connections} connections"
            command = wrk(url, "cloudseed", files, connections, args.duration)
            results.add(key, partial(run_wrk, key, command))
        key = f"Nova uwsgi, wrk (no Lua) {args.single_path} alone, 8 connections"
        results.add_mixed(
            key, lambda: plain_wrk(key, url + args.single_path, nova_headers(), args.duration)
        )


def table(results: Results) -> str:
    rows = [
        "| Pass | Requests/s (best) | Rounds | p50 | p99 | p99.9 | max | Errors |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for key, found in results.passes.items():
        b = best(found)
        errors = sum(b.socket_errors.values()) + sum(
            n for status, n in b.statuses.items() if status != 200
        )
        lat = b.latency_us
        rows.append(
            f"| {key} | {b.rps:,.0f} | {' / '.join(f'{r.rps:,.0f}' for r in found)} "
            f"| {lat['p50'] / 1000:.2f} ms | {lat['p99'] / 1000:.2f} ms "
            f"| {lat['p999'] / 1000:.2f} ms | {lat['max'] / 1000:.1f} ms | {errors} |"
        )
    return "\n".join(rows)


def mixed_table(results: Results) -> str:
    rows = [
        "| Pass (h2load --h1 / plain wrk) | Requests/s (best) | Rounds | Errors |",
        "|---|---:|---|---:|",
    ]
    for key, found in results.mixed.items():
        b = max(found, key=lambda r: r.rps)
        rounds = " / ".join(f"{r.rps:,.0f}" for r in found)
        rows.append(f"| {key} | {b.rps:,.0f} | {rounds} | {b.errors} |")
    return "\n".join(rows)


def cpu_table(results: Results) -> str:
    rows = [
        "| Pass | Load generator CPU µs/request | Server CPU µs/request |",
        "|---|---:|---:|",
    ]
    for key, rounds in results.cpu.items():
        client = min(c for c, _ in rounds)
        servers = [s for _, s in rounds if s is not None]
        server = f"{min(servers):.1f}" if servers else "n/a"
        rows.append(f"| {key} | {client:.1f} | {server} |")
    return "\n".join(rows)


def section(results: Results, args: argparse.Namespace) -> str:
    lines = [
        "## Metadata service: one warm guest (cloudseed, granian, nginx)",
        "",
        f"- Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
        f"- Machine: {os.cpu_count()} CPUs ({cpu_model()}), Linux {platform.release()}, "
        f"Python {platform.python_version()}; load average (1, 5, 15 min) at the start of each "
        f"round: {', '.join(results.loads)}",
        f"- Command: `.venv/bin/python "
        f"{shlex.join(['bench/metadata_one_guest.py', *sys.argv[1:]])}` "
        "(`--before`: `git archive <commit> src | tar -x -C /tmp/base`, then `/tmp/base/src`)",
        f"- Code: {code_version()}",
        "- Servers: `cloudseed serve --workers 2` (uvicorn, serve.py's worker model) on "
        "SQLite behind a simulated Neutron metadata proxy (every request signed: "
        "`X-Instance-ID`, `X-Tenant-ID`, `X-Instance-ID-Signature`), one guest (key pair, "
        'user data, 3 metadata items), every document cached; "before": the same with '
        "`--before` (the code of the commit before the at-once answers); granian "
        "(standalone): `granian --interface asgi --workers 2 --http 1` serving the same "
        "metadata app from the same database",
        f"- Load: `wrk -t2 --latency` on the same cores with bench/metadata_storm_wrk.lua, "
        f"cycling cloud-init's 8 usual paths ({', '.join(f'`{p}`' for p in PATHS)}); "
        f"{args.duration:g} s per pass, {args.rounds} rounds alternating the servers, best "
        f"round shown (all rounds listed); paced: each connection waits {PACED_DELAY_MS} ms "
        "after an answer",
        f"- nginx {nginx_version()}: 2 workers serving the same bytes as static files, "
        "same requests and headers",
        "",
        table(results),
    ]
    if results.mixed:
        lines += ["", mixed_table(results)]
    lines += ["", cpu_table(results)]
    if results.profile is not None:
        lines += [
            "",
            *profile_lines(
                SimpleNamespace(
                    profile=results.profile,
                    args=SimpleNamespace(profile_seconds=args.profile_seconds),
                )
            ),
        ]  # type: ignore[arg-type]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--before", type=Path, help="a checkout's src/ to measure too, as the code before"
    )
    parser.add_argument("--granian", action="store_true", help="granian (standalone) too")
    parser.add_argument("--duration", type=float, default=10, help="seconds per pass")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-nginx", action="store_true")
    parser.add_argument("--profile", action="store_true", help="py-spy on one worker")
    parser.add_argument("--profile-seconds", type=int, default=8)
    parser.add_argument("--write", type=Path)
    parser.add_argument("--mixed", action="store_true", help="h2load's rotation and one path")
    parser.add_argument("--single-path", default="/openstack/latest/user_data", choices=PATHS)
    parser.add_argument("--nova", action="store_true", help="Nova 34's uwsgi (the peers') too")
    parser.add_argument("--no-paced", action="store_true", help="leave out the paced pass")
    args = parser.parse_args()
    results = Results()
    with tempfile.TemporaryDirectory(prefix="one-guest-") as tmp:
        work = Path(tmp)
        data = work / "data"
        data.mkdir()
        registries = register(data)
        with running_server(data, workers=2) as server:
            instance_id = seed(server, registries, 1, 1, 1).instances[0]
            root = None
            if not args.no_nginx:
                root = fetch_documents(
                    server.metadata_port, [instance_id], PATHS, work / "static"
                ).root
        # The same guest twice: each of wrk's two threads takes one line.
        files = write_storm_files(work / "storm", [instance_id, instance_id], PATHS)
        for round_no in range(args.rounds):
            if args.before is not None:
                measure_server(
                    "cloudseed before",
                    work,
                    data,
                    instance_id,
                    files,
                    args,
                    results,
                    args.before,
                )
            measure_server("cloudseed", work, data, instance_id, files, args, results)
            if args.granian:
                measure_granian(data, work, instance_id, files, args, results)
            if args.nova:
                measure_nova(work, args, results)
            if root is not None:
                measure_nginx(root, work / f"nginx{round_no}", instance_id, files, args, results)
            time.sleep(1)
    text = section(results, args)
    print(text)
    if args.write:
        write_section(args.write, START, END, text)


if __name__ == "__main__":
    main()
