"""URLs in responses: the base the client used (or ``[api] compute_link_prefix``) plus paths."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import urlencode, urlsplit, urlunsplit

from starlette.requests import Request


def base_url(request: Request, link_prefix: str) -> str:
    """The server's root URL as the client sees it, without a trailing slash."""
    url = str(request.base_url).rstrip("/")
    if not link_prefix:
        return url
    # Like Nova: the prefix replaces scheme and host, and goes in front of the path.
    parts = list(urlsplit(url))
    prefix = urlsplit(link_prefix)
    parts[0:2] = [prefix.scheme, prefix.netloc]
    parts[2] = prefix.path.rstrip("/") + parts[2]
    return urlunsplit(parts).rstrip("/")


def next_link(
    request: Request, link_prefix: str, path: str, params: Mapping[str, Sequence[str]], marker: str
) -> str:
    """Nova's "next" link: the same query parameters, sorted, with the marker replaced."""
    query = {k: v[-1] for k, v in sorted(params.items()) if k != "marker"}
    query["marker"] = marker
    query = dict(sorted(query.items()))
    return f"{base_url(request, link_prefix)}{path}?{urlencode(query)}"


def links(base: str, collection: str, uuid: str) -> list[dict[str, str]]:
    """Nova's ``self`` (versioned) and ``bookmark`` (unversioned) links of one resource."""
    root = base.removesuffix("/v2.1")
    return [
        {"rel": "self", "href": f"{base}/{collection}/{uuid}"},
        {"rel": "bookmark", "href": f"{root}/{collection}/{uuid}"},
    ]
