"""The real openstack CLI on compute hosts: `openstack compute service list/set` and
`openstack hypervisor list/show`, as an admin, against cloudseed's os-services and
os-hypervisors."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.support import osc
from tests.support.osc_cli import Cli

pytestmark = [
    pytest.mark.compat,
    # Only SQLite, as the other CLI tests: each `openstack` run costs 1.5-3 s of start-up, and
    # os-services and os-hypervisors on every backend are tests/functional/test_hosts_api.py's.
    pytest.mark.parametrize("backend", ["sqlite"], indirect=True),
]


def test_compute_services_and_hypervisors(
    openstack: Path,
    proxy: osc.RecordingProxy,
    identity: osc.IdentityStub,
    api: httpx.Client,
    tmp_path: Path,
) -> None:
    config = tmp_path / "osc"
    config.mkdir()
    env = osc.cloud_env(config, f"{proxy.url}/v2.1", "admin:proj", identity.url)
    admin = Cli(openstack, env, tmp_path)
    services = admin.json("compute", "service", "list")
    # The test server's own agent is a compute host, up and enabled.
    [mine] = [s for s in services if s["Binary"] == "nova-compute"]
    assert (mine["Status"], mine["State"], mine["Zone"]) == ("enabled", "up", "nova")
    host = mine["Host"]
    admin(
        "--os-compute-api-version", "2.53", "compute", "service", "set", "--disable",
        "--disable-reason", "maintenance", host, "nova-compute",
    )  # fmt: skip
    [changed] = admin.json("compute", "service", "list", "--host", host, "--long")
    assert (changed["Status"], changed["Disabled Reason"]) == ("disabled", "maintenance")
    admin(
        "--os-compute-api-version", "2.53", "compute", "service", "set", "--enable", host,
        "nova-compute",
    )  # fmt: skip
    hypervisors = admin.json("hypervisor", "list")
    [node] = [h for h in hypervisors if h["Hypervisor Hostname"] == host]
    assert (node["Hypervisor Type"], node["State"]) == ("fake", "up")
    shown = admin.json("hypervisor", "show", str(node["ID"]))
    assert shown["service_host"] == host or shown.get("host") == host, shown
    # A member may not see them (Nova's policy).
    member_config = tmp_path / "member"
    member_config.mkdir()
    member_env = osc.cloud_env(member_config, f"{proxy.url}/v2.1", "alice:proj", identity.url)
    member = Cli(openstack, member_env, tmp_path)
    result = member("compute", "service", "list", ok=False)
    assert "403" in result.stderr or "Policy" in result.stderr, result.stderr
