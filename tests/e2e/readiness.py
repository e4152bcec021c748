"""Readiness (2.110) in the scenarios: what makes a guest's boot fail in a module, and waiting
for the status its cloud-init reports through the webhook vendordata turns on."""

from __future__ import annotations

from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from typing import Any

from tests.e2e.harness import E2ECloud
from tests.support.waiting import wait_until

OPT_IN = {"cloudseed:boot_report": "true"}
# cloud-init's write-files module (its init stage) fails on content that is not base64; the
# guest boots on, its other modules and the user's script run as ever.
BROKEN_MODULE = "write-files"
BROKEN_CLOUD_CONFIG = """\
#cloud-config
write_files:
  - path: /var/tmp/e2e-broken
    encoding: b64
    content: "a"
"""
REPORT_TIMEOUT = 180.0  # from the END marker to modules-final's end, with room for a slow host


def with_broken_module(script: str) -> str:
    """``script`` and a cloud-config part whose write-files module fails, as MIME multipart
    user data (cloud-init runs both)."""
    message = MIMEMultipart()
    message.attach(MIMEText(script, "x-shellscript"))
    message.attach(MIMEText(BROKEN_CLOUD_CONFIG, "cloud-config"))
    return message.as_string()


def settled_status(cloud: E2ECloud, server_id: str) -> dict[str, Any]:
    """The server's ``bootstrap_status`` once it is done or failed."""

    def settled() -> dict[str, Any] | None:
        r = cloud.client.get(
            f"/v2.1/servers/{server_id}", headers={"OpenStack-API-Version": "compute 2.110"}
        )
        assert r.status_code == 200, r.text
        status: dict[str, Any] = r.json()["server"]["bootstrap_status"]
        return status if status["status"] in ("done", "failed") else None

    return wait_until(
        settled, timeout=REPORT_TIMEOUT, interval=1, max_interval=2, what=f"{server_id} settled"
    )
