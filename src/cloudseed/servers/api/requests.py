"""What every servers route reads from its request: the ``Servers`` service the app's lifespan
built (the servers' state fragment, ``ServersState``), the caller as an ``Actor``, a server
the caller may see, ``in_cell``, the one way a route owns a transaction in a server's cell
database, and the keys a body names (``key_requests_of``, 2.106)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy.orm import Session
from starlette.requests import Request

from cloudseed.cells.errors import InstanceNotFound
from cloudseed.db.base import utcnow
from cloudseed.errors import InvalidInput
from cloudseed.servers import records
from cloudseed.servers.errors import InstanceIsLocked
from cloudseed.servers.history.bootstrap import Actor
from cloudseed.servers.lifecycle.service import Servers
from cloudseed.servers.live_keys import sets as key_sets
from cloudseed.servers.live_keys.sets import KeyRequest
from cloudseed.servers.records import ServerRecord
from cloudseed.web.context import RequestContext
from cloudseed.web.requests import context_of, settings_of
from cloudseed.web.state import fragment_of
from cloudseed.web.transactions import in_thread, in_transaction

T = TypeVar("T")


@dataclass(frozen=True)
class ServersState:
    """The servers routes' fragment of the app's state (``web/state.py``)."""

    servers: Servers


def servers_of(request: Request) -> Servers:
    return fragment_of(request, ServersState).servers


def actor_of(request: Request) -> Actor:
    context = context_of(request)
    return Actor(
        user_id=context.user_id, project_id=context.project_id, request_id=context.request_id
    )


async def in_cell(
    request: Request,
    uuid: str,
    work: Callable[[Session], T],
    *,
    write: bool = False,
    deleted_too: bool = False,
) -> T:
    """``work(session)`` in one transaction of the server's cell database (``Database.run``;
    finding the cell reads the API database). The route owns the transaction; ``work`` is a
    service function that takes the Session and never commits. As ``in_transaction``: a read
    of databases with local reads runs on the event loop, anything else in one worker
    thread."""
    cells = servers_of(request).cells
    if not write and cells.api_db.local_reads:
        cell = cells.for_instance(uuid, deleted_too=deleted_too)
        return await in_transaction(cell, work)

    def run() -> T:
        return cells.for_instance(uuid, deleted_too=deleted_too).run(work, write=write)

    return await in_thread(run)


def owned(context: RequestContext, record: ServerRecord) -> ServerRecord:
    """Another project's server does not exist, for non-administrators (Nova's 404)."""
    if not context.is_admin and record.instance.project_id != context.project_id:
        raise InstanceNotFound(record.instance.uuid)
    return record


async def load_owned(request: Request, *, read_deleted: bool = False) -> ServerRecord:
    uuid = request.path_params["server_id"]
    record = await in_cell(
        request,
        uuid,
        lambda session: records.load(session, uuid, read_deleted=read_deleted),
        deleted_too=read_deleted,
    )
    return owned(context_of(request), record)


def unlocked(context: RequestContext, record: ServerRecord) -> ServerRecord:
    """Nova's ``check_instance_lock``: a locked server refuses everyone but administrators."""
    if record.instance.locked and not context.is_admin:
        raise InstanceIsLocked(record.instance.uuid)
    return record


async def load_unlocked(request: Request) -> ServerRecord:
    """``load_owned``, and 409 when the server is locked (administrators pass)."""
    return unlocked(context_of(request), await load_owned(request))


def key_requests_of(request: Request, params: dict[str, Any]) -> tuple[KeyRequest, ...] | None:
    """The keys a create, rebuild or PUT body (its validated inner object) names in
    ``key_names`` (2.106), checked against ``[api] max_keys_per_server``; None when absent.
    ``key_name`` with ``key_names`` is a 400: the list replaces it."""
    if "key_names" not in params:
        return None
    if "key_name" in params:
        raise InvalidInput(
            "Invalid input: key_name and key_names cannot be given together; key_names is "
            "the list of every key pair (key_name is a one-element list)."
        )
    return key_sets.key_requests(
        params["key_names"],
        now=utcnow(),
        limit=settings_of(request).api.max_keys_per_server,
    )
