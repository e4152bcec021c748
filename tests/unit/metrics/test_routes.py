"""Label values stay bounded: every metadata target kind has a route template, documents name
files or top-level keys, and the compute API's templates come from its routes."""

from __future__ import annotations

from typing import Any

import pytest

from cloudseed.api.app import domain_routes
from cloudseed.metadata import tree
from cloudseed.metrics._routes import (
    _METADATA_ROUTES,
    UNMATCHED,
    MetadataRoutes,
    StarletteRoutes,
    metadata_document,
)

KINDS = sorted(
    value
    for name, value in vars(tree).items()
    if name.isupper() and isinstance(value, str) and not name.startswith("_")
)


def test_every_target_kind_has_a_route() -> None:
    assert set(KINDS) <= set(_METADATA_ROUTES)


@pytest.mark.parametrize(
    ("path", "ok", "route", "document"),
    [
        (
            "/openstack/latest/meta_data.json",
            True,
            "/openstack/{version}/meta_data.json",
            "openstack/meta_data.json",
        ),
        (
            "/openstack/2018-08-27//meta_data.json/",
            True,
            "/openstack/{version}/meta_data.json",
            "openstack/meta_data.json",
        ),
        ("/openstack/latest/meta_data.json", False, "/openstack/{version}/meta_data.json", None),
        (
            "/latest/meta-data/public-keys/0/openssh-key",
            True,
            "/{version}/meta-data/{path}",
            "ec2/meta-data/public-keys",
        ),
        ("/2009-04-04/meta-data/", True, "/{version}/meta-data/{path}", "ec2/meta-data"),
        ("/latest/user-data", True, "/{version}/user-data", "ec2/user-data"),
        ("/", True, "/", "ec2/index"),
        ("/openstack", True, "/openstack", "openstack/versions"),
        ("/no/such/thing", False, UNMATCHED, None),
        ("/openstack/1999-01-01/meta_data.json", False, UNMATCHED, None),
        ("/metrics", True, "/metrics", None),
        ("/metrics", False, UNMATCHED, None),
        # NoCloud seeds: the token is never a label.
        (
            "/nocloud/" + "T" * 64 + "/meta-data",
            True,
            "/nocloud/{token}/{file}",
            "nocloud/meta-data",
        ),
        ("/nocloud/" + "T" * 64 + "/meta-data", False, "/nocloud/{token}/{file}", None),
        ("/nocloud/x/../y", False, "/nocloud/{token}/{file}", None),
    ],
)
def test_metadata_labels(path: str, ok: bool, route: str, document: str | None) -> None:
    routes = MetadataRoutes()
    assert routes.names(routes.key({"path": path}), ok) == (route, document)


def test_documents_of_ec2_dynamic() -> None:
    target = tree.parse("/latest/dynamic/instance-identity/document")
    assert target is not None
    assert metadata_document(target) == "ec2/dynamic/instance-identity"


class _Router:
    def __init__(self, routes: list[Any]) -> None:
        self.routes = routes


class _App:
    def __init__(self, routes: list[Any]) -> None:
        self.router = _Router(routes)


def test_api_templates_from_the_matched_route() -> None:
    routes = domain_routes()
    by_path = {route.path: route for route in routes}
    names = StarletteRoutes()
    app = _App(routes)
    plain = by_path["/v2.1/servers/{server_id}"]
    scope = {
        "path": "/v2.1/servers/abc",
        "app": app,
        "endpoint": plain.endpoint,
        "path_params": {"server_id": "abc"},
    }
    assert names.names(names.key(scope), True) == ("/v2.1/servers/{server_id}", None)
    scope["path_params"] = {"project_id": "p", "server_id": "abc"}
    assert names.names(names.key(scope), True) == ("/v2.1/{project_id}/servers/{server_id}", None)
    unrouted = {"path": "/v2.1/nothing", "app": app}
    assert names.names(names.key(unrouted), False) == (UNMATCHED, None)
