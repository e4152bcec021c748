"""What the end-to-end guests run and say: the user data scripts and cloud-configs the
scenarios boot with, and the ``E2E <kind> run=<run> ...`` lines they write to the serial
console, read back through ``os-getConsoleOutput`` (``markers``)."""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass, field

# One HTTP request from the guest script to the metadata service, through its proxy.
GUEST_HTTP_TIMEOUT = 60
MARKER = re.compile(r"^E2E (\w+) run=(\S+)(.*)$", re.MULTILINE)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def key_hash(public_key: str) -> str:
    """What the guest script prints for a key: sha256 of "type base64", first 16 hex digits."""
    kind, blob = public_key.split()[:2]
    return hashlib.sha256(f"{kind} {blob}".encode()).hexdigest()[:16]


def user_data(
    run: str, *, post_password: str | None = None, identity_check: str | None = None
) -> str:
    """A user data script that reports what the guest got on the serial console."""
    lines = ["#!/bin/sh", *report_lines(run)]
    if post_password is not None:
        lines += [
            "python3 - <<'PY' && say PASSWORD posted",
            "import urllib.request as u",
            "u.urlopen(u.Request('http://169.254.169.254/openstack/2013-04-04/password',",
            f"                   data=b'{post_password}', method='POST'),",
            f"            timeout={GUEST_HTTP_TIMEOUT})",
            "PY",
        ]
    if identity_check is not None:
        lines += identity_lines(run, forged_id=identity_check)
    lines.append("say END \"uptime=$(cut -d' ' -f1 /proc/uptime)\"")
    return "\n".join(lines) + "\n"


def report_lines(run: str) -> list[str]:
    """Shell lines defining ``say`` (an E2E marker of ``run`` on the serial console) and
    reporting what the guest got: its instance id, its datasource and the device it came from,
    and a hash of every key it authorized. ``run`` may be a shell expansion."""
    return [
        'say() { echo "E2E $1 run=' + run + ' $2" > /dev/ttyS0; }',
        'say BEGIN "iid=$(cat /var/lib/cloud/data/instance-id)"',
        'say DATASOURCE "$(cut -d: -f1 /var/lib/cloud/instance/datasource)"',
        # Where the data came from: the config drive's device ([source=/dev/sr0]); nothing
        # for the HTTP datasource.
        "say SOURCE \"$(sed -n 's/.*\\[source=\\([^]]*\\)\\].*/\\1/p' "
        '/var/lib/cloud/instance/datasource)"',
        "for f in /home/debian/.ssh/authorized_keys /root/.ssh/authorized_keys; do",
        "  grep -o 'ssh-[a-z0-9-]* [A-Za-z0-9+/=]*' \"$f\" | while read -r k; do",
        '    say KEY "file=$f hash=$(printf %s "$k" | sha256sum | cut -c1-16)"',
        "  done",
        "done",
    ]


def identity_lines(run: str, *, forged_id: str) -> list[str]:
    """Shell lines reporting who the metadata service thinks this guest is: once as asked
    plainly, once with another instance's id forged into the identity headers (a proxy that
    let them through would hand out that instance's data)."""
    return [
        "python3 - <<'PY'",
        "import json, urllib.error, urllib.request",
        "URL = 'http://169.254.169.254/openstack/latest/meta_data.json'",
        "def who(headers):",
        "    try:",
        "        with urllib.request.urlopen(urllib.request.Request(URL, headers=headers),",
        f"                                    timeout={GUEST_HTTP_TIMEOUT}) as answer:",
        "            meta = json.load(answer)",
        "    except urllib.error.HTTPError as exc:",
        "        return 'status=%d' % exc.code",
        "    return 'uuid=%s name=%s keys=%s' % (meta['uuid'], meta['name'],",
        "                                        ','.join(sorted(meta.get('public_keys', {}))))",
        f"forged = {{'X-Instance-ID': '{forged_id}', 'X-Instance-ID-Signature': '0' * 64,",
        "          'X-Tenant-ID': 'e2e-project', 'X-Forwarded-For': '169.254.169.15'}",
        "with open('/dev/ttyS0', 'w') as console:",
        f"    console.write('E2E META run={run} %s\\n' % who({{}}))",
        f"    console.write('E2E FORGED run={run} %s\\n' % who(forged))",
        "PY",
    ]


def per_boot_user_data(run: str) -> str:
    """Cloud-config whose bootcmd (run at every boot, from the user data cloud-init has then)
    reports which version of the user data the guest holds."""
    return (
        "#cloud-config\nbootcmd:\n"
        f'  - "echo E2E END run={run} uptime=$(cut -d. -f1 /proc/uptime) > /dev/ttyS0"\n'
    )


# A guest's watcher of its lifecycle notices (2.111, docs/metadata.md): long-polls events.json
# and acknowledges every scheduled event at once, reporting both on the serial console.
ACK_WATCHER = """#!/usr/bin/python3
import json, time, urllib.request
URL = "http://169.254.169.254/openstack/latest/events.json"
def say(text):
    with open("/dev/ttyS0", "w") as console:
        console.write("E2E %s\\n" % text)
tag, done = "", set()
while True:
    query = "?wait_for_change=true&timeout_sec=30" + ("&last_etag=" + tag if tag else "")
    try:
        with urllib.request.urlopen(URL + query, timeout=60) as answer:
            tag = answer.headers.get("ETag", "").strip('"')
            events = json.load(answer)["events"]
        for event in events:
            if event["status"] != "scheduled" or event["id"] in done:
                continue
            say("NOTICE run=watcher type=%s id=%s" % (event["type"], event["id"]))
            body = json.dumps({"acknowledge": [event["id"]]}).encode()
            ask = urllib.request.Request(URL, data=body, method="POST")
            with urllib.request.urlopen(ask, timeout=60) as answer:
                acknowledged = json.load(answer)["acknowledged"]
            say("ACK run=watcher id=%s" % ",".join(acknowledged))
            done.add(event["id"])
    except Exception as exc:  # the service restarting, the guest's network coming up
        say("WATCHER run=watcher error=%s" % type(exc).__name__)
        time.sleep(2)
"""


def ack_watcher_user_data(run: str) -> str:
    """``per_boot_user_data`` plus a systemd unit running ``ACK_WATCHER`` from first boot on."""
    script = "\n".join("      " + line for line in ACK_WATCHER.splitlines())
    return (
        per_boot_user_data(run)
        + "write_files:\n"
        + "  - path: /usr/local/bin/e2e-ack-watcher\n    permissions: '0755'\n"
        + "    content: |\n"
        + script
        + "\n  - path: /etc/systemd/system/e2e-ack-watcher.service\n    content: |\n"
        + "      [Unit]\n      Description=Acknowledge cloudseed lifecycle notices\n"
        + "      [Service]\n      ExecStart=/usr/local/bin/e2e-ack-watcher\n"
        + "      Restart=always\n      RestartSec=2\n"
        + "      [Install]\n      WantedBy=multi-user.target\n"
        + "runcmd:\n  - [systemctl, enable, --now, e2e-ack-watcher.service]\n"
    )


def drive_per_boot_user_data(run: str) -> str:
    """Cloud-config for a guest that reads its config drive afresh at every boot.

    cloud-init 22.4 cannot do that with the image's ``updates: network: when: [boot]``: the
    boot event resets ConfigDrive's network configuration to the "_unset" sentinel string,
    which the ConfigDrive datasource then hands out as the configuration, and init-local
    fails with "'str' object has no attribute 'get'" (the same bug cloud-init fixed for LXD in
    PR 1537; UpCloud has it too, issue 7067). So this guest, from its first boot on, turns the
    boot event off again and instead forgets its cached datasource (obj.pkl) at the end of
    every boot: the next boot finds no cache and reads the drive, with the same instance id,
    so only the per-boot parts (bootcmd) run, as they do with the HTTP datasource.

    ``bootcmd`` reports which user data the guest holds (BOOTCMD); the per-boot script, last
    in the boot, reports what the guest got (``report_lines``: the same markers as
    ``user_data``'s, at every boot) and END once the cache is gone and on disk, so that a
    reboot after END cannot come too early."""
    report = "\n".join(" " * 6 + line for line in report_lines("$(cat /run/e2e-run)"))
    return f"""#cloud-config
bootcmd:
  - "echo {run} > /run/e2e-run"
  - "echo E2E BOOTCMD run={run} > /dev/ttyS0"
write_files:
  - path: /etc/cloud/cloud.cfg.d/99-e2e-config-drive.cfg
    content: |
      updates:
        network:
          when: [ boot-new-instance ]
  - path: /var/lib/cloud/scripts/per-boot/e2e-forget-datasource
    permissions: '0755'
    content: |
      #!/bin/sh
{report}
      rm -f /var/lib/cloud/instance/obj.pkl
      sync
      say END "uptime=$(cut -d' ' -f1 /proc/uptime)"
"""


@dataclass
class Markers:
    """The E2E lines of one run, in order: (kind, rest of the line)."""

    items: list[tuple[str, str]] = field(default_factory=list)

    def of(self, kind: str) -> list[str]:
        return [rest.strip() for k, rest in self.items if k == kind]

    @property
    def done(self) -> bool:
        return bool(self.of("END"))


def markers(console: str, run: str) -> Markers:
    found = Markers()
    for kind, marker_run, rest in MARKER.findall(console):
        if marker_run == run:
            found.items.append((kind, rest))
    return found
