"""web/faults.py: the one table from errors to statuses, and Nova's fault body, which both
apps and the keystone middleware's 401 use (Glance's body under ``/image/``)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from cloudseed.api.auth import record_identity
from cloudseed.cells.errors import InstanceNotFound
from cloudseed.errors import CloudseedError, DatabaseUnavailable, QuotaExceeded
from cloudseed.images.errors import (
    ImageLimitExceeded,
    ImageNotActive,
    ImageStatusConflict,
    NoSuchImage,
    ProtectedImage,
)
from cloudseed.keypairs.errors import KeypairExists
from cloudseed.metadata.errors import NoSuchDocument, TokenRequired, UnknownCaller
from cloudseed.web.errors import (
    MalformedRequestBody,
    MethodNotAllowed,
    NotAuthenticated,
    RequestTooLarge,
    UnsupportedAPIVersion,
    UnsupportedMediaType,
)
from cloudseed.web.faults import INTERNAL_ERROR_MESSAGE, fault_parts, is_glance_path, status_for


@pytest.mark.parametrize(
    "error, status, name",
    [
        (MalformedRequestBody(), 400, "badRequest"),
        (NotAuthenticated(), 401, "unauthorized"),
        (TokenRequired(), 401, "unauthorized"),
        (QuotaExceeded("over", resource="cores", limit=1), 403, "forbidden"),
        (InstanceNotFound("u"), 404, "itemNotFound"),
        (MethodNotAllowed("GET"), 405, "badMethod"),
        (UnsupportedAPIVersion(requested="9.9", minimum="2.1", maximum="2.105"), 406, None),
        (KeypairExists(name="k"), 409, "conflictingRequest"),
        (RequestTooLarge(), 413, "overLimit"),
        (UnsupportedMediaType(), 415, "badMediaType"),
        (DatabaseUnavailable(), 503, "serviceUnavailable"),
    ],
)
def test_each_family_has_its_status_and_nova_fault_name(
    error: CloudseedError, status: int, name: str | None
) -> None:
    code, headers, body = fault_parts(error)
    assert code == status_for(error) == status
    assert ("Content-Type", "application/json; charset=UTF-8") in headers
    assert json.loads(body) == {name or "computeFault": {"code": status, "message": error.message}}


def test_unexpected_errors_are_logged_not_shown(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="cloudseed.web.faults"):
        code, _, body = fault_parts(RuntimeError("password=hunter2 in a traceback"))
    assert code == 500
    assert json.loads(body) == {"computeFault": {"code": 500, "message": INTERNAL_ERROR_MESSAGE}}
    assert b"hunter2" not in body
    assert "unexpected error" in caplog.text


def test_method_not_allowed_carries_allow_when_known() -> None:
    assert ("Allow", "GET, HEAD") in fault_parts(MethodNotAllowed("GET, HEAD"))[1]
    assert all(name != "Allow" for name, _ in fault_parts(MethodNotAllowed())[1])


def test_unknown_caller_and_missing_document_are_the_same_404() -> None:
    unknown, missing = UnknownCaller("no instance has address 10.0.0.9"), NoSuchDocument("x")
    assert status_for(unknown) == status_for(missing) == 404
    assert unknown.message == missing.message
    assert unknown.why != missing.why  # only the log tells them apart


def test_keystone_refusal_is_the_fault_every_other_401_is() -> None:
    """keystonemiddleware calls record_identity with the token it could not confirm."""
    started: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        started.update(status=status, headers=headers)
        return lambda _data: None

    body = b"".join(record_identity({"HTTP_X_IDENTITY_STATUS": "Invalid"}, start_response))
    status, headers, expected = fault_parts(NotAuthenticated())
    assert started == {"status": "401 Unauthorized", "headers": headers}
    assert body == expected
    assert json.loads(body) == {"unauthorized": {"code": 401, "message": "Authentication required"}}
    assert status == 401


@pytest.mark.parametrize(
    "error, status, title",
    [
        (ImageNotActive("i"), 400, "Bad Request"),
        (NotAuthenticated(), 401, "Unauthorized"),
        (ProtectedImage("i"), 403, "Forbidden"),
        (NoSuchImage("i"), 404, "Not Found"),
        (MethodNotAllowed("GET"), 405, "Method Not Allowed"),
        (ImageStatusConflict(current="active", wanted="saving"), 409, "Conflict"),
        (ImageLimitExceeded("too many"), 413, "Request Entity Too Large"),
        (UnsupportedMediaType(), 415, "Unsupported Media Type"),
    ],
)
def test_the_glance_slice_answers_in_glances_shape(
    error: CloudseedError, status: int, title: str
) -> None:
    code, headers, body = fault_parts(error, glance=True)
    assert code == status
    assert ("Content-Type", "application/json; charset=UTF-8") in headers
    assert json.loads(body) == {
        "message": error.message,
        "code": f"{status} {title}",
        "title": title,
    }


def test_glance_paths() -> None:
    assert is_glance_path("/image/v2/images")
    assert not is_glance_path("/image")  # the public version document answers no errors
    assert not is_glance_path("/v2.1/images")


def test_a_keystone_refusal_under_image_is_glances() -> None:
    started: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        started.update(status=status)
        return lambda _data: None

    environ = {"HTTP_X_IDENTITY_STATUS": "Invalid", "PATH_INFO": "/image/v2/images"}
    body = json.loads(b"".join(record_identity(environ, start_response)))
    assert body == {
        "message": "Authentication required",
        "code": "401 Unauthorized",
        "title": "Unauthorized",
    }
