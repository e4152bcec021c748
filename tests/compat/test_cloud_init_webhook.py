"""cloud-init's own reporting webhook, configured by the part cloudseed's vendordata carries,
reports a boot to a running cloudseed, which shows it as done, then failed naming the module.

The handler is Debian's cloud-init (``WebHookHandler``): bookworm's 22.4, and trixie's 25.x
(tests/support/cloudinit_trixie.py), run by Debian's ``/usr/bin/python3`` in a subprocess
(``tests/support/cloudinit_webhook.py`` says what it runs).
cloud-init cannot choose its source address, so the metadata service runs in proxy mode behind
the relay of tests/support/cloudinit_run.py, which names the instance in signed headers as
Neutron's metadata proxy does; the relay's socket is made first, so that the service's
``boot_report_url`` (what the vendordata part names) is the relay. SQLite only, as the other
cloud-init tests.
"""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import httpx
import pytest

from cloudseed.db.engines import Database
from cloudseed.vendordata import boot_report
from tests.support import cloudinit_trixie, databases
from tests.support.cloud import Cloud, mv
from tests.support.cloudinit_run import SECRET
from tests.support.databases import make_settings
from tests.support.guests import boot
from tests.support.metadata_relay import metadata_relay
from tests.support.server import running_metadata

pytestmark = [
    pytest.mark.loopback_guests,
    pytest.mark.compat,
    pytest.mark.parametrize("backend", ["sqlite"], indirect=True),
]

SCRIPT = Path(__file__).parents[1] / "support" / "cloudinit_webhook.py"
TIMEOUT = 120


@pytest.fixture(params=["bookworm", "trixie"])
def lib(request: pytest.FixtureRequest) -> Path | None:
    """Which cloud-init: the host's (Debian 12's 22.4), or trixie's 25.x tree."""
    if request.param == "bookworm":
        return None
    try:
        return cloudinit_trixie.cloud_init_path()
    except cloudinit_trixie.TrixieUnavailable as exc:
        if databases.required():
            pytest.fail(f"CLOUDSEED_REQUIRE_DBS=1 but trixie's cloud-init is unavailable: {exc}")
        pytest.skip(f"trixie's cloud-init cannot be had here: {exc}")


def run_boot(python: Path, lib: Path | None, part: Path, work: Path, *fail: str) -> int:
    argv = [str(python), "-I", "-B", str(SCRIPT), str(part), "--work", str(work)]
    argv += ["--lib", str(lib)] if lib is not None else []
    result = subprocess.run(
        [*argv, *(["--fail", *fail] if fail else [])],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        cwd=work.parent,
        env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "HOME": str(work.parent)},
    )
    log = work / "cloud-init.log"
    assert result.returncode == 0, (result.stderr, log.read_text() if log.exists() else "")
    assert "Failed posting event" not in log.read_text()
    posted: int = json.loads(result.stdout)["posted"]
    return posted


def test_cloud_inits_webhook_reports_done_then_failed(
    api: httpx.Client,
    cloud: Cloud,
    database_url: str,
    api_db: Database,
    cloud_init: Path,
    lib: Path | None,
    tmp_path: Path,
) -> None:
    guest = boot(api, cloud, metadata={boot_report.METADATA_ITEM: "true"})
    relay_socket = socket.socket()
    relay_socket.bind(("127.0.0.1", 0))
    relay_socket.listen()
    port = relay_socket.getsockname()[1]
    settings = make_settings(
        database_url,
        tmp_path / "state",
        CLOUDSEED_NEUTRON__SERVICE_METADATA_PROXY="true",
        CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET=SECRET,
        CLOUDSEED_METADATA__BOOT_REPORT_URL=f"http://127.0.0.1:{port}/openstack/latest/boot_report",
    )
    part = tmp_path / "part.cloud-config"
    with (
        running_metadata(settings, api_db=api_db) as url,
        metadata_relay(
            url, instance_id=guest.id, tenant_id="proj", secret=SECRET, sock=relay_socket
        ) as relay,
    ):
        vendor = httpx.get(f"{relay.url}/openstack/latest/vendor_data.json").json()
        part.write_text(vendor["cloud-init"][-1])
        posted = run_boot(cloud_init, lib, part, tmp_path / "one")
        shown = status(api, guest.id)
        assert (shown["status"], shown["failed_module"]) == ("done", None)
        # The same guest booting again by itself, its runcmd failing this time.
        posted += run_boot(cloud_init, lib, part, tmp_path / "two", "runcmd")
    posts = [e for e in relay.exchanges if e.method == "POST"]
    assert len(posts) == posted
    assert {(e.path, e.status) for e in posts} == {("/openstack/latest/boot_report", 200)}
    assert all("content-type" not in e.headers for e in posts)  # as cloud-init sends it
    assert posts[0].headers["user-agent"].startswith("Cloud-Init/")
    shown = status(api, guest.id)
    assert (shown["status"], shown["failed_module"]) == ("failed", "runcmd")
    report = api.get(f"/v2.1/servers/{guest.id}/boot-report", headers=mv("2.110")).json()
    events = report["boot_report"]["events"]
    assert report["boot_report"]["boot"] == 2 and len(events) == posted // 2
    assert [e["name"] for e in events[:2]] == ["init-network", "init-network/config-seed_random"]
    failed = [(e["name"], e["result"]) for e in events if e["result"] == "FAIL"]
    assert failed == [("modules-config/config-runcmd", "FAIL"), ("modules-config", "FAIL")]


def status(api: httpx.Client, server_id: str) -> dict[str, str | None]:
    r = api.get(f"/v2.1/servers/{server_id}", headers=mv("2.110"))
    assert r.status_code == 200, r.text
    found: dict[str, str | None] = r.json()["server"]["bootstrap_status"]
    return found
