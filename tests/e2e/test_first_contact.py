"""Scenario 8: first contact with a new guest, verified without trusting the network; the
guest is IPv6-only.

The guest's one NIC is on a bridged IPv6 network (``fd70::/64``, no DHCPv4 server): it never
has an IPv4 address, and its cloud-init finds its key and user data at ``fe80::a9fe:a9fe``, the
network's metadata proxy, which takes it for its port by its link-local address. The image is
the stock one registered with cloud-init's OpenStack ``metadata_urls`` pinned to that address
on the kernel command line (``bridged.py``: Debian 12's cloud-init asks only 169.254.169.254).
Its user data reports the datasource, the metadata URL cloud-init used, the keys it wrote and
the IPv4 addresses of its NIC (none).

The user data asks stock cloud-init to phone home
(``phone_home: {url: http://[fe80::a9fe:a9fe%25NIC]/openstack/latest/phone_home, post: all}``)
and runs a script that fetches an identity token (a session token first, then
``/openstack/latest/identity_token?audience=...``) and prints it on the console. Then, from
outside:

- the token verifies with PyJWT against the keys the compute API publishes (OpenID discovery,
  then its JWKS), with the audience asked for and the server's id as subject;
- the API shows the host keys the guest posted (source ``phone_home``), and an SSH login (from
  the network's namespace to the guest's fd70::10) with ``StrictHostKeyChecking=yes`` and
  nothing but the lines of ``cloudseed known-hosts`` succeeds, while the same login against a
  file holding another key is refused;
- the user data also installs the change-notification example (docs/examples/cloudseed-watch.sh
  and its systemd unit) with a hook that prints the new user data on the console: a PUT of new
  user data reaches the running guest's hook without a reboot."""

from __future__ import annotations

import json
import secrets
import time
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from pathlib import Path
from typing import Any

import jwt

from tests.e2e.bridged import (
    GUEST_NIC,
    IPV6_GUEST,
    IPV6_METADATA_BARE,
    IPV6_METADATA_URL,
    ssh_command,
)
from tests.e2e.guest_scripts import GUEST_HTTP_TIMEOUT, b64, key_hash, markers, user_data
from tests.e2e.harness import deleted_afterwards, ssh_keypair, ssh_login, wait_until_quiet

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"

AUDIENCE = "e2e-relying-party"
# The hook the example unit runs: the first line of the new user data on the console.
WATCH_HOOK = '#!/bin/sh\necho "E2E WATCH run=first-contact $(head -n1 "$1")" > /dev/ttyS0\n'
# The example unit, told where the metadata service is ("%%": systemd's own escape for "%").
WATCH_DROP_IN = (
    "/etc/systemd/system/cloudseed-watch.service.d/ipv6.conf",
    f"[Service]\nEnvironment=METADATA_URL={IPV6_METADATA_URL.replace('%', '%%')}\n",
)
# Started without waiting: the unit is ordered after cloud-final, which runs this script.
WATCH_START = [
    "systemctl daemon-reload",
    "systemctl enable cloudseed-watch.service",
    "systemctl start --no-block cloudseed-watch.service",
]
# From the PUT to the hook's console line: one long-poll answer and a console read.
WATCH_TIMEOUT = 60.0


def cloud_config() -> str:
    """Stock phone_home, and the example watch unit installed as the docs say (JSON is YAML)."""
    files = [
        ("/usr/local/bin/cloudseed-watch.sh", (EXAMPLES / "cloudseed-watch.sh").read_text()),
        (
            "/etc/systemd/system/cloudseed-watch.service",
            (EXAMPLES / "cloudseed-watch.service").read_text(),
        ),
        WATCH_DROP_IN,
        ("/usr/local/sbin/on-user-data", WATCH_HOOK),
    ]
    config = {
        "phone_home": {
            "url": f"{IPV6_METADATA_URL}/openstack/latest/phone_home",
            "post": "all",
            "tries": 10,
        },
        "write_files": [
            {"path": path, "content": content, "permissions": "0755"} for path, content in files
        ],
    }
    return "#cloud-config\n" + json.dumps(config, indent=1) + "\n"


# The token is longer than a console line should be: printed in numbered parts.
TOKEN_PART = 200
HOST_KEYS_TIMEOUT = 300.0


def token_lines(run: str) -> list[str]:
    return [
        "python3 - <<'PY'",
        "import urllib.request as u",
        f"base = '{IPV6_METADATA_BARE}'",
        "session = u.urlopen(u.Request(base + '/latest/api/token', method='PUT',",
        "    headers={'X-aws-ec2-metadata-token-ttl-seconds': '60'}),",
        f"    timeout={GUEST_HTTP_TIMEOUT}).read().decode()",
        "token = u.urlopen(u.Request(",
        f"    base + '/openstack/latest/identity_token?audience={AUDIENCE}',",
        "    headers={'X-aws-ec2-metadata-token': session}),",
        f"    timeout={GUEST_HTTP_TIMEOUT}).read().decode().strip()",
        "with open('/dev/ttyS0', 'w') as console:",
        f"    for i in range(0, len(token), {TOKEN_PART}):",
        f"        print(f'E2E TOKEN run={run} {{i:05d}}:{{token[i:i + {TOKEN_PART}]}}',",
        "              file=console, flush=True)",
        "PY",
    ]


# Where cloud-init found its metadata (its log), and the NIC's IPv4 addresses (none).
NETWORK_LINES = [
    "say METADATA_URL \"$(sed -n \"s/.*Using metadata source: '\\([^']*\\)'.*/\\1/p\" "
    '/var/log/cloud-init.log | tail -n 1)"',
    f'say IPV4 "count=$(ip -o -4 addr show dev {GUEST_NIC} | wc -l)"',
    f'say IPV6 "$(ip -o -6 addr show dev {GUEST_NIC} scope global | '
    "awk '{print $4}' | tr '\\n' ' ')\"",
]


def first_contact_user_data(run: str) -> str:
    script = user_data(run).splitlines()
    end = next(i for i, line in enumerate(script) if line.startswith("say END"))
    script[end:end] = NETWORK_LINES + token_lines(run) + WATCH_START
    message = MIMEMultipart()
    message.attach(MIMEText(cloud_config(), "cloud-config"))
    message.attach(MIMEText("\n".join(script) + "\n", "x-shellscript"))
    return message.as_string()


def test_8_first_contact_is_verified(e2e_cloud, bridged_networks, ipv6_image, timings, tmp_path):
    cloud, _ = e2e_cloud
    network = bridged_networks["ipv6"]
    key, public_key = ssh_keypair(tmp_path, "first-contact")
    cloud.add_keypair("first-contact", public_key)
    wait_until_quiet()
    run = "first-contact"
    with deleted_afterwards(cloud) as servers:
        started = time.monotonic()
        r = cloud.client.post(
            "/v2.1/servers",
            json={
                "server": {
                    "name": f"e2e-{run}",
                    "imageRef": ipv6_image,
                    "flavorRef": "e2e",
                    "key_name": "first-contact",
                    "user_data": b64(first_contact_user_data(run)),
                    "networks": [{"uuid": network, "fixed_ip": IPV6_GUEST}],
                }
            },
        )
        assert r.status_code == 202, r.text
        server_id = r.json()["server"]["id"]
        servers.append(server_id)
        cloud.wait_status(server_id, "ACTIVE")
        boot = cloud.wait_run(server_id, run, started)

        # IPv6 only: the key and the user data (this script) came from fe80::a9fe:a9fe, in
        # cloud-init's network stage (its local stage asks DHCPv4, which nothing answers).
        found = boot.markers
        assert found.of("BEGIN") == [f"iid={server_id}"]
        assert found.of("DATASOURCE") == ["DataSourceOpenStack"]
        assert found.of("METADATA_URL") == [IPV6_METADATA_BARE]
        assert found.of("IPV4") == ["count=0"]
        assert found.of("IPV6") == [f"{IPV6_GUEST}/64"]
        wanted = key_hash(public_key)
        assert sorted(found.of("KEY")) == sorted(
            [
                f"file=/home/debian/.ssh/authorized_keys hash={wanted}",
                f"file=/root/.ssh/authorized_keys hash={wanted}",
            ]
        )

        # The token, from the console, verified with the published keys alone.
        parts = sorted(boot.markers.of("TOKEN"))
        assert parts, cloud.console(server_id)[-3000:]
        token = "".join(part.split(":", 1)[1] for part in parts)
        discovery = cloud.client.get("/.well-known/openid-configuration")
        assert discovery.status_code == 200, discovery.text
        config: dict[str, Any] = discovery.json()
        signing_key = jwt.PyJWKClient(config["jwks_uri"]).get_signing_key_from_jwt(token)
        claims = jwt.decode(
            token,
            signing_key.key,
            algorithms=["RS256"],
            audience=AUDIENCE,
            issuer=config["issuer"],
        )
        assert claims["sub"] == server_id
        assert claims["image_id"] == ipv6_image

        # The host keys cloud-init posted (phone_home runs after the user scripts).
        deadline = time.monotonic() + HOST_KEYS_TIMEOUT
        while True:
            r = cloud.client.get(f"/v2.1/servers/{server_id}/host-keys")
            assert r.status_code == 200, r.text
            host_keys = r.json()["host_keys"]
            if host_keys:
                break
            assert time.monotonic() < deadline, "no host keys recorded"
            time.sleep(3)
        assert {k["source"] for k in host_keys} == {"phone_home"}, host_keys
        assert "ssh-ed25519" in {k["type"] for k in host_keys}
        known_hosts = tmp_path / "known_hosts"
        known_hosts.write_text(cloud.cli("known-hosts", server_id) + "\n")
        command = ssh_command(cloud, network, IPV6_GUEST)
        strict = ("-o", "StrictHostKeyChecking=yes", "-o")
        done = ssh_login(command, key, *strict, f"UserKnownHostsFile={known_hosts}")
        assert done.returncode == 0 and "logged-in" in done.stdout, done.stderr
        # The same login against another host's key is refused: the check is real.
        other = tmp_path / "other_known_hosts"
        _, impostor = ssh_keypair(tmp_path, "impostor")
        other.write_text(f"{IPV6_GUEST} {' '.join(impostor.split()[:2])}\n")
        done = ssh_login(command, key, *strict, f"UserKnownHostsFile={other}")
        assert done.returncode != 0 and "Host key verification failed" in done.stderr, done.stderr

        # The example unit is waiting on its user data (it has read the current one): new
        # user data reaches its hook without a reboot.
        waiting = "systemctl is-active cloudseed-watch && test -s /run/cloudseed-watch/current"
        deadline = time.monotonic() + WATCH_TIMEOUT
        while True:
            done = ssh_login(
                command,
                key,
                *strict,
                f"UserKnownHostsFile={known_hosts}",
                remote=f"sudo sh -c '{waiting}' && echo watching",
            )
            if "watching" in done.stdout:
                break
            assert time.monotonic() < deadline, (done.stdout, done.stderr)
            time.sleep(3)
        marker = f"watch-marker-{secrets.token_hex(4)}"
        updated = time.monotonic()
        r = cloud.client.put(
            f"/v2.1/servers/{server_id}",
            headers={"OpenStack-API-Version": "compute 2.105"},
            json={"server": {"user_data": b64(f"{marker}\nnot run: no reboot\n")}},
        )
        assert r.status_code == 200, r.text
        while marker not in boot_markers(cloud, server_id, run, "WATCH"):
            assert time.monotonic() - updated < WATCH_TIMEOUT, cloud.console(server_id)[-3000:]
            time.sleep(1)
        hook_seconds = time.monotonic() - updated
        r = cloud.client.get(f"/v2.1/servers/{server_id}/os-instance-actions")
        assert r.status_code == 200, r.text
        assert "reboot" not in {a["action"] for a in r.json()["instanceActions"]}
        timings["8 first contact"] = {
            "request_to_user_data_done_s": round(boot.seconds, 1),
            "guest_uptime_s": boot.guest_uptime,
            "user_data_put_to_hook_s": round(hook_seconds, 1),
        }


def boot_markers(cloud: Any, server_id: str, run: str, kind: str) -> str:
    return " ".join(markers(cloud.console(server_id), run).of(kind))
