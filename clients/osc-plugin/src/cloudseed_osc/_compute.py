"""cloudseed's user data requests, sent at compute API microversion 2.105, and what their
failures mean to a user.

The negotiated microversion of the stock commands (2.100 at most with openstacksdk 4.x, or
``--os-compute-api-version``) does not apply here: ``user_data`` in ``PUT /servers/{id}`` and in
a HARD reboot exist only from 2.105, a cloudseed extension, so these requests always name it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from keystoneauth1 import discover
from osc_lib import exceptions

if TYPE_CHECKING:
    from cliff.command import Command
    from openstack.compute.v2._proxy import Proxy
    from requests import Response  # what keystoneauth's adapters return

USER_DATA_MICROVERSION = "2.105"
UNSUPPORTED = "this cloud does not support updating user data"


class UserDataConflict(exceptions.CommandError):
    """The API answered 409: the server has a config drive, or is busy."""


def compute_of(command: Command) -> Proxy:
    """openstacksdk's compute proxy of the running ``openstack`` command.

    ``sdk_connection`` rather than ``client_manager.compute``: the latter was novaclient in
    older python-openstackclient releases, the former has always been openstacksdk.
    """
    compute: Proxy = command.app.client_manager.sdk_connection.compute  # type: ignore[attr-defined]
    return compute


def require_user_data_updates(compute: Proxy) -> None:
    """Refuse early, without touching the server, when the cloud's version document says its
    newest microversion is below 2.105 (a real Nova, or an older cloudseed).

    A cloud that publishes no maximum is given the benefit of the doubt: the request itself
    then answers 406, which ``_raise_for_status`` turns into the same message.
    """
    require_microversion(compute, USER_DATA_MICROVERSION, UNSUPPORTED)


def require_microversion(compute: Proxy, microversion: str, unsupported: str) -> None:
    """``unsupported`` as a ``CommandError`` when the cloud's newest microversion, as its
    version document says, is below ``microversion``; nothing when it publishes none."""
    endpoint = compute.get_endpoint_data()
    newest = getattr(endpoint, "max_microversion", None)
    if newest is None:
        return
    needed = discover.normalize_version_number(microversion)
    if discover.normalize_version_number(newest) < needed:
        newest_text = discover.version_to_string(newest)
        raise exceptions.CommandError(
            f"{unsupported}: that needs compute API microversion {microversion} "
            f"(cloudseed), and this cloud's newest is {newest_text}."
        )


def update_user_data(compute: Proxy, server_id: str, encoded: str | None) -> None:
    """``PUT /servers/{id}`` with only ``user_data`` (``None`` removes it)."""
    response = compute.put(
        f"/servers/{server_id}",
        json={"server": {"user_data": encoded}},
        microversion=USER_DATA_MICROVERSION,
    )
    _raise_for_status(response)


def hard_reboot_with_user_data(compute: Proxy, server_id: str, encoded: str | None) -> None:
    """One ``reboot`` action of type HARD that also replaces (or, with ``None``, removes) the
    user data: the way for servers whose config drive holds it."""
    body = {"reboot": {"type": "HARD", "user_data": encoded}}
    response = compute.post(
        f"/servers/{server_id}/action", json=body, microversion=USER_DATA_MICROVERSION
    )
    _raise_for_status(response)


def _raise_for_status(response: Response) -> None:
    status = response.status_code
    if status < 400:
        return
    if status == 406:  # "Version 2.105 is not supported by the API": a cloud without it
        raise exceptions.CommandError(
            f"{UNSUPPORTED}: it refused compute API microversion {USER_DATA_MICROVERSION} "
            f"({fault_message(response)})."
        )
    if status == 409:
        raise UserDataConflict(fault_message(response))
    raise exceptions.CommandError(f"{fault_message(response)} (HTTP {status})")


def fault_message(response: Response) -> str:
    """The ``message`` of a Nova-style fault body (``{"<faultName>": {"message": ...}}``), or
    whatever text the response carries."""
    try:
        body: Any = json.loads(response.text)
    except ValueError:
        body = None
    if isinstance(body, dict) and len(body) == 1:
        fault = next(iter(body.values()))
        if isinstance(fault, dict) and isinstance(fault.get("message"), str):
            return str(fault["message"])
    return response.text.strip() or response.reason or f"HTTP {response.status_code}"
