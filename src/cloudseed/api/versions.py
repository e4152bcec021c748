"""Version discovery documents (``GET /``, ``GET /v2.1``, ``GET /v2.1/``), as Nova returns them.

Clients (openstacksdk, the openstack CLI) fetch ``/v2.1`` without credentials and pick their
microversion from ``version``/``min_version`` here. The legacy ``/v2`` API is not served.
"""

from __future__ import annotations

from typing import Any

from cloudseed.web.microversions import MAX_VERSION, MIN_VERSION

UPDATED = "2013-07-23T11:33:21Z"  # Nova's date for v2.1; clients do not use it


def versions_document(base: str) -> dict[str, Any]:
    return {
        "versions": [
            {
                "id": "v2.1",
                "status": "CURRENT",
                "version": str(MAX_VERSION),
                "min_version": str(MIN_VERSION),
                "updated": UPDATED,
                "links": [{"rel": "self", "href": f"{base}/v2.1/"}],
            }
        ]
    }


def version_document(base: str) -> dict[str, Any]:
    return {
        "version": {
            "id": "v2.1",
            "status": "CURRENT",
            "version": str(MAX_VERSION),
            "min_version": str(MIN_VERSION),
            "updated": UPDATED,
            "links": [
                {"rel": "self", "href": f"{base}/v2.1/"},
                {"rel": "describedby", "type": "text/html", "href": "https://docs.openstack.org/"},
            ],
            "media-types": [
                {
                    "base": "application/json",
                    "type": "application/vnd.openstack.compute+json;version=2.1",
                }
            ],
        }
    }
