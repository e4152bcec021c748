"""Scenario 7: live keys (2.106) reach running guests, both ways, and SSH agrees with the API.

Two guests boot at once from the stock image (cloud-init, openssh-server, qemu-guest-agent)
with two keys each, while the service serves the login-time check part as vendordata
(``[keys] login_check = true``):

- guest A takes that part: sshd asks the metadata service for the keys at every login. Its
  user data stops qemu-guest-agent, so nothing but the login-time check can change its keys;
- guest B turns vendordata off in its user data (``vendor_data: {enabled: false}``), so it has
  the keys cloud-init wrote at first boot, and changes only through the guest agent.

Then, without a reboot: the first key is replaced by a third, which logs in while the first is
refused on both guests; a fourth key attached with an ``expires_at`` a minute ahead logs in
until then and is refused after it. Through all of it the API's delivery state is ``pending``
until the guest has the change and then says how it got it. Every login goes through the
guest's SSH forward on loopback (``cloudseed:ssh_forward``)."""

from __future__ import annotations

import datetime as dt
import time
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from pathlib import Path
from typing import Any

from tests.e2e.harness import (
    E2ECloud,
    b64,
    deleted_afterwards,
    ssh_keypair,
    ssh_login,
    user_data,
    wait_until_quiet,
)
from tests.support.waiting import wait_until

LIVE_KEYS = {"OpenStack-API-Version": "compute 2.106"}
SECOND_ADDRESS = "169.254.169.16"
# A push through the guest agent retries for about three minutes (agent/key_operations.py); a
# guest's agent under TCG may take most of that to come up.
PUSH_TIMEOUT = 300.0
EXPIRY_SECONDS = 90


def no_agent_script(run: str) -> str:
    """Guest A: the report script, after switching the guest agent off for good."""
    script = user_data(run)
    first, rest = script.split("\n", 1)
    return f"{first}\nsystemctl mask --now qemu-guest-agent >/dev/null 2>&1\n{rest}"


def without_vendordata(script: str) -> str:
    """Guest B: the same report script, with vendordata turned off by a cloud-config part."""
    message = MIMEMultipart()
    message.attach(MIMEText("#cloud-config\nvendor_data:\n  enabled: false\n", "cloud-config"))
    message.attach(MIMEText(script, "x-shellscript"))
    return message.as_string()


class Guest:
    def __init__(self, cloud: E2ECloud, server_id: str) -> None:
        self.cloud = cloud
        self.server_id = server_id
        self.command = cloud.cli("server", "ssh", server_id).split()

    def logs_in(self, key: Path) -> bool:
        done = ssh_login(
            self.command,
            key,
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
        )
        if done.returncode == 0:
            assert "logged-in" in done.stdout
            return True
        assert "Permission denied" in done.stderr, done.stderr
        return False

    def server(self) -> dict[str, Any]:
        r = self.cloud.client.get(f"/v2.1/servers/{self.server_id}", headers=LIVE_KEYS)
        assert r.status_code == 200, r.text
        server: dict[str, Any] = r.json()["server"]
        return server

    def set_keys(self, key_names: list[Any]) -> dict[str, Any]:
        r = self.cloud.client.put(
            f"/v2.1/servers/{self.server_id}",
            headers=LIVE_KEYS,
            json={"server": {"key_names": key_names}},
        )
        assert r.status_code == 200, r.text
        server: dict[str, Any] = r.json()["server"]
        return server

    def wait_delivered(self, via: str, timeout: float = PUSH_TIMEOUT) -> dict[str, Any]:
        def applied() -> dict[str, Any] | None:
            delivery: dict[str, Any] = self.server()["key_delivery"]
            if delivery["state"] != "applied":
                return None
            assert delivery["via"] == via, delivery
            return delivery

        return wait_until(
            applied, timeout=timeout, interval=3, max_interval=3, what="the key delivery applied"
        )


def test_7_live_keys_reach_running_guests(e2e_cloud, timings, tmp_path):
    cloud, ids = e2e_cloud
    keys = {name: ssh_keypair(tmp_path, name) for name in ("live1", "live2", "live3", "live4")}
    for name, (_, public_key) in keys.items():
        cloud.add_keypair(name, public_key)
    private = {name: path for name, (path, _) in keys.items()}
    wait_until_quiet()
    with (
        cloud.reconfigured({"CLOUDSEED_KEYS__LOGIN_CHECK": "true"}),
        deleted_afterwards(cloud) as servers,
    ):
        started = {}
        for run, address, script in (
            ("live-a", None, no_agent_script("live-a")),
            ("live-b", SECOND_ADDRESS, without_vendordata(user_data("live-b"))),
        ):
            body: dict[str, Any] = {
                "server": {
                    "name": f"e2e-{run}",
                    "imageRef": ids["image"],
                    "flavorRef": "e2e",
                    "key_names": ["live1", "live2"],
                    "user_data": b64(script),
                    "metadata": {"cloudseed:ssh_forward": "true"},
                    "networks": [{"uuid": ids["network"], "fixed_ip": address or "169.254.169.15"}],
                }
            }
            started[run] = time.monotonic()
            r = cloud.client.post("/v2.1/servers", headers=LIVE_KEYS, json=body)
            assert r.status_code == 202, r.text
            servers.append(r.json()["server"]["id"])
        a_id, b_id = servers
        for server_id in (a_id, b_id):
            cloud.wait_status(server_id, "ACTIVE")
        boot_a = cloud.wait_run(a_id, "live-a", started["live-a"], together=2)
        boot_b = cloud.wait_run(b_id, "live-b", started["live-b"], together=2)
        a, b = Guest(cloud, a_id), Guest(cloud, b_id)

        # First boot: both keys log in on both guests; cloud-init read them from the metadata
        # service, which the API says.
        for guest in (a, b):
            assert guest.logs_in(private["live1"]) and guest.logs_in(private["live2"])
            delivery = guest.server()["key_delivery"]
            assert delivery["state"] == "applied", delivery
        # A's keys are not in any file: they come from the login-time check.
        assert a.server()["key_delivery"]["via"] in ("metadata", "login-time check")

        # Replace live1 by live3 while both run.
        changed = time.monotonic()
        for guest in (a, b):
            view = guest.set_keys(["live2", "live3"])
            assert view["key_names"] == ["live2", "live3"]
            assert view["key_delivery"]["state"] == "pending", view["key_delivery"]
            assert {k["name"]: k["delivery"]["state"] for k in view["keys"]}["live3"] == "pending"
        # B: the guest agent puts live3 in and takes live1 out.
        b.wait_delivered("guest agent")
        b_pushed = time.monotonic() - changed
        assert b.logs_in(private["live3"]) and b.logs_in(private["live2"])
        assert not b.logs_in(private["live1"])
        # A: the next login asks the metadata service, which marks the generation applied.
        assert a.logs_in(private["live3"]) and a.logs_in(private["live2"])
        assert not a.logs_in(private["live1"])
        a.wait_delivered("login-time check", timeout=30)
        assert {k["delivery"]["state"] for k in a.server()["keys"]} == {"applied"}

        # live4 until a minute and a half from now: it works until then, on both guests.
        expires = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=EXPIRY_SECONDS)
        expires_at = expires.strftime("%Y-%m-%dT%H:%M:%SZ")
        for guest in (a, b):
            guest.set_keys(["live2", {"name": "live4", "expires_at": expires_at}])
        b.wait_delivered("guest agent")
        assert b.logs_in(private["live4"]) and a.logs_in(private["live4"])
        assert not a.logs_in(private["live3"]) and not b.logs_in(private["live3"])
        # After it expired: refused by A's login-time check at once, by B once the agent has
        # pushed the removal (its heartbeat looks for expired keys).
        time.sleep(max(0.0, (expires - dt.datetime.now(dt.UTC)).total_seconds()) + 1)
        assert not a.logs_in(private["live4"])
        assert [k["expired"] for k in a.server()["keys"] if k["name"] == "live4"] == [True]
        deadline = time.monotonic() + PUSH_TIMEOUT
        while b.logs_in(private["live4"]):
            assert time.monotonic() < deadline, "live4 still logs in to B after it expired"
            time.sleep(10)
        assert b.logs_in(private["live2"]) and a.logs_in(private["live2"])
        timings["7 live keys"] = {
            "a_request_to_user_data_done_s": round(boot_a.seconds, 1),
            "b_request_to_user_data_done_s": round(boot_b.seconds, 1),
            "b_push_after_change_s": round(b_pushed, 1),
        }
