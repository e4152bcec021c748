"""``os-getConsoleOutput`` over real HTTP, on the fake driver's console text."""

from __future__ import annotations

import pytest

from cloudseed.compute.fake import FAKE_CONSOLE
from tests.support.cloud import create_server, make_cloud, wait_for


@pytest.fixture()
def server_id(api, api_db, tmp_path):
    cloud = make_cloud(api, api_db, tmp_path)
    created = create_server(api, cloud)
    wait_for(api, created["id"], "ACTIVE")
    return created["id"]


def console(api, server_id, body):
    return api.post(f"/v2.1/servers/{server_id}/action", json={"os-getConsoleOutput": body})


@pytest.mark.databases
class TestConsoleOutput:
    def test_whole_log(self, api, server_id):
        r = console(api, server_id, {})
        assert r.status_code == 200, r.text
        assert r.json() == {"output": FAKE_CONSOLE}
        assert console(api, server_id, {"length": -1}).json() == r.json()
        assert console(api, server_id, {"length": None}).json() == r.json()

    def test_last_lines(self, api, server_id):
        assert console(api, server_id, {"length": 2}).json() == {"output": "ONE MORE\nLAST LINE"}
        assert console(api, server_id, {"length": "1"}).json() == {"output": "LAST LINE"}

    @pytest.mark.parametrize(
        "body",
        [{"length": -2}, {"length": "-2"}, {"length": "x"}, {"length": 1.5}, {"other": 1}, None],
    )
    def test_bad_length(self, api, server_id, body):
        r = console(api, server_id, body)
        assert r.status_code == 400, r.text
        assert "badRequest" in r.json()

    def test_other_projects_do_not_see_it(self, api, server_id):
        r = api.post(
            f"/v2.1/servers/{server_id}/action",
            json={"os-getConsoleOutput": {}},
            headers={"X-Auth-Token": "eve:other"},
        )
        assert r.status_code == 404
