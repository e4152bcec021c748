"""``GET /v2.1/servers/{id}/boot-report`` (2.110, readiness): the server's latest reported boot,
its status and the events its guest posted, oldest first. Its owner's or an administrator's
(another project's server is a 404); below 2.110 the resource does not exist (404).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from cloudseed.servers import views
from cloudseed.servers.api.requests import in_cell, load_owned
from cloudseed.servers.readiness import progress as p
from cloudseed.servers.readiness import store
from cloudseed.servers.readiness.models import BootReportEvent
from cloudseed.web.errors import ResourceNotFound
from cloudseed.web.requests import version_of
from cloudseed.web.responses import JSONResponse


async def show(request: Request) -> Response:
    if version_of(request) < views.BOOTSTRAP_STATUS_SINCE:
        raise ResourceNotFound()
    uuid = (await load_owned(request)).instance.uuid
    found = await in_cell(request, uuid, lambda session: store.report(session, uuid))
    return JSONResponse({"boot_report": shown(found)})


def shown(report: store.Report) -> dict[str, Any]:
    progress = report.progress
    if progress is None:  # building or rebuilding: no boot to report on yet
        progress = p.Progress(generation="")
    return {
        "status": progress.status,
        "failed_module": progress.failed_module,
        "updated_at": progress.updated_at,
        "source": progress.source,
        "stage": progress.stage,
        "generation": progress.generation or None,
        "boot": progress.boot if report.progress is not None else None,
        "started_at": progress.started_at,
        "phone_home_at": progress.phone_home_at,
        "events_dropped": progress.dropped,
        "events": [_event(e) for e in report.events],
    }


def _isotime(value: dt.datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _event(row: BootReportEvent) -> dict[str, Any]:
    return {
        "name": row.name,
        "event_type": row.event_type,
        "result": row.result,
        "origin": row.origin,
        "description": row.description,
        "timestamp": _isotime(row.guest_time),
        "received_at": _isotime(row.received_at),
    }
