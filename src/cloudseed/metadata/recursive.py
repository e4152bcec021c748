"""``/openstack/<version>/?recursive=true``: the instance's data as one JSON document, to read
or long-poll in one request (GCE's ``recursive=true``). IO-free.

Each file of the version's listing that is drawn from the instance record, by name:
``meta_data.json`` and ``network_data.json`` as objects, ``user_data`` as the base64 text the
API took (null when there is none: user data need not be text), and ``vendor_data.json``
when a StaticJSON file is configured. Left out: ``random_seed`` (a fresh one in every answer
would make two answers of one generation differ), ``password`` (ask for it by name), and
``vendor_data2.json`` (dynamic targets are asked on their own schedule, not on the record's).
Its ETag is the record's generation, as every record document's. The Nova drop-in serves the
same view of Nova's instances (``nova_metadata/app.py``), from its own renderings of the files.
"""

from __future__ import annotations

import json
from typing import Any

from cloudseed.metadata import render
from cloudseed.metadata import versions as v


def instance_data(
    version: str,
    *,
    meta_data: render.SeededJSON,
    user_data: str | None,
    network_data: bytes,
    vendor_data_json: bytes | None,
) -> bytes:
    """The document; ``meta_data`` and ``network_data`` as the guest's cache holds them,
    ``user_data`` the base64 text as stored."""
    meta = json.loads(meta_data.render(b""))
    meta.pop("random_seed", None)
    doc: dict[str, Any] = {"meta_data.json": meta, "user_data": user_data or None}
    if v.at_least(version, v.HAVANA) and vendor_data_json is not None:
        doc["vendor_data.json"] = json.loads(vendor_data_json)
    if v.at_least(version, v.LIBERTY):
        doc["network_data.json"] = json.loads(network_data)
    return render.dumps(doc)
