"""``openstack quota show`` (python-openstackclient, in its own venv) against cloudseed's
os-quota-sets, set up as tests/compat/test_openstack_cli_servers.py. Only SQLite.

What OSC 10.5 does: ``quota show <project>`` resolves the project in Keystone first (the
identity stub answers any project, named as its id), then ``GET /os-quota-sets/<id>`` (or
``/defaults`` with ``--default``, ``/detail`` with ``--usage``). ``--compute`` keeps it from
asking Cinder and Neutron, which cloudseed is not. Without a project, ``--default`` needs the
token's project, which the admin_token auth of these tests has not (Keystone tokens have it).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support import osc
from tests.support.cloud import Cloud, create_server, mv, wait_for
from tests.support.osc_cli import Cli

pytestmark = [pytest.mark.compat, pytest.mark.parametrize("backend", ["sqlite"], indirect=True)]

ADMIN = {"X-Auth-Token": "admin:proj"}


def limits(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {row["Resource"]: row["Limit"] for row in rows}


def test_quota_show(cli: Cli, api: httpx.Client, cloud: Cloud, proxy: osc.RecordingProxy) -> None:
    r = api.put(
        "/v2.1/os-quota-sets/proj",
        json={"quota_set": {"instances": 7}},
        headers={**ADMIN, **mv("2.90")},
    )
    assert r.status_code == 200, r.text
    wait_for(api, create_server(api, cloud)["id"], "ACTIVE")

    shown = limits(cli.json("quota", "show", "--compute", "proj"))
    assert proxy.last("GET", "/v2.1/os-quota-sets/proj").status == 200
    assert (shown["instances"], shown["cores"], shown["ram"]) == (7, 20, 51200)
    assert (shown["key-pairs"], shown["injected-files"], shown["properties"]) == (100, 5, 128)

    defaults = limits(cli.json("quota", "show", "--compute", "--default", "proj"))
    assert proxy.last("GET", "/v2.1/os-quota-sets/proj/defaults").status == 200
    assert (defaults["instances"], defaults["cores"], defaults["ram"]) == (10, 20, 51200)

    rows = cli.json("quota", "show", "--compute", "--usage", "proj")
    usage = {row["Resource"]: (row["In Use"], row["Limit"]) for row in rows}
    assert proxy.last("GET", "/v2.1/os-quota-sets/proj/detail").status == 200
    assert usage["instances"] == (1, 7)
    assert usage["cores"] == (1, 20)
    assert usage["ram"] == (512, 51200)
