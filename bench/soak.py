"""Soak under faults (issue 30): cloudseed as separate processes on a private PostgreSQL, under a
steady mix of users, guests and a fuzzer for ``--minutes``, while a chaos loop kills an agent
or a serve worker with SIGKILL every minute and restarts PostgreSQL once; then the checks.

The deployment (bench/soak_processes.py): an API node and a metadata node (``cloudseed serve
--no-compute --workers 2`` each), two compute agents (``cloudseed compute --host soak-1`` and
``soak-2``, fake driver), one config file, a PostgreSQL cluster of the soak's own
(tests/support/private_postgres.py). The load, all at once:

- users (bench/soak_load.py): creates, rebuilds with new keys and user data, user data and
  key changes of running servers (2.105, 2.106), metadata changes, deletes, key pairs;
- guests (bench/soak_guests.py): one per server, reading their metadata through a signed
  metadata proxy's headers, a quarter of them holding long-polls;
- a fuzzer (bench/soak_fuzz.py): the test suite's hostile requests (tests/support/
  fuzz_requests.py) to every route of both listeners;
- chaos (bench/soak_chaos.py).

What must hold at the end (bench/soak_ledger.py, soak_checks.py, soak_resources.py): no 5xx
but the 503s of the database's outage, no request left without an answer but those cut by a
kill, every operation ended (failed ones with a reason), every guest served what the API says,
memory flat after warm-up, no descriptor or thread growth. Any fault: exit status 1.

Usage (repository root, the project's venv; ``make soak``)::

    .venv/bin/python bench/soak.py [--minutes 30] [--guests 2000] [--write docs/benchmarks.md]

tests/functional/test_soak.py runs the same code for about a minute with small numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import resource
import shutil
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

# tests/support: the private PostgreSQL, the fuzzers' strategies, keys, ports.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from soak_chaos import Chaos
from soak_checks import (
    check_guests,
    check_metrics,
    check_operations,
    check_servers,
    list_servers,
    settle,
)
from soak_fuzz import FUZZ_PROJECT, Fuzzer, fuzz_targets
from soak_guests import GuestFleet, proxy_headers
from soak_ledger import judge
from soak_load import KEY_POOL, PROJECT, Users
from soak_plan import Plan, Result
from soak_processes import HOSTS, Deployment, Sampler, ServeNode, descriptor_kinds, new_secret
from soak_resources import Quiet, descriptor_faults, incarnations, memory_faults
from soak_setup import (
    SEED_EXPECTED,
    log_names,
    logged_errors,
    register,
    seed,
    wait_for_hosts,
)

from tests.support.keys import ed25519_public
from tests.support.ports import free_port
from tests.support.private_postgres import PrivatePostgres, private_postgres


def raise_open_files_limit() -> None:
    """Every waiting guest holds a connection: the soft limit (often 1,024) must go up."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def run_soak(plan: Plan, workdir: Path, log: Callable[[str], None] = print) -> Result:
    """Run the whole soak in ``workdir`` (kept for the logs) and return what it found."""
    raise_open_files_limit()
    result = Result(plan, started=time.time())
    rng = random.Random(plan.seed)
    with private_postgres(free_port(), "cloudseed_api", "cloudseed_cell1") as postgres:
        deployment = Deployment(
            root=workdir,
            api_db_url=postgres.url("cloudseed_api"),
            cell_db_url=postgres.url("cloudseed_cell1"),
            secret=new_secret(),
            lease_seconds=plan.lease_seconds,
            delay_ms=plan.delay_ms,
        )
        deployment.write_config()
        try:
            _run(plan, deployment, postgres, result, rng, log)
        except Exception:
            result.errors.append(f"the soak itself failed:\n{traceback.format_exc()}")
        finally:
            deployment.stop()
    result.finished = time.time()
    return result


def _run(
    plan: Plan,
    deployment: Deployment,
    postgres: PrivatePostgres,
    result: Result,
    rng: random.Random,
    log: Callable[[str], None],
) -> None:
    image_id, network_id = register(deployment)
    api = deployment.start_node("api", free_port(), free_port())
    metadata = deployment.start_node("metadata", free_port(), free_port())
    for host in HOSTS:
        deployment.start_agent(host)
    api_url = f"http://127.0.0.1:{api.api_port}"
    metadata_url = f"http://127.0.0.1:{metadata.metadata_port}"
    wait_for_hosts(api_url)
    log(f"deployment up in {deployment.root}: {deployment.pids()}")

    keys = {name: ed25519_public(f"{name}@soak") for name in KEY_POOL}
    began = time.monotonic()
    seeded = seed(api_url, plan, image_id, network_id, keys, log)
    result.seeding_seconds = time.monotonic() - began
    log(f"{len(seeded.guests)} + {len(seeded.churn)} servers in {result.seeding_seconds:.0f} s")

    ledger = result.ledger
    guests = GuestFleet(
        metadata_url=metadata_url,
        secret=deployment.secret,
        project=PROJECT,
        ledger=ledger,
        rng=random.Random(rng.random()),
        read_period=plan.read_period,
        wait_range=plan.wait_range,
        waiter_share=plan.waiter_share,
    )
    users = Users(
        api_url=api_url,
        ledger=ledger,
        guests=guests,
        image_id=image_id,
        rng=random.Random(rng.random()),
        concurrency=plan.op_clients,
        rate=plan.op_rate,
        churn_target=plan.churn,
        scratch_key=ed25519_public("scratch@soak"),
    )
    users.track(seeded.guests, SEED_EXPECTED, seeded=True)
    users.track(seeded.churn, SEED_EXPECTED, seeded=False)
    for server_id in seeded.guests:
        guests.add(server_id, seeded=True)
    for server_id in seeded.churn:
        guests.add(server_id, seeded=False)
    result.users, result.guests = users, guests
    fuzzer = Fuzzer(
        api_url=api_url,
        metadata_url=metadata_url,
        targets=fuzz_targets(
            seeded.fuzz_server, image_id, network_id, tuple(list(seeded.guests)[:20])
        ),
        proxy_headers=lambda server_id: proxy_headers(deployment.secret, FUZZ_PROJECT, server_id),
        ledger=ledger,
        rate=plan.fuzz_rate,
        seed=plan.seed * 1000,
    )
    chaos = Chaos(
        deployment=deployment,
        postgres=postgres,
        ledger=ledger,
        interval=plan.chaos_interval,
        outage_seconds=plan.outage_seconds,
    )
    result.chaos = chaos
    sampler = Sampler(deployment, plan.sample_seconds)
    ports = {p for n in deployment.nodes.values() for p in (n.api_port, n.metadata_port)}

    def quiet() -> Quiet:
        return {
            role: (pid, descriptor_kinds(pid, ports, postgres.port))
            for role, pid in deployment.pids().items()
        }

    result.quiet_before = quiet()
    _soak(plan, result, sampler, users, guests, fuzzer, chaos, log)
    result.fuzz_sent = fuzzer.sent
    log("load stopped; waiting for every operation to end")
    _check(plan, deployment, result, api_url, metadata, keys)
    time.sleep(2)  # the servers' side of the checks' connections closes
    result.quiet_after = quiet()
    sampler.take()
    _write_samples(deployment.root / "samples.csv", sampler)
    # Warm-up: a share of the run, and at least until each kind of fault has happened once.
    warmed = chaos.warmed_up()
    if warmed is None:
        result.errors.append("the chaos loop did not get through every kind of fault")
    result.warmup_seconds = max(plan.warmup_share * plan.seconds, warmed or 0.0)
    warm_end = result.load_started + result.warmup_seconds
    result.samples = sampler.samples
    result.incarnations = incarnations(
        sampler.samples, result.load_started, warm_end, result.load_ended
    )
    findings = result.findings
    findings.faults += memory_faults(result.incarnations, plan.memory_allowance_mib)
    findings.faults += descriptor_faults(result.quiet_before, result.quiet_after)
    result.judgement = judge(ledger, plan.grace)
    for name in log_names(deployment):
        for message, count in logged_errors(deployment.root / f"{name}.log").most_common(8):
            result.logged.append((name, message, count))


def _soak(
    plan: Plan,
    result: Result,
    sampler: Sampler,
    users: Users,
    guests: GuestFleet,
    fuzzer: Fuzzer,
    chaos: Chaos,
    log: Callable[[str], None],
) -> None:
    """The load, the fuzzer and the chaos for ``plan.seconds``, sampled all along."""
    stop_load, stop_chaos = threading.Event(), threading.Event()
    sampling = _thread("sampler", lambda: sampler.run(stop_load), result)
    load = _thread("load", lambda: _load(users, guests, stop_load, result), result)
    fuzzing = _thread("fuzzer", lambda: fuzzer.run(stop_load), result)
    chaotic = _thread("chaos", lambda: chaos.run(stop_chaos, plan.seconds), result)
    sampler.take()
    result.load_started = time.time()
    for thread in (sampling, load, fuzzing, chaotic):
        thread.start()
    log(f"load and chaos for {plan.seconds:.0f} s")
    deadline = result.load_started + plan.seconds
    while time.time() < deadline and not result.errors:
        time.sleep(min(plan.seconds / 20, max(0.0, deadline - time.time())))
        log(
            f"+{time.time() - result.load_started:.0f} s: {result.ledger.total():,} answers, "
            f"{len(result.ledger.anomalies)} 5xx or cut"
        )
    stop_chaos.set()
    chaotic.join()
    sampler.take()
    result.load_ended = time.time()
    stop_load.set()
    for thread in (load, fuzzing, sampling):
        thread.join()


def _check(
    plan: Plan,
    deployment: Deployment,
    result: Result,
    api_url: str,
    metadata: ServeNode,
    keys: dict[str, str],
) -> None:
    """Every check, each on its own: one that cannot run is an error of the soak's, and the
    others (and the processes' numbers) still come."""
    findings, users = result.findings, result.users
    assert users is not None

    def step(name: str, check: Callable[[], None]) -> None:
        try:
            check()
        except Exception:
            result.errors.append(f"the {name} check failed:\n{traceback.format_exc()}")

    def settled() -> None:
        try:
            result.settle_seconds = settle(deployment.cell_db_url, plan.lease_seconds * 3 + 180)
        except TimeoutError as exc:
            findings.fault(f"operations never settled: {exc}")

    step("settling", settled)
    step("operations", lambda: check_operations(deployment.cell_db_url, users, findings))
    listed = list_servers(api_url)
    step("servers", lambda: check_servers(listed, users, findings))
    step(
        "guests",
        lambda: check_guests(
            listed,
            metadata_port=metadata.metadata_port,
            workers=metadata.workers(),
            secret=deployment.secret,
            keys=keys,
            findings=findings,
        ),
    )
    metadata_url = f"http://127.0.0.1:{metadata.metadata_port}"
    step("metrics", lambda: check_metrics(api_url, metadata_url, len(listed), findings))


def _write_samples(path: Path, sampler: Sampler) -> None:
    """Every sample, for a closer look than the report's (the work directory is kept with
    ``--keep`` and when the run failed)."""
    with path.open("w") as out:
        out.write("time,role,pid,rss_kib,fds,sockets,threads\n")
        for s in sampler.samples:
            u = s.usage
            out.write(f"{s.at:.1f},{s.role},{s.pid},{u.rss_kib},{u.fds},{u.sockets},{u.threads}\n")


def _thread(name: str, target: Callable[[], None], result: Result) -> threading.Thread:
    def run() -> None:
        try:
            target()
        except Exception:
            result.errors.append(f"the {name} thread failed:\n{traceback.format_exc()}")

    return threading.Thread(target=run, name=f"soak-{name}", daemon=True)


def _load(users: Users, guests: GuestFleet, stop: threading.Event, result: Result) -> None:
    async def main() -> None:
        stopping = asyncio.Event()

        async def watch() -> None:
            # How late the loop runs what is due: on a busy machine the load generator itself
            # falls behind, which the report says.
            while not stop.is_set():
                due = time.monotonic() + 0.2
                await asyncio.sleep(0.2)
                result.loop_lag = max(result.loop_lag, time.monotonic() - due)
            stopping.set()

        await asyncio.gather(watch(), users.run(stopping), guests.run(stopping))

    asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--guests", type=int, default=2000)
    parser.add_argument("--write", type=Path, help="the markdown file to write the section to")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = parser.parse_args()
    from soak_report import section, write

    plan = Plan.full(args.minutes, args.guests)
    workdir = Path(tempfile.mkdtemp(prefix="cloudseed-soak-"))
    print(f"work directory: {workdir}", flush=True)
    try:
        result = run_soak(plan, workdir, log=lambda text: print(text, flush=True))
    except KeyboardInterrupt:
        print("interrupted; the deployment and its PostgreSQL are gone", file=sys.stderr)
        raise SystemExit(130) from None
    text = section(result, command=" ".join(["bench/soak.py", *sys.argv[1:]]))
    print(text)
    for error in result.errors:  # the report shortens them
        print(error, file=sys.stderr)
    if args.write:
        write(args.write, text)
    if not args.keep and not result.faults:
        shutil.rmtree(workdir, ignore_errors=True)
    if result.faults:
        print(f"{len(result.faults)} faults; logs in {workdir}", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
