"""Authentication for the compute API, as pure ASGI middleware.

Both strategies put a ``RequestContext`` in ``scope["cloudseed.context"]``; routes never look
at credentials themselves.

- ``noauth2`` (development): ``X-Auth-Token: <user_id>:<project_id>`` is believed as it stands;
  a token without ``:`` is both user and project. The user ``admin`` is an administrator.
- ``keystone``: keystonemiddleware's ``auth_token`` validates the token against Keystone (its
  options come from ``[keystone_authtoken]``), and we read the identity it vouches for.
  keystonemiddleware is WSGI and blocking, so it runs in a worker thread around a tiny WSGI app
  that only records what it was handed.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from typing import Any

import anyio.to_thread

from cloudseed.api.identity_cache import IdentityCache, expiry_of, token_key
from cloudseed.types import ASGIApp, Receive, Scope, Send
from cloudseed.web.context import CONTEXT_KEY, REQUEST_ID_KEY, RequestContext
from cloudseed.web.errors import NotAuthenticated
from cloudseed.web.faults import fault_parts, is_glance_path

ADMIN_ROLES = frozenset({"admin", "member", "reader"})
USER_ROLES = frozenset({"member", "reader"})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


class NoAuthMiddleware:
    def __init__(self, app: ASGIApp, *, is_public: Callable[[str], bool]) -> None:
        self.app = app
        self.is_public = is_public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self.is_public(scope["path"]):
            token = _header(scope, b"x-auth-token")
            if not token or not token.strip():
                raise NotAuthenticated()
            user_id, _, project_id = token.strip().partition(":")
            scope[CONTEXT_KEY] = RequestContext(
                user_id=user_id,
                project_id=project_id or user_id,
                roles=ADMIN_ROLES if user_id == "admin" else USER_ROLES,
                request_id=scope.get(REQUEST_ID_KEY, ""),
            )
        await self.app(scope, receive, send)


class KeystoneMiddleware:
    def __init__(
        self, app: ASGIApp, *, is_public: Callable[[str], bool], options: Mapping[str, str]
    ) -> None:
        self.app = app
        self.is_public = is_public
        self.auth = _auth_protocol(options)
        self.cache = IdentityCache.from_options(dict(options))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.is_public(scope["path"]):
            await self.app(scope, receive, send)
            return
        key = self._cache_key(scope)
        identity = self.cache.get(key) if self.cache is not None and key is not None else None
        if identity is None:
            outcome = await anyio.to_thread.run_sync(self._validate, _wsgi_environ(scope))
            if not isinstance(outcome[0], RequestContext):
                # keystonemiddleware's own refusal, passed through.
                status, headers, body = outcome
                await send({"type": "http.response.start", "status": status, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
            identity, expires_at = outcome
            if self.cache is not None and key is not None:
                self.cache.put(key, identity, expires_at=expires_at)
        scope[CONTEXT_KEY] = RequestContext(
            user_id=identity.user_id,
            project_id=identity.project_id,
            roles=identity.roles,
            request_id=scope.get(REQUEST_ID_KEY, ""),
        )
        await self.app(scope, receive, send)

    @staticmethod
    def _cache_key(scope: Scope) -> bytes | None:
        auth_token = service_token = None
        for name, value in scope["headers"]:
            if name == b"x-auth-token":
                auth_token = value
            elif name == b"x-service-token":
                service_token = value
        return token_key(auth_token, service_token) if auth_token else None

    def _validate(
        self, environ: dict[str, Any]
    ) -> tuple[RequestContext, float | None] | tuple[int, list[Any], bytes]:
        """(identity, token expiry) when keystonemiddleware accepted the token, else its
        answer (status, headers, body)."""
        started: dict[str, Any] = {}

        def start_response(
            status: str, headers: list[tuple[str, str]], exc_info: Any = None
        ) -> Callable[[bytes], None]:
            started["status"] = int(status.split(" ", 1)[0])
            started["headers"] = [(k.lower().encode(), v.encode()) for k, v in headers]
            return lambda _data: None

        body = b"".join(self.auth(environ, start_response))
        identity = environ.get("cloudseed.identity")
        if identity is not None:
            return identity, expiry_of(environ.get("keystone.token_info"))
        return started["status"], started["headers"], body


def _auth_protocol(options: Mapping[str, str]) -> Any:
    """keystonemiddleware's AuthProtocol reading ``[keystone_authtoken]`` through a private
    oslo.config object: handed a plain dict it would only know its own options (and warn about
    the auth plugin's, e.g. ``auth_url``), and would register options on the global CONF."""
    # Imported here: keystonemiddleware pulls in oslo.* and is only needed for this strategy.
    import configparser
    import tempfile

    from keystonemiddleware import auth_token
    from oslo_config import cfg

    parser = configparser.RawConfigParser()
    parser["keystone_authtoken"] = dict(options)
    # oslo.config reads files only; the file is private (0600) and gone once it is parsed.
    with tempfile.NamedTemporaryFile("w", suffix=".conf", encoding="utf-8") as fh:
        parser.write(fh)
        fh.flush()
        conf = cfg.ConfigOpts()
        conf([], project="cloudseed", default_config_files=[fh.name])
        return auth_token.AuthProtocol(record_identity, {"oslo_config_config": conf})


def record_identity(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
    """The WSGI app keystonemiddleware calls once it accepted the token."""
    if environ.get("HTTP_X_IDENTITY_STATUS") == "Confirmed":
        roles = frozenset(
            r.strip() for r in environ.get("HTTP_X_ROLES", "").split(",") if r.strip()
        )
        environ["cloudseed.identity"] = RequestContext(
            user_id=environ.get("HTTP_X_USER_ID", ""),
            project_id=environ.get("HTTP_X_PROJECT_ID", ""),
            roles=roles,
            request_id="",
        )
        start_response("204 No Content", [])
        return []
    # The same fault every other 401 of the compute API gets (web/faults.py).
    glance = is_glance_path(environ.get("PATH_INFO", ""))
    _status, headers, body = fault_parts(NotAuthenticated(), glance=glance)
    start_response("401 Unauthorized", headers)
    return [body]


def _wsgi_environ(scope: Scope) -> dict[str, Any]:
    server = scope.get("server") or ("localhost", 80)
    environ: dict[str, Any] = {
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": "",
        "PATH_INFO": scope["path"],
        "QUERY_STRING": scope.get("query_string", b"").decode("latin-1"),
        "SERVER_NAME": server[0],
        "SERVER_PORT": str(server[1]),
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.input": io.BytesIO(),
        "wsgi.errors": io.StringIO(),
        "wsgi.version": (1, 0),
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    for key, value in scope["headers"]:
        name = key.decode("latin-1").upper().replace("-", "_")
        if name not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            name = f"HTTP_{name}"
        environ[name] = value.decode("latin-1")
    return environ
