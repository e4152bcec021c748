"""Scenario 7: live keys (2.106) reach running guests, both ways, and SSH agrees with the API.

Two guests boot at once from the stock image (cloud-init, openssh-server, qemu-guest-agent)
with two keys each, while the service serves the login-time check part as vendordata
(``[keys] login_check = true``):

- guest A takes that part: sshd asks the metadata service for the keys at every login. Its
  user data stops qemu-guest-agent, so nothing but the login-time check can change its keys;
- guest B turns vendordata off in its user data (``vendor_data: {enabled: false}``), so it has
  the keys cloud-init wrote at first boot, and changes only through the guest agent.

Then, without a reboot, one change: the first key is replaced by a third, which logs in while
the first is refused on both guests, and a fourth key is attached with an ``expires_at`` a
minute and a half ahead: it logs in until then (the network checks below run meanwhile) and is
refused after it. Through all of it the API's delivery state is ``pending`` until the guest
has the change and then says how it got it.

The two guests share one bridged network (``--mode bridge``, IPv4 from the network's dnsmasq):
every login goes from inside the network's namespace to the guest's address. Once both are up,
each pings the other and fetches its own ``meta_data.json`` through 169.254.169.254, which is
the network's metadata proxy, plainly and with the other's identity forged into the headers
(the proxy replaces them). Then A, as root, sends as B: first from B's address (added to its
NIC), then with B's MAC as well. The bridge drops every frame of A's tap that is not from A's
MAC and address, so neither request reaches the proxy, which would take it for B: neither even
completes a TCP handshake, and A's own request right after is A's again, as is B's."""

from __future__ import annotations

import datetime as dt
import subprocess
import time
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from pathlib import Path
from typing import Any

from tests.e2e.bridged import GUEST_A, GUEST_B, GUEST_NIC, in_namespace, ssh_command
from tests.e2e.guest_scripts import GUEST_HTTP_TIMEOUT, b64, user_data
from tests.e2e.harness import E2ECloud, deleted_afterwards, ssh_keypair, ssh_login, wait_until_quiet
from tests.support.waiting import wait_until

LIVE_KEYS = {"OpenStack-API-Version": "compute 2.106"}
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


# From the END marker to sshd answering (it may be re-executing after a reload).
SSHD_TIMEOUT = 120.0
# A spoofed request waits this long for the TCP handshake that must not happen (a SYN that
# got through would be answered by the namespace's kernel at once, however busy the proxy).
SPOOF_WAIT = 5
META = "http://169.254.169.254/openstack/latest/meta_data.json"


def network_checks(*, peer: str, forged_id: str | None = None, as_peer: str | None = None) -> str:
    """What a guest runs as root on the bridged network, one line per check: whether it
    reaches ``peer``, whose metadata it gets (plainly, and with ``forged_id`` in the identity
    headers); with ``as_peer`` (the peer's MAC), whose it gets sending from the peer's address
    and then from its address and MAC, and plainly again after that.

    Each fetch prints ``rc=`` (curl's exit status), ``connects=`` (TCP connections it made),
    ``bytes=`` (the answer's length) and the instance uuid in the answer."""
    lines = [
        f"U={META}",
        "fetch() {",
        "  : > /tmp/e2e-answer",
        '  connects=$(curl -s -o /tmp/e2e-answer -w \'%{num_connects}\' "$@" "$U"); rc=$?',
        "  uuid=$(python3 -c 'import json, sys; print(json.load(sys.stdin)[\"uuid\"])' "
        "< /tmp/e2e-answer 2>/dev/null)",
        '  echo "rc=$rc connects=$connects bytes=$(wc -c < /tmp/e2e-answer) $uuid"',
        "  rm -f /tmp/e2e-answer",
        "}",
        f"ping -c 2 -W 10 {peer} >/dev/null; echo PING rc=$?",
        f'echo "OWN $(fetch -m {GUEST_HTTP_TIMEOUT})"',
    ]
    if forged_id is not None:
        lines.append(
            f'echo "FORGED $(fetch -m {GUEST_HTTP_TIMEOUT} -H "X-Instance-ID: {forged_id}" '
            f'-H "X-Instance-ID-Signature: {"0" * 64}" -H "X-Tenant-ID: e2e-project" '
            f'-H "X-Forwarded-For: {peer}")"'
        )
    if as_peer is not None:
        spoofed = f"--connect-timeout {SPOOF_WAIT} -m {GUEST_HTTP_TIMEOUT} --interface {peer}"
        lines += [
            f"mac=$(cat /sys/class/net/{GUEST_NIC}/address)",
            f"ip addr add {peer}/32 dev {GUEST_NIC}",
            f'echo "SPOOF_IP $(fetch {spoofed})"',
            f"ip link set dev {GUEST_NIC} address {as_peer}",
            f'echo "SPOOF_MAC $(fetch {spoofed})"',
            f'ip link set dev {GUEST_NIC} address "$mac"',
            f"ip addr del {peer}/32 dev {GUEST_NIC}",
            f'echo "AFTER $(fetch -m {GUEST_HTTP_TIMEOUT})"',
        ]
    return "\n".join(lines) + "\n"


def check_lines(output: str) -> dict[str, str]:
    found = {}
    for line in output.splitlines():
        name, _, rest = line.partition(" ")
        if name in ("PING", "OWN", "FORGED", "SPOOF_IP", "SPOOF_MAC", "AFTER"):
            found[name] = rest.strip()
    return found


class Guest:
    def __init__(self, cloud: E2ECloud, server_id: str, network_id: str, address: str) -> None:
        self.cloud = cloud
        self.server_id = server_id
        self.command = ssh_command(cloud, network_id, address)
        self.keyscan = [*in_namespace(cloud, network_id), "ssh-keyscan", "-T", "10", address]

    def ssh(self, key: Path, remote: str = "echo logged-in") -> subprocess.CompletedProcess[str]:
        return ssh_login(
            self.command,
            key,
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            remote=remote,
        )

    def wait_sshd(self) -> None:
        """Until sshd answers. Guest A's login-time check part reloads sshd at the end of the
        boot (its vendor script, just before the user data's END): sshd re-executes itself and
        refuses connections meanwhile, for seconds under TCG."""

        def answers() -> bool:
            done = subprocess.run(self.keyscan, capture_output=True, text=True, timeout=60)
            return done.returncode == 0 and "ssh-ed25519" in done.stdout

        wait_until(answers, timeout=SSHD_TIMEOUT, interval=2, max_interval=2, what="sshd up")

    def logs_in(self, key: Path) -> bool:
        """Whether ``key`` logs in: True, or False when sshd refuses it. A connection sshd
        closes or refuses before it answers is tried again: guest A's sshd re-executes itself
        once its login-time check part is in, which on a slow machine may come after its
        first answer to ``wait_sshd``."""
        deadline = time.monotonic() + SSHD_TIMEOUT
        while True:
            done = self.ssh(key)
            if done.returncode == 0:
                assert "logged-in" in done.stdout
                return True
            if "Permission denied" in done.stderr:
                return False
            assert time.monotonic() < deadline, done.stderr
            time.sleep(2)

    def checks(self, key: Path, script: str) -> dict[str, str]:
        """``script`` run as root in the guest; its check lines."""
        done = self.ssh(key, f"echo {b64(script)} | base64 -d | sudo sh")
        assert done.returncode == 0, (done.stdout, done.stderr)
        return check_lines(done.stdout)

    def mac(self) -> str:
        addresses = self.server()["addresses"]
        (port,) = [port for ports in addresses.values() for port in ports]
        return str(port["OS-EXT-IPS-MAC:mac_addr"])

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


def test_7_live_keys_reach_running_guests(e2e_cloud, bridged_networks, timings, tmp_path):
    cloud, ids = e2e_cloud
    network = bridged_networks["ipv4"]
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
            ("live-a", GUEST_A, no_agent_script("live-a")),
            ("live-b", GUEST_B, without_vendordata(user_data("live-b"))),
        ):
            body: dict[str, Any] = {
                "server": {
                    "name": f"e2e-{run}",
                    "imageRef": ids["image"],
                    "flavorRef": "e2e",
                    "key_names": ["live1", "live2"],
                    "user_data": b64(script),
                    "networks": [{"uuid": network, "fixed_ip": address}],
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
        a, b = Guest(cloud, a_id, network, GUEST_A), Guest(cloud, b_id, network, GUEST_B)

        # First boot: both keys log in on both guests; cloud-init read them from the metadata
        # service, which the API says.
        for guest in (a, b):
            guest.wait_sshd()
            assert guest.logs_in(private["live1"]) and guest.logs_in(private["live2"])
            delivery = guest.server()["key_delivery"]
            assert delivery["state"] == "applied", delivery
        # A's keys are not in any file: they come from the login-time check.
        assert a.server()["key_delivery"]["via"] in ("metadata", "login-time check")

        # Replace live1 by live3 while both run, and attach live4 until EXPIRY_SECONDS from
        # now (the network checks below run while it lasts).
        changed = time.monotonic()
        expires = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=EXPIRY_SECONDS)
        live4 = {"name": "live4", "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}
        for guest in (a, b):
            view = guest.set_keys(["live2", "live3", live4])
            assert view["key_names"] == ["live2", "live3", "live4"]
            assert view["key_delivery"]["state"] == "pending", view["key_delivery"]
            assert {k["name"]: k["delivery"]["state"] for k in view["keys"]}["live3"] == "pending"
        # B: the guest agent puts live3 and live4 in and takes live1 out.
        b.wait_delivered("guest agent")
        b_pushed = time.monotonic() - changed
        for guest in (b, a):
            # A: the first login asks the metadata service, which marks the generation applied.
            for name in ("live3", "live2", "live4"):
                assert guest.logs_in(private[name]), name
            assert not guest.logs_in(private["live1"])
        a.wait_delivered("login-time check", timeout=30)
        assert {k["delivery"]["state"] for k in a.server()["keys"]} == {"applied"}
        # (expires_at is to the second: live4 may end up to a second before ``expires``.)
        lasted = dt.datetime.now(dt.UTC) < expires - dt.timedelta(seconds=1)
        assert lasted, "the logins took longer than live4 lasts: raise EXPIRY_SECONDS"

        # The network: the guests reach each other, and each its own metadata through the
        # proxy, whatever identity it forges; sending as B gets A nothing, and B keeps its own.
        checked = time.monotonic()
        on_a = a.checks(
            private["live2"], network_checks(peer=GUEST_B, forged_id=b_id, as_peer=b.mac())
        )
        on_b = b.checks(private["live2"], network_checks(peer=GUEST_A, forged_id=a_id))
        network_seconds = time.monotonic() - checked
        assert on_a["PING"] == on_b["PING"] == "rc=0", (on_a, on_b)
        for found, own_id in ((on_a, a_id), (on_b, b_id)):
            for check in ("OWN", "FORGED"):
                assert found[check].startswith("rc=0 connects=1 bytes="), found
                assert found[check].endswith(f" {own_id}"), found
        # Not even a TCP handshake (curl: 28 timed out, 7 could not connect; no connection
        # made), so no refusal either: the frames never left the bridge for the proxy.
        for check in ("SPOOF_IP", "SPOOF_MAC"):
            assert on_a[check] in ("rc=28 connects=0 bytes=0", "rc=7 connects=0 bytes=0"), on_a
        assert on_a["AFTER"].startswith("rc=0 connects=1 bytes="), on_a
        assert on_a["AFTER"].endswith(f" {a_id}"), on_a
        assert b_id not in " ".join(on_a.values()) and a_id not in " ".join(on_b.values())

        # After live4 expired: refused by A's login-time check at once, by B once the agent
        # has pushed the removal (its heartbeat looks for expired keys).
        time.sleep(max(0.0, (expires - dt.datetime.now(dt.UTC)).total_seconds()) + 1)
        assert not a.logs_in(private["live4"])
        assert [k["expired"] for k in a.server()["keys"] if k["name"] == "live4"] == [True]
        deadline = time.monotonic() + PUSH_TIMEOUT
        while b.logs_in(private["live4"]):
            assert time.monotonic() < deadline, "live4 still logs in to B after it expired"
            time.sleep(3)
        for guest in (a, b):
            assert guest.logs_in(private["live2"]) and guest.logs_in(private["live3"])
        timings["7 live keys"] = {
            "a_request_to_user_data_done_s": round(boot_a.seconds, 1),
            "b_request_to_user_data_done_s": round(boot_b.seconds, 1),
            "b_push_after_change_s": round(b_pushed, 1),
            "network_checks_s": round(network_seconds, 1),
        }
