"""Real DynamicJSON targets for the vendordata tests: one Starlette app served by uvicorn in a
background thread on a loopback port the kernel picks, one path per behaviour.

Every request is recorded (path, headers, body) before it is answered, so a test can count the
calls each target got and check what cloudseed sent. Paths:

- ``/record``        200 with ``{"instance": <instance-id>, "n": <call number>}``, no caching
  headers (so every request calls it again);
- ``/slow``          sleeps ``slow_seconds`` and answers ``{}``; ``/slow-for-some`` does so only
  for instance ids starting with ``slow-``, and answers at once otherwise;
- ``/error``         500; ``/not-json`` 200 with an HTML page; ``/empty`` 200 with no body;
- ``/cached``        ``Cache-Control: max-age=<cached_max_age>`` and an ETag; answers 304 (with
  the same Cache-Control) to a matching ``If-None-Match``;
- ``/no-store``      ``Cache-Control: no-store``;
- ``/flaky``         ``Cache-Control: no-cache``; 500 while ``flaky_failing`` is set;
- ``/token``         asks ``check_token`` about the ``X-Auth-Token`` it got: 401 if it returns
  None, else 200 with what it returned; ``/token-once`` refuses the first token it ever sees
  (as if it had been revoked) and then behaves like ``/token``.

``/redirect`` answers 307 to ``/record``.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.support.waiting import wait_until

TokenCheck = Callable[[str | None], Any]


@dataclass(frozen=True)
class Call:
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Targets:
    base_url: str
    check_token: TokenCheck
    slow_seconds: float = 3.0
    cached_max_age: int = 1
    flaky_failing: bool = False
    calls: list[Call] = field(default_factory=list)
    refused_tokens: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str) -> str:
        return f"{self.base_url}{path}"

    def calls_to(self, path: str, instance_id: str | None = None) -> list[Call]:
        with self._lock:
            return [
                c
                for c in self.calls
                if c.path == path
                and (instance_id is None or c.json.get("instance-id") == instance_id)
            ]

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self.refused_tokens.clear()
        self.flaky_failing = False

    def _record(self, call: Call) -> int:
        with self._lock:
            self.calls.append(call)
            return sum(1 for c in self.calls if c.path == call.path)


def _app(targets: Targets) -> Starlette:
    async def recorded(request: Request) -> tuple[Call, int]:
        call = Call(
            request.url.path,
            {k.lower(): v for k, v in request.headers.items()},
            await request.body(),
        )
        return call, targets._record(call)

    async def record(request: Request) -> Response:
        call, n = await recorded(request)
        return JSONResponse({"instance": call.json["instance-id"], "n": n})

    async def slow(request: Request) -> Response:
        await recorded(request)
        await asyncio.sleep(targets.slow_seconds)
        return JSONResponse({})

    async def slow_for_some(request: Request) -> Response:
        call, _ = await recorded(request)
        instance = call.json["instance-id"]
        if instance.startswith("slow-"):
            await asyncio.sleep(targets.slow_seconds)
        return JSONResponse({"instance": instance})

    async def error(request: Request) -> Response:
        await recorded(request)
        return JSONResponse({"error": "boom"}, status_code=500)

    async def not_json(request: Request) -> Response:
        await recorded(request)
        return Response("<html>maintenance</html>", media_type="text/html")

    async def deep(request: Request) -> Response:
        await recorded(request)
        return Response(b"[" * 100_000 + b"]" * 100_000, media_type="application/json")

    async def empty(request: Request) -> Response:
        await recorded(request)
        return Response(b"", status_code=200)

    async def cached(request: Request) -> Response:
        call, n = await recorded(request)
        etag = f'"{call.json["instance-id"]}-v1"'
        cache_control = f"max-age={targets.cached_max_age}"
        if request.headers.get("if-none-match") == etag:
            return Response(status_code=304, headers={"ETag": etag, "Cache-Control": cache_control})
        return JSONResponse(
            {"instance": call.json["instance-id"], "n": n},
            headers={"ETag": etag, "Cache-Control": cache_control},
        )

    async def no_store(request: Request) -> Response:
        _, n = await recorded(request)
        return JSONResponse({"n": n}, headers={"Cache-Control": "no-store"})

    async def flaky(request: Request) -> Response:
        _, n = await recorded(request)
        if targets.flaky_failing:
            return JSONResponse({"error": "down"}, status_code=500)
        return JSONResponse({"n": n}, headers={"Cache-Control": "no-cache"})

    async def token(request: Request) -> Response:
        await recorded(request)
        return await _checked(request.headers.get("x-auth-token"))

    async def token_once(request: Request) -> Response:
        await recorded(request)
        seen = request.headers.get("x-auth-token")
        with targets._lock:
            refuse = seen is not None and not targets.refused_tokens
            if refuse:
                targets.refused_tokens.append(seen or "")
        if refuse:
            return JSONResponse({"error": "token revoked"}, status_code=401)
        return await _checked(seen)

    async def _checked(seen: str | None) -> Response:
        verdict = await run_in_threadpool(targets.check_token, seen)
        if verdict is None:
            return JSONResponse({"error": "bad token"}, status_code=401)
        return JSONResponse(verdict)

    async def redirect(request: Request) -> Response:
        await recorded(request)
        return Response(status_code=307, headers={"Location": "/record"})

    handlers = {
        "/record": record,
        "/slow": slow,
        "/slow-for-some": slow_for_some,
        "/error": error,
        "/not-json": not_json,
        "/deep": deep,
        "/empty": empty,
        "/cached": cached,
        "/no-store": no_store,
        "/flaky": flaky,
        "/token": token,
        "/token-once": token_once,
        "/redirect": redirect,
    }
    return Starlette(
        routes=[Route(path, handler, methods=["POST"]) for path, handler in handlers.items()]
    )


def _static_token(expected: str) -> TokenCheck:
    def check(seen: str | None) -> Any:
        return {"token": "accepted"} if seen == expected else None

    return check


@contextmanager
def running_targets(
    *,
    check_token: TokenCheck | None = None,
    ssl_certfile: str | None = None,
    ssl_keyfile: str | None = None,
) -> Iterator[Targets]:
    """Serve the targets; ``check_token`` defaults to accepting only ``target-token``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    scheme = "https" if ssl_certfile else "http"
    targets = Targets(
        base_url=f"{scheme}://127.0.0.1:{port}",
        check_token=check_token or _static_token("target-token"),
    )
    config = uvicorn.Config(
        _app(targets),
        lifespan="off",
        log_level="warning",
        access_log=False,
        http="h11",
        ws="none",
        ssl_certfile=ssl_certfile,
        ssl_keyfile=ssl_keyfile,
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    loop = asyncio.new_event_loop()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.serve(sockets=[sock]))

    thread = threading.Thread(target=run, name="vendordata-targets", daemon=True)
    thread.start()

    def started() -> bool:
        if not thread.is_alive():
            raise RuntimeError("vendordata test targets did not start (their thread ended)")
        return bool(server.started)

    try:
        wait_until(
            started, timeout=15, max_interval=0.01, what="the vendordata test targets started"
        )
    except AssertionError as exc:
        raise RuntimeError(f"vendordata test targets did not start: {exc}") from None
    try:
        yield targets
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        loop.close()
        sock.close()
