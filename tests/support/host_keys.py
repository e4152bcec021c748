"""Host keys as a guest reports them (cloud-init's phone_home body) and as the compute
API and the database show them."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import httpx
from sqlalchemy import select

from cloudseed.db.engines import Database
from cloudseed.hostkeys.key_lines import parse_host_key
from cloudseed.hostkeys.models import HostKeyReport
from tests.support import keys

PHONE_HOME = "/openstack/latest/phone_home"


FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def host_key_set() -> dict[str, str]:
    return {
        "pub_key_rsa": keys.rsa_public() + " root@vm\n",
        "pub_key_ecdsa": keys.ecdsa_public() + " root@vm\n",
        "pub_key_ed25519": keys.ed25519_public("root@vm") + "\n",
    }


def cloud_init_form(instance_id: str, found: dict[str, str], **more: str) -> bytes:
    """cc_phone_home's body with ``post: all``: POST_LIST_ALL's order, "N/A" for the DSA key
    no current distribution has, encoded as requests encodes a dict."""
    fields = {
        "pub_key_dsa": "N/A",
        "pub_key_rsa": found.get("pub_key_rsa", "N/A"),
        "pub_key_ecdsa": found.get("pub_key_ecdsa", "N/A"),
        "pub_key_ed25519": found.get("pub_key_ed25519", "N/A"),
        "instance_id": instance_id,
        "hostname": "vm",
        "fqdn": "vm.novalocal",
        **more,
    }
    return urlencode(fields).encode()


def canonical(found: dict[str, str]) -> list[str]:
    return [
        parse_host_key(found[f]).key for f in ("pub_key_rsa", "pub_key_ecdsa", "pub_key_ed25519")
    ]


def shown(api: httpx.Client, server_id: str, **headers: str) -> list[dict[str, Any]]:
    r = api.get(f"/v2.1/servers/{server_id}/host-keys", headers=headers)
    assert r.status_code == 200, r.text
    body: list[dict[str, Any]] = r.json()["host_keys"]
    return body


def rows(cell_db: Database, server_id: str) -> list[tuple[str, str | None]]:
    with cell_db.read() as session:
        return [
            (row.source, row.role)
            for row in session.scalars(
                select(HostKeyReport)
                .where(HostKeyReport.instance_uuid == server_id)
                .order_by(HostKeyReport.id)
            )
        ]


def post(md: httpx.Client, body: bytes, **headers: str) -> httpx.Response:
    return md.post(PHONE_HOME, content=body, headers={**FORM, **headers})
