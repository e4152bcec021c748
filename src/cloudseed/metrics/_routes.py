"""Bounded label values for requests: a route's template, never its raw path (paths hold uuids
and whatever a client typed), and the metadata document a request named.

Each listener has a ``RouteNames``: ``key(scope)`` is a cheap hashable value read after the
answer (the path, or Starlette's endpoint), and ``names(key, ok)`` turns a key into the
(route, document) labels, once per key: the edge remembers the answer.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Protocol

from starlette.routing import Route

from cloudseed.metadata import seeds, tree
from cloudseed.types import Scope

UNMATCHED = "unmatched"
SCRAPE = "/metrics"


class RouteNames(Protocol):
    def key(self, scope: Scope) -> Hashable:
        """What identifies the request's route, read from the scope after the answer."""
        ...

    def names(self, key: Any, ok: bool) -> tuple[str, str | None]:
        """(route, document or None) for ``key``; ``ok``: the answer was 2xx or 304."""
        ...


# The metadata trees' route templates, by target kind (metadata/tree.py).
_METADATA_ROUTES = {
    tree.EC2_INDEX: "/",
    tree.EC2_INDEX_IDENTIFIED: "/ec2",
    tree.EC2_VERSION: "/{version}",
    tree.EC2_USER_DATA: "/{version}/user-data",
    tree.EC2_META_DATA: "/{version}/meta-data/{path}",
    tree.EC2_DYNAMIC: "/{version}/dynamic/{path}",
    tree.TOKEN: "/latest/api/token",
    tree.OPENSTACK_INDEX: "/openstack",
    tree.OPENSTACK_VERSION: "/openstack/{version}",
    tree.CONTENT: "/openstack/content/{name}",
    tree.IDENTITY_TOKEN: "/openstack/latest/identity_token",
    tree.AUTHORIZED_KEYS: "/openstack/latest/authorized_keys",
    tree.PHONE_HOME: "/openstack/{version}/phone_home",
    tree.BOOT_REPORT: "/openstack/latest/boot_report",
    tree.EVENTS: "/openstack/latest/events.json",
    tree.EC2_EVENTS: "/{version}/meta-data/events/{path}",
    **{
        kind: f"/openstack/{{version}}/{kind}"
        for kind in (
            tree.META_DATA,
            tree.USER_DATA,
            tree.PASSWORD,
            tree.VENDOR_DATA,
            tree.VENDOR_DATA2,
            tree.NETWORK_DATA,
        )
    },
}
_EC2_DOCUMENTS = {
    tree.EC2_INDEX: "ec2/index",
    tree.EC2_INDEX_IDENTIFIED: "ec2/versions",
    tree.EC2_VERSION: "ec2/version",
    tree.EC2_USER_DATA: "ec2/user-data",
    tree.TOKEN: "ec2/api/token",
    tree.OPENSTACK_INDEX: "openstack/versions",
    tree.OPENSTACK_VERSION: "openstack/version",
    tree.CONTENT: "openstack/content",
    tree.EC2_EVENTS: "ec2/meta-data/events",
}


def metadata_document(target: tree.Target) -> str:
    """The document label: the file for the OpenStack tree (``openstack/meta_data.json``),
    the top-level key for EC2's meta-data and dynamic trees (``ec2/meta-data/hostname``).
    Only asked for answered requests, so the key is one the document has: a bounded set."""
    kind = target.kind
    if kind == tree.EC2_META_DATA or kind == tree.EC2_DYNAMIC:
        top = "ec2/meta-data" if kind == tree.EC2_META_DATA else "ec2/dynamic"
        return f"{top}/{target.rest[0]}" if target.rest else top
    return _EC2_DOCUMENTS.get(kind) or f"openstack/{kind}"


class MetadataRoutes:
    def key(self, scope: Scope) -> Hashable:
        path: str = scope["path"]
        return path

    def names(self, key: Any, ok: bool) -> tuple[str, str | None]:
        if key == SCRAPE:  # answered by the edge to a scraper, else unknown to the app
            return (SCRAPE if ok else UNMATCHED, None)
        if seeds.is_seed_path(key):  # NoCloud seeds: the token is never a label
            file = seeds.seed_file(key.encode())
            return (seeds.ROUTE, f"nocloud/{file}" if ok and file else None)
        target = tree.parse(key)
        if target is None:
            return (UNMATCHED, None)
        document = metadata_document(target) if ok else None
        return (_METADATA_ROUTES.get(target.kind, UNMATCHED), document)


class StarletteRoutes:
    """The compute API's routes: Starlette leaves the matched route's endpoint and path
    parameters in the scope; endpoint plus parameter names pick the template (the same
    endpoint serves ``/v2.1/os-keypairs`` and ``/v2.1/{project_id}/os-keypairs``)."""

    def __init__(self) -> None:
        self._templates: dict[tuple[Any, Any], str] | None = None

    def key(self, scope: Scope) -> Hashable:
        endpoint = scope.get("endpoint")
        if endpoint is None:  # not routed: refused before routing, unknown, or a scrape
            return SCRAPE if scope["path"] == SCRAPE else None
        if self._templates is None:
            self._templates = _templates(scope["app"].router.routes)
        params = scope.get("path_params")
        # A route without parameters matches its template only: the path is the template
        # (and tells "/v2.1" from "/v2.1/", one endpoint).
        return (endpoint, tuple(params)) if params else (endpoint, scope["path"])

    def names(self, key: Any, ok: bool) -> tuple[str, str | None]:
        if key == SCRAPE:
            return (SCRAPE if ok else UNMATCHED, None)
        if key is None or self._templates is None:
            return (UNMATCHED, None)
        return (self._templates.get(key, UNMATCHED), None)


def _templates(routes: list[Any]) -> dict[tuple[Any, Any], str]:
    templates: dict[tuple[Any, Any], str] = {}
    for route in routes:
        if isinstance(route, Route):
            params = tuple(route.param_convertors)
            templates.setdefault((route.endpoint, params or route.path), route.path)
    return templates
