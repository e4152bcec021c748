"""cloudseed's live key requests (compute API microversion 2.106) and the key lists they carry.

A server's own keys are ``key_names`` in the API: names, or ``{"name", "expires_at"}``. The
server view at 2.106 shows them as ``key_names`` (names only, in order) and, with their
expiry, as the ``keys`` entries whose ``source`` is ``server``; ``PUT /servers/{id}`` with
``key_names`` replaces the whole list while the server runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from osc_lib import exceptions

from cloudseed_osc._compute import fault_message, require_microversion

if TYPE_CHECKING:
    from openstack.compute.v2._proxy import Proxy
    from requests import Response

KEYS_MICROVERSION = "2.106"
UNSUPPORTED = "this cloud does not support live keys"

# One entry of key_names: a name, or a name with its expiry.
KeyEntry = str | dict[str, Any]


def require_live_keys(compute: Proxy) -> None:
    """Refuse before any request when the cloud's newest microversion is below 2.106."""
    require_microversion(compute, KEYS_MICROVERSION, UNSUPPORTED)


def key_entries(names: list[str], expiries: dict[str, str]) -> list[KeyEntry]:
    """``key_names`` for the API: a name alone, or with its ``expires_at`` when it has one."""
    return [{"name": n, "expires_at": expiries[n]} if n in expiries else n for n in names]


def parse_expiries(values: list[str] | None, *, option: str) -> dict[str, str]:
    """``NAME=TIMESTAMP`` options as ``{name: timestamp}``; the API checks the timestamp."""
    expiries: dict[str, str] = {}
    for value in values or []:
        name, sep, timestamp = value.partition("=")
        if not sep or not name or not timestamp:
            raise exceptions.CommandError(f"{option} takes NAME=TIMESTAMP, not {value!r}")
        if name in expiries:
            raise exceptions.CommandError(f"{option} names key {name!r} twice")
        expiries[name] = timestamp
    return expiries


def get_server(compute: Proxy, server_id: str) -> dict[str, Any]:
    """The server view at 2.106 (``key_names``, ``keys``, ``key_delivery``)."""
    response = compute.get(f"/servers/{server_id}", microversion=KEYS_MICROVERSION)
    return _server_of(response)


def own_keys(server: dict[str, Any]) -> list[dict[str, Any]]:
    """The server's own keys as ``{"name", "expires_at", "expired"}``, in order."""
    by_name = {k["name"]: k for k in server.get("keys", []) if k["source"] == "server"}
    return [
        {
            "name": n,
            "expires_at": by_name.get(n, {}).get("expires_at"),
            "expired": bool(by_name.get(n, {}).get("expired")),
        }
        for n in server.get("key_names", [])
    ]


def kept_entries(keys: list[dict[str, Any]]) -> list[KeyEntry]:
    """``key_names`` that keep these keys as they are, expiries included. Expired keys are left
    out: the guest no longer gets them, and the API refuses an ``expires_at`` in the past."""
    return [
        {"name": k["name"], "expires_at": k["expires_at"]} if k["expires_at"] else k["name"]
        for k in keys
        if not k["expired"]
    ]


def put_key_names(compute: Proxy, server_id: str, key_names: list[KeyEntry]) -> dict[str, Any]:
    """``PUT /servers/{id}`` with only ``key_names``: the server's own keys become exactly
    these. Returns the server view the API answers with."""
    response = compute.put(
        f"/servers/{server_id}",
        json={"server": {"key_names": key_names}},
        microversion=KEYS_MICROVERSION,
    )
    return _server_of(response)


def get_project_keys(compute: Proxy, project_id: str) -> list[dict[str, Any]]:
    """``GET /os-project-keys/{project_id}``: the keys every server of the project gets."""
    response = compute.get(f"/os-project-keys/{project_id}", microversion=KEYS_MICROVERSION)
    return _project_keys_of(response)


def put_project_keys(
    compute: Proxy, project_id: str, project_keys: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``PUT /os-project-keys/{project_id}`` (administrators): the whole list, in order, of
    ``{"name", "user_id"[, "expires_at"]}``. Returns the list the API answers with."""
    response = compute.put(
        f"/os-project-keys/{project_id}",
        json={"project_keys": project_keys},
        microversion=KEYS_MICROVERSION,
    )
    return _project_keys_of(response)


def _project_keys_of(response: Response) -> list[dict[str, Any]]:
    project_keys: list[dict[str, Any]] = _body_of(response)["project_keys"]
    return project_keys


def _server_of(response: Response) -> dict[str, Any]:
    server: dict[str, Any] = _body_of(response)["server"]
    return server


def _body_of(response: Response) -> dict[str, Any]:
    status = response.status_code
    if status == 406:  # "Version 2.106 is not supported by the API"
        raise exceptions.CommandError(
            f"{UNSUPPORTED}: it refused compute API microversion {KEYS_MICROVERSION} "
            f"({fault_message(response)})."
        )
    if status >= 400:
        raise exceptions.CommandError(f"{fault_message(response)} (HTTP {status})")
    body: dict[str, Any] = response.json()
    return body
