"""Every path of a metadata service's two trees, fetched the way guests walk them, and a
comparison of two such crawls that names each difference.

``crawl(get)`` walks, for one guest (``get`` carries its identity):

- EC2: ``/``, each version listed there (with and without the trailing slash), its
  ``meta-data/`` listing and, recursively, every entry of every listing (``0=name`` entries of
  ``public-keys/`` are the directory ``0/``, as EC2 readers take them), and ``user-data``;
- OpenStack: ``/openstack``, each version listed, its listing and every document name Nova
  knows at every version, listed or not (so a 404 where the other side answers is found too);
- a few paths no tree has (``MISSING``), which both sides must refuse alike.

``compare(expected, actual)`` says, per path, what differs: the status; for answers of 200, the
media type of ``Content-Type`` (not its parameters) and the body, byte for byte (JSON too:
its key order, separators and escapes; ``random_seed`` in ``meta_data.json`` is random by
design: only its presence is compared), shown as a unified diff of the JSON where it differs
as JSON, else of the text. Bodies of refusals are not compared:
what a guest acts on there is the status. Where Nova answers 500 (a bug in Nova: one more
path token after an EC2 leaf, ``/latest/meta-data/hostname/x``, makes its tree walk index a
string with a string), the other side must answer 404 instead: a 500 is never copied.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from typing import Any, NamedTuple

import httpx


class Page(NamedTuple):
    status: int
    body: bytes
    content_type: str = ""


Get = Callable[[str], Page]

# Every document name of an OpenStack version directory Nova 34 knows (nova/api/metadata/
# base.py); which of them a version serves is what the comparison checks.
OPENSTACK_DOCUMENTS = (
    "meta_data.json",
    "user_data",
    "password",
    "vendor_data.json",
    "network_data.json",
    "vendor_data2.json",
)
# Paths that exist in neither tree: both sides must refuse them alike.
MISSING = (
    "/openstack/latest/nothing.json",
    "/openstack/1999-01-01/meta_data.json",
    "/openstack/latest/meta_data.json/uuid",
    "/openstack/content",
    "/openstack/content/0000",
    "/latest/meta-data/nothing",
    "/latest/meta-data/public-keys/1/",
    "/latest/meta-data/public-keys/0/openssh-key/more",
    "/latest/meta-data/placement/availability-zone/more",  # Nova: 500
    "/latest/meta-data/hostname/x",  # Nova: 500
    "/1999-01-01/meta-data/",
    "/latest/nothing",
    "/ec2/latest/meta-data/nothing",
)
MAX_PAGES = 2000  # a listing that never ends is a bug on one side, not a reason to hang


def _lines(page: Page) -> list[str]:
    if page.status != 200:
        return []
    return [line for line in page.body.decode("utf-8", "replace").split("\n") if line]


def crawl(get: Get) -> dict[str, Page]:
    pages: dict[str, Page] = {}

    def fetch(path: str) -> Page:
        if path not in pages:
            if len(pages) >= MAX_PAGES:
                raise AssertionError(f"more than {MAX_PAGES} paths: a listing loops at {path}")
            pages[path] = get(path)
        return pages[path]

    def walk_ec2(directory: str) -> None:
        """``directory`` ends with '/': fetch it, its form without the slash, and each entry."""
        fetch(directory.rstrip("/"))
        for entry in _lines(fetch(directory)):
            if "=" in entry:  # public-keys/: "0=keyname" stands for the directory 0/
                walk_ec2(f"{directory}{entry.split('=', 1)[0]}/")
            elif entry.endswith("/"):
                walk_ec2(f"{directory}{entry}")
            else:
                fetch(f"{directory}{entry}")

    for version in _lines(fetch("/")):
        walk_ec2(f"/{version}/")
    for version in _lines(fetch("/openstack")):
        fetch("/openstack/")
        fetch(f"/openstack/{version}")
        for name in {*_lines(fetch(f"/openstack/{version}/")), *OPENSTACK_DOCUMENTS}:
            fetch(f"/openstack/{version}/{name}")
    for path in MISSING:
        fetch(path)
    return pages


def http_crawl(base_url: str, headers: dict[str, str]) -> dict[str, Page]:
    """``crawl`` over HTTP: every request to ``base_url`` with ``headers`` (the guest's
    identity), on one keep-alive connection."""
    with httpx.Client(base_url=base_url, headers=headers, timeout=30) as client:

        def get(path: str) -> Page:
            response = client.get(path)
            return Page(
                response.status_code, response.content, response.headers.get("content-type", "")
            )

        return crawl(get)


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


def _without_seed(document: Any) -> Any:
    if isinstance(document, dict) and "random_seed" in document:
        return {**document, "random_seed": "<present>"}
    return document


def _unified(expected: str, actual: str, path: str) -> str:
    return "\n".join(
        difflib.unified_diff(
            expected.splitlines(),
            actual.splitlines(),
            fromfile=f"nova {path}",
            tofile=f"other {path}",
            lineterm="",
        )
    )


# meta_data.json's seed as Nova writes it: "random_seed": "<base64>"
SEED = re.compile(rb'"random_seed": "[A-Za-z0-9+/=]*"')


def _body_difference(path: str, expected: bytes, actual: bytes) -> str | None:
    if path.endswith("meta_data.json"):
        expected, actual = (SEED.sub(b'"random_seed": "<seed>"', b) for b in (expected, actual))
    if expected == actual:
        return None
    is_json = path.endswith(".json")
    if is_json:
        want, got = _json(expected), _json(actual)
        if want is not None and got is not None:
            if path.endswith("meta_data.json"):
                want, got = _without_seed(want), _without_seed(got)
            if want == got:
                return f"the same JSON, not the same bytes: {expected[:300]!r} != {actual[:300]!r}"
            return _unified(
                json.dumps(want, indent=1, sort_keys=True, ensure_ascii=False),
                json.dumps(got, indent=1, sort_keys=True, ensure_ascii=False),
                path,
            )
    return _unified(
        expected.decode("utf-8", "backslashreplace"),
        actual.decode("utf-8", "backslashreplace"),
        path,
    ) or (f"bytes differ: {expected!r} != {actual!r}")


def compare(
    expected: dict[str, Page], actual: dict[str, Page], *, content_types: bool = True
) -> dict[str, str]:
    """``{path: what differs}`` between two crawls (``expected`` is Nova's); empty when the
    trees agree."""
    differences: dict[str, str] = {}
    for path in sorted({*expected, *actual}):
        want, got = expected.get(path), actual.get(path)
        if want is None or got is None:
            which = "nova" if want is None else "the other side"
            present = got if want is None else want
            assert present is not None
            differences[path] = f"only crawled from one side; {which} never reached it"
            continue
        if want.status == 500 and got.status == 404:
            continue  # Nova's own error, answered as the refusal it should have been
        if want.status != got.status:
            differences[path] = (
                f"status {want.status} != {got.status} (other side said {got.body[:200]!r})"
            )
            continue
        if want.status != 200:
            continue
        problems = []
        if content_types and _media_type(want.content_type) != _media_type(got.content_type):
            problems.append(f"Content-Type {want.content_type!r} != {got.content_type!r}")
        body = _body_difference(path, want.body, got.body)
        if body:
            problems.append(body)
        if problems:
            differences[path] = "\n".join(problems)
    return differences


def report(differences: dict[str, str], limit: int = 40) -> str:
    """The differences, one block per path, at most ``limit`` of them."""
    shown = list(differences.items())[:limit]
    text = "\n\n".join(f"== {path}\n{what}" for path, what in shown)
    if len(differences) > limit:
        text += f"\n\n... and {len(differences) - limit} more paths"
    return text
