"""The soak's set-up and its few API helpers: the operator's registrations (schema, image,
flavor, network, through the CLI as an operator would), the users' key pairs, the fuzz
project's quota, server and key pair, the seeded guests (``max_count`` batches, waited for
until ACTIVE); and reading the deployment's logs for the lines logged at ERROR."""

from __future__ import annotations

import base64
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
from soak_checks import ADMIN, list_servers
from soak_fuzz import FUZZ_PROJECT, FUZZ_USER
from soak_load import KEY_POOL, PROJECT, USER, VERSION, expectations
from soak_plan import Plan
from soak_processes import HOSTS, Deployment

from tests.support.keys import ed25519_public

SEED_BATCH = 200  # servers per create request while seeding (max_count)


@dataclass(frozen=True)
class Seeded:
    guests: dict[str, str]  # id: name, never deleted
    churn: dict[str, str]  # id: name, deleted and replaced during the run
    fuzz_server: str


SEED_METADATA = {"role": "guest"}
SEED_USER_DATA = base64.b64encode(b"#cloud-config\nruncmd: [echo seeded]\n").decode()
SEED_EXPECTED = expectations(SEED_METADATA, SEED_USER_DATA, [KEY_POOL[0]])


def seed(
    api_url: str,
    plan: Plan,
    image_id: str,
    network_id: str,
    keys: dict[str, str],
    log: Callable[[str], None],
) -> Seeded:
    """The key pairs, the fuzz project's quota, server and key pair, ``plan.guests`` servers
    whose guests read all along and ``plan.churn`` servers the users will delete (and replace),
    all holding the seed's values and ACTIVE."""
    user = {"X-Auth-Token": f"{USER}:{PROJECT}", "OpenStack-API-Version": VERSION}
    fuzz = {"X-Auth-Token": FUZZ_USER, "OpenStack-API-Version": VERSION}
    with httpx.Client(base_url=api_url, timeout=120) as client:
        for name, public in keys.items():
            body = {"keypair": {"name": name, "public_key": public}}
            _ok(client.post("/v2.1/os-keypairs", json=body, headers=user))
        for project, instances in ((FUZZ_PROJECT, 10), ("other", 5)):
            body2 = {
                "quota_set": {"instances": instances, "cores": instances, "ram": 512 * instances}
            }
            _ok(client.put(f"/v2.1/os-quota-sets/{project}", json=body2, headers=ADMIN))
        fuzz_key = {"keypair": {"name": "fuzzkey", "public_key": ed25519_public("fuzz@soak")}}
        _ok(client.post("/v2.1/os-keypairs", json=fuzz_key, headers=fuzz))
        r = client.post(
            "/v2.1/servers",
            json={
                "server": {
                    "name": "fuzz-target",
                    "imageRef": image_id,
                    "flavorRef": "1",
                    "networks": [{"uuid": network_id}],
                    "key_name": "fuzzkey",
                    "metadata": {"role": "web"},
                }
            },
            headers=fuzz,
        )
        fuzz_server = _ok(r).json()["server"]["id"]
        for prefix, count in (("soak-guest", plan.guests), ("soak-churn-seed", plan.churn)):
            _create_many(client, user, prefix, count, image_id, network_id)
        wanted = plan.guests + plan.churn
        deadline = time.monotonic() + 120 + wanted * 0.5
        while True:
            listed = [s for s in list_servers(api_url) if s["tenant_id"] == PROJECT]
            building = [s for s in listed if s["status"] != "ACTIVE" or s["OS-EXT-STS:task_state"]]
            if not building and len(listed) == wanted:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{len(building)} of {len(listed)} servers not ACTIVE while seeding"
                )
            log(f"seeding: {len(listed) - len(building)} of {wanted} ACTIVE")
            time.sleep(5 if wanted > 200 else 1)
    return Seeded(
        guests={s["id"]: s["name"] for s in listed if s["name"].startswith("soak-guest-")},
        churn={s["id"]: s["name"] for s in listed if s["name"].startswith("soak-churn-seed-")},
        fuzz_server=fuzz_server,
    )


def _create_many(
    client: httpx.Client,
    user: dict[str, str],
    prefix: str,
    count: int,
    image_id: str,
    network_id: str,
) -> None:
    """``count`` servers holding the seed's values, in requests of SEED_BATCH (max_count)."""
    for batch, first in enumerate(range(0, count, SEED_BATCH)):
        size = min(SEED_BATCH, count - first)
        body = {
            "server": {
                "name": f"{prefix}-{batch}",
                "imageRef": image_id,
                "flavorRef": "1",
                "networks": [{"uuid": network_id}],
                "key_names": [KEY_POOL[0]],
                "user_data": SEED_USER_DATA,
                "metadata": SEED_METADATA,
                "min_count": size,
                "max_count": size,
            }
        }
        _ok(client.post("/v2.1/servers", json=body, headers=user))


def _ok(response: httpx.Response) -> httpx.Response:
    if response.status_code >= 300:
        request = response.request
        raise RuntimeError(
            f"{request.method} {request.url}: {response.status_code} {response.text[:300]}"
        )
    return response


def wait_for_hosts(api_url: str) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        r = httpx.get(f"{api_url}/v2.1/os-hypervisors", headers=ADMIN, timeout=10)
        if r.status_code == 200 and len(r.json()["hypervisors"]) == len(HOSTS):
            return
        time.sleep(0.5)
    raise RuntimeError("the compute agents never registered")


def register(deployment: Deployment) -> tuple[str, str]:
    """The operator's part: the schema, an image, a flavor, a network (the CLI, as an operator
    would); returns the image's and the network's ids."""
    deployment.run("db", "sync")
    disk = deployment.root / "disk.raw"
    disk.write_bytes(b"\0" * 4096)
    value = ("-f", "value", "-c", "id")
    image_id = deployment.run(
        "image", "add", "cirros", "--file", str(disk), "--disk-format", "raw", *value
    ).strip()
    deployment.run(
        "flavor", "add", "m1.tiny", "--vcpus", "1", "--ram", "512", "--disk", "1", "--id", "1"
    )
    network_id = deployment.run(
        "network", "add", "soak", "--cidr", "10.128.0.0/12", "--gateway", "10.128.0.1", *value
    ).strip()
    return image_id, network_id


def log_names(deployment: Deployment) -> list[str]:
    return sorted(p.stem for p in deployment.root.glob("*.log"))


def logged_errors(path: Path) -> Counter[str]:
    """The ERROR lines of a log, by message (numbers left out) and the exception that ended
    the traceback under it, if any."""
    found: Counter[str] = Counter()
    lines = path.read_text(errors="replace").splitlines()
    for i, line in enumerate(lines):
        if " ERROR " not in line:
            continue
        message = re.sub(r"\d+", "N", line.split(" ERROR ", 1)[1])[:120]
        exception = ""
        for later in lines[i + 1 : i + 400]:
            if " ERROR " in later or " WARNING " in later:
                break
            if later and not later[0].isspace() and ": " in later and "Traceback" not in later:
                exception = later  # the last one: what was raised in the end
        if exception:
            message += f" ({exception.split(':', 1)[0].rsplit('.', 1)[-1]})"
        found[message] += 1
    return found
