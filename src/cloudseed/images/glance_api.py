"""A slice of the Image API v2 (Glance's format) at ``/image``: a project's own images.

openstacksdk and the openstack CLI look images up through the image service (to name the
image in ``server show``, to resolve ``--image NAME``), and create, upload and delete them
there (``openstack image create --file``, tempest). cloudseed has no Glance; this slice serves
its own registry: list, show, create (queued), upload (``PUT .../file``: active), download
(``GET .../file``, one byte range at most: how compute agents fill their image caches), delete,
with
Glance's rules on who sees and changes what (``access.py``) and Glance's error messages. Point
clients at it with ``image_endpoint_override: http://HOST:8774/image`` (or an ``image``
endpoint in the Keystone catalog).
"""

from __future__ import annotations

import logging
import os
import urllib.parse
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from cloudseed.db.engines import Database
from cloudseed.images import service, store, uploads
from cloudseed.images.contents import check_format
from cloudseed.images.errors import NotValidImage
from cloudseed.images.glance_views import image_body, list_query, matches, page
from cloudseed.images.ranges import byte_range
from cloudseed.images.schemas import parse_create
from cloudseed.images.visibility import Viewer
from cloudseed.web.errors import UnsupportedMediaType
from cloudseed.web.links import base_url
from cloudseed.web.requests import api_db_of, context_of, settings_of
from cloudseed.web.responses import JSONResponse
from cloudseed.web.state import fragment_of
from cloudseed.web.transactions import in_transaction
from cloudseed.web.validation import read_json

log = logging.getLogger(__name__)

# Written to the store in pieces of about this size (the request arrives in smaller ones).
WRITE_SIZE = 1 << 20
# A download is read from the store in pieces of this size, each in a worker thread.
READ_SIZE = 1 << 20


def viewer_of(request: Request) -> Viewer:
    context = context_of(request)
    return Viewer(project_id=context.project_id, is_admin=context.is_admin, roles=context.roles)


@dataclass(frozen=True)
class ImagesState:
    """The image routes' fragment of the app's state (``web/state.py``): whether a server boots
    from an image (api/app.py wires it in from the cells: a server's disk may be an overlay on
    the image's file), asked before a deleted image's file is removed."""

    image_in_use: Callable[[str], bool]


def image_in_use_of(request: Request) -> Callable[[str], bool]:
    return fragment_of(request, ImagesState).image_in_use


async def versions(request: Request) -> Response:
    prefix = settings_of(request).api.compute_link_prefix
    return JSONResponse(
        {
            "versions": [
                {
                    "id": "v2.16",
                    "status": "CURRENT",
                    "links": [{"rel": "self", "href": f"{base_url(request, prefix)}/image/v2/"}],
                }
            ]
        }
    )


async def show(request: Request) -> Response:
    viewer, db, image_id = viewer_of(request), api_db_of(request), request.path_params["image_id"]

    body = await in_transaction(
        db, lambda session: image_body(service.show_image(session, image_id, viewer=viewer))
    )
    return JSONResponse(body)


async def index(request: Request) -> Response:
    viewer, db = viewer_of(request), api_db_of(request)
    params = request.query_params.multi_items()
    query = list_query(params, max_limit=settings_of(request).api.max_limit)

    def listed(session: Session) -> tuple[list[dict[str, Any]], str | None]:
        images = [
            i
            for i in service.list_images(
                session, viewer=viewer, visibility=query.visibility, newest_first=True
            )
            if matches(i, query)
        ]
        shown, next_marker = page(images, query)
        return [image_body(i) for i in shown], next_marker

    bodies, next_marker = await in_transaction(db, listed)
    kept = [(k, v) for k, v in params if k != "marker"]
    body: dict[str, Any] = {
        "images": bodies,
        "first": "/v2/images" + (f"?{urllib.parse.urlencode(kept)}" if kept else ""),
        "schema": "/v2/schemas/images",
    }
    if next_marker is not None:
        body["next"] = "/v2/images?" + urllib.parse.urlencode([*kept, ("marker", next_marker)])
    return JSONResponse(body)


async def create(request: Request) -> Response:
    viewer, db = viewer_of(request), api_db_of(request)
    limit = settings_of(request).oslo_middleware.max_request_body_size
    new = parse_create(await read_json(request, max_size=limit))

    body = await in_transaction(
        db,
        lambda session: image_body(service.create_image(session, new, viewer=viewer)),
        write=True,
    )
    return JSONResponse(body, status_code=201, headers={"Location": body["self"]})


async def upload(request: Request) -> Response:
    """Stream the body into the store (hashed and counted on the way, refused past
    ``[glance] image_size_cap``), check it is the declared format and its virtual size is
    within ``[glance] image_virtual_size_cap``, then record it."""
    viewer, db, image_id = viewer_of(request), api_db_of(request), request.path_params["image_id"]
    settings = settings_of(request)
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != "application/octet-stream":
        raise UnsupportedMediaType()
    cap = settings.glance.image_size_cap
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and (len(declared) > 20 or int(declared) > cap):
        raise store.too_large()

    pending = await in_transaction(
        db, lambda session: uploads.begin_upload(session, image_id, viewer=viewer), write=True
    )
    suffix = f".{pending.disk_format}"
    receiver: store.Receiver | None = None
    try:
        receiver = await run_in_threadpool(
            lambda: store.Receiver(store.images_dir(settings.state_dir), suffix=suffix, limit=cap)
        )
        buffer = bytearray()
        async for chunk in request.stream():
            buffer += chunk
            if len(buffer) >= WRITE_SIZE:
                await run_in_threadpool(receiver.write, bytes(buffer))
                buffer.clear()
        await run_in_threadpool(receiver.write, bytes(buffer))
        virtual_size_cap = settings.glance.image_virtual_size_cap
        await run_in_threadpool(
            lambda: _finish(db, receiver, pending, virtual_size_cap=virtual_size_cap)
        )
    except BaseException:
        # Also when the request is cancelled (shutdown): no partial file stays, and the image
        # is queued again, so the upload can be tried again.
        if receiver is not None:
            receiver.discard()
        with anyio.CancelScope(shield=True):
            await run_in_threadpool(_abort, db, pending)
        raise
    return Response(status_code=204)


async def download(request: Request) -> Response:
    """The image's data as Glance sends it: 200 with all of it, or 206 with the one range
    ``Range`` asks for (416 when it cannot be served); ``Content-MD5`` is Glance's checksum.
    204 while the image has no data, and (as Glance, when its store lost the data) when the
    file is not on this node: an agent then tries its next API server."""
    viewer, db, image_id = viewer_of(request), api_db_of(request), request.path_params["image_id"]
    data = await in_transaction(
        db, lambda session: service.stored_data(session, image_id, viewer=viewer)
    )
    if data is None:
        return Response(status_code=204)
    wanted = byte_range(request.headers.get("range"), data.size)
    start, end = wanted or (0, data.size)
    try:
        # Checked here, opened by the body: a descriptor opened before the answer starts would
        # leak if the client left before the body was read.
        await run_in_threadpool(os.stat, data.path)
    except OSError as exc:
        log.warning("image %s: its data %s cannot be read here: %s", image_id, data.path, exc)
        return Response(status_code=204)
    headers = {"Content-Length": str(end - start), "Accept-Ranges": "bytes"}
    if data.checksum_md5:
        headers["Content-MD5"] = data.checksum_md5
    if wanted is not None:
        headers["Content-Range"] = f"bytes {start}-{end - 1}/{data.size}"
    return StreamingResponse(
        _read(data.path, start, end),
        status_code=206 if wanted is not None else 200,
        headers=headers,
        media_type="application/octet-stream",
    )


async def _read(path: str, start: int, end: int) -> AsyncIterator[bytes]:
    """The bytes of the file at ``path`` from ``start`` to ``end``, closed at the end, also
    when the client goes away. A file shorter than the registry says ends the body early: the
    client sees a body shorter than its Content-Length, never other bytes."""
    fd = await run_in_threadpool(os.open, path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        offset = start
        while offset < end:
            chunk = await run_in_threadpool(os.pread, fd, min(READ_SIZE, end - offset), offset)
            if not chunk:
                log.warning("image data ended at byte %d of %d", offset, end)
                return
            offset += len(chunk)
            yield chunk
    finally:
        os.close(fd)


def _finish(
    db: Database, receiver: store.Receiver, pending: uploads.Upload, *, virtual_size_cap: int
) -> None:
    path = receiver.finish()
    digest = receiver.digest
    try:
        virtual_size = check_format(
            path,
            pending.disk_format,
            head=digest.head,
            size=digest.size,
            shown="The image data",
            virtual_size_cap=virtual_size_cap,
        )
    except NotValidImage as exc:
        # The answer says only that the data is not valid; the store's path and qemu-img's
        # reason are the operator's.
        log.warning("upload to image %s refused: %s: %s", pending.image_id, path, exc.reason)
        raise
    db.run(
        lambda session: uploads.finish_upload(
            session, pending, path=path, digest=digest, virtual_size=virtual_size
        ),
        write=True,
    )


def _abort(db: Database, pending: uploads.Upload) -> None:
    try:
        db.run(lambda session: uploads.abort_upload(session, pending), write=True)
    except Exception:  # the upload's own error is the answer; this one is only logged
        log.exception("could not return image %s to queued", pending.image_id)


async def delete(request: Request) -> Response:
    viewer, db, image_id = viewer_of(request), api_db_of(request), request.path_params["image_id"]
    state_dir = settings_of(request).state_dir
    in_use = image_in_use_of(request)

    path = await in_transaction(
        db, lambda session: service.delete_image(session, image_id, viewer=viewer), write=True
    )
    # A file, not a row: removed after the commit, outside the transaction (which may rerun).
    await run_in_threadpool(_remove_data, path, store.images_dir(state_dir), in_use, image_id)
    return Response(status_code=204)


def _remove_data(
    path: str | None, directory: Path, in_use: Callable[[str], bool], image_id: str
) -> None:
    """Remove a deleted image's file: only one the store holds (an operator's image may have
    been registered from a file of its own), and only when no server boots from it, since a
    server's disk may be an overlay on it. A file kept for a server is logged."""
    if path is None or Path(path).parent != directory.resolve():
        return
    if in_use(image_id):
        log.info("image %s deleted; its file %s stays: a server boots from it", image_id, path)
        return
    store.discard(Path(path))


routes = [
    Route("/image", versions, methods=["GET"]),
    Route("/image/", versions, methods=["GET"]),
    Route("/image/v2/images", index, methods=["GET"]),
    Route("/image/v2/images", create, methods=["POST"]),
    Route("/image/v2/images/{image_id}", show, methods=["GET"]),
    Route("/image/v2/images/{image_id}", delete, methods=["DELETE"]),
    Route("/image/v2/images/{image_id}/file", upload, methods=["PUT"]),
    Route("/image/v2/images/{image_id}/file", download, methods=["GET"]),
]
