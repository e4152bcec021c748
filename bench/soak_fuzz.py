"""The soak's fuzzer: hostile requests to every compute API route and metadata path, drawn by
the fuzzers' own strategies (tests/support/fuzz_requests.py), sent at a steady rate to the
deployment while the load and the chaos run.

It acts as users of two projects of its own (``fuzz``, which owns a server, a key pair and an
instance quota of 10, and ``other``, which owns nothing): never as an administrator, so what it
may change is its own project's, and the soak's servers, which it names now and then, must stay
out of its reach (404). Metadata requests are sent half the time with the proxy headers of the
fuzz project's server, so that hostile paths and queries get past identification.

The requests come in batches of 50, batch n drawn from the seed ``seed + n``: the same
requests in the same order on every run (their answers may differ: the world they meet does).
Every answer goes to the ledger; a 4xx from the compute API that is not a Nova fault (or
Glance's body under ``/image/``) is recorded as a fault of its own (``bad-fault``).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

import httpx
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from soak_ledger import NO_KEEPALIVE, Ledger

from tests.support.fuzz_requests import (
    ROUTES,
    Request,
    Targets,
    check_fault,
    compute_requests,
    metadata_requests,
    send,
)

FUZZ_PROJECT = "fuzz"
FUZZ_USER = f"fuzz:{FUZZ_PROJECT}"
OTHER_USER = "other:other"
BATCH = 50  # examples per hypothesis run; the fuzzer starts another until told to stop
LIMITS = httpx.Limits(max_keepalive_connections=NO_KEEPALIVE)


def fuzz_targets(
    server_id: str, image_id: str, network_id: str, soak_servers: tuple[str, ...]
) -> Targets:
    return Targets(
        server_id=server_id,
        image_id=image_id,
        image2_id=image_id,
        network_id=network_id,
        key_name="fuzzkey",
        tokens=(FUZZ_USER, FUZZ_USER, OTHER_USER),
        projects=(FUZZ_PROJECT, "other", "%00"),
        foreign_servers=soak_servers,
    )


def requests(targets: Targets) -> st.SearchStrategy[tuple[str, Request, bool]]:
    """(listener, request, signed): ``signed`` adds the fuzz server's proxy headers."""
    compute = st.sampled_from(ROUTES).flatmap(lambda mp: compute_requests(mp[0], mp[1], targets))
    return st.one_of(
        st.tuples(st.just("api"), compute, st.just(False)),
        st.tuples(st.just("metadata"), metadata_requests(), st.booleans()),
    )


class Fuzzer:
    def __init__(
        self,
        *,
        api_url: str,
        metadata_url: str,
        targets: Targets,
        proxy_headers: Callable[[str], dict[str, str]],
        ledger: Ledger,
        rate: float,
        seed: int,
    ) -> None:
        self.api_url, self.metadata_url = api_url, metadata_url
        self.seed = seed
        self.targets = targets
        self.proxy_headers = proxy_headers
        self.ledger = ledger
        self.interval = 1 / rate
        self.sent = 0

    def run(self, stop: threading.Event) -> None:
        with (
            httpx.Client(base_url=self.api_url, timeout=60, limits=LIMITS) as api,
            httpx.Client(base_url=self.metadata_url, timeout=60, limits=LIMITS) as metadata,
        ):
            strategy = requests(self.targets)

            def one(case: tuple[str, Request, bool]) -> None:
                if stop.wait(self.interval):
                    return
                listener, request, signed = case
                if signed:
                    own = self.proxy_headers(self.targets.server_id)
                    request = Request(
                        request.method,
                        request.path,
                        request.query,
                        {**own, **request.headers},
                        request.body,
                    )
                self._one(api if listener == "api" else metadata, listener, request)

            # Batch n draws from seed n: the same requests in the same order on every run.
            for n in itertools.count(self.seed):
                if stop.is_set():
                    return
                run_batch = settings(
                    max_examples=BATCH,
                    database=None,
                    deadline=None,
                    phases=[Phase.generate],
                    suppress_health_check=list(HealthCheck),
                )(seed(n)(given(case=strategy)(one)))
                run_batch()

    def _one(self, client: httpx.Client, listener: str, request: Request) -> None:
        channel = f"fuzz-{listener}"
        kind = f"{request.method} {request.path.split('?')[0][:60]}"
        started = time.time()
        self.sent += 1
        try:
            response = send(client, request)
        except httpx.TransportError as exc:
            self.ledger.failure(channel, "hostile", exc, started)
            return
        self.ledger.answer(
            channel, "hostile", response.status_code, started, f"{kind}: {response.text[:200]}"
        )
        if listener == "api" and 400 <= response.status_code < 500:
            try:
                check_fault(response)
            except AssertionError as exc:
                self.ledger.shape_fault(channel, kind, str(exc), started)
