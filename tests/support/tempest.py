"""tempest (OpenStack's own conformance suite, from PyPI) against cloudseed behind a real Keystone.

``tempest_venv()`` creates, once, ``<repo>/.cache/tempest-venv`` (git-ignored) with
``pip install tempest==47.0.0`` (tempest 47 knows Nova's microversions up to 2.100 and checks
every body against its schemas, ``additionalProperties: false``) and reuses it while its
marker names the same requirement and ``tempest --version`` works. Concurrent callers serialise
on a lock file. When PyPI cannot be reached the caller is told to skip (``TempestUnavailable``)
unless ``CLOUDSEED_REQUIRE_DBS=1`` (CI), where that is a failure.

``tempest_cloud(directory)`` stands up what tempest needs: a Keystone (``tests/support/
keystone.py``), cloudseed in keystone mode with the fake driver (in a thread of this process),
two images, two flavors and a network, the compute, network and image endpoints in Keystone's
catalog (the network and image endpoints are cloudseed's read-only Neutron slice and its Glance
slice; tempest finds ``fixed_network_name`` through the first), and tempest's pre-provisioned
accounts (``accounts.yaml``). ``run_tempest`` writes a ``tempest.conf`` whose feature flags
say what cloudseed offers (``FEATURES``), runs the selection with ``tempest run`` and returns
every test's outcome, with the reason of each skip.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.orm import Session

from cloudseed.db.engines import Database
from cloudseed.flavors import service as flavors
from cloudseed.images import service as images
from cloudseed.networks import service as networks
from cloudseed.schema import sync as schema_sync
from cloudseed.settings import load_settings
from tests.support import keystone as keystone_support
from tests.support import osc, tool_venv
from tests.support.keystone import Keystone
from tests.support.server import running_api

VENV_DIR = tool_venv.CACHE_DIR / "tempest-venv"
REQUIREMENTS = ("tempest==47.0.0",)
INSTALL_TIMEOUT = 600  # seconds; a cold install here takes ~60 s (~90 wheels)

Report = Callable[[str], None]

# What cloudseed offers, in tempest's words. Each False (and each service that is not
# available) is listed with its reason in docs/api-differences.md ("tempest").
FEATURES: dict[str, dict[str, str]] = {
    "compute-feature-enabled": {
        "disk_config": "false",  # OS-DCF:diskConfig is always MANUAL; no AUTO partitioning
        "change_password": "false",
        "console_output": "true",
        "resize": "false",
        "pause": "false",
        "shelve": "false",
        "shelve_migrate": "false",
        "suspend": "false",
        "cold_migration": "false",
        "live_migration": "false",
        "metadata_service": "true",
        "vnc_console": "false",
        "spice_console": "false",
        "serial_console": "false",
        "rescue": "false",
        "stable_rescue": "false",
        "enable_instance_password": "true",
        "interface_attach": "false",
        "snapshot": "false",
        "personality": "true",
        "attach_encrypted_volume": "false",
        "config_drive": "true",
        "scheduler_enabled_filters": (
            "AvailabilityZoneFilter,ComputeFilter,SameHostFilter,DifferentHostFilter"
        ),
        "swap_volume": "false",
        "volume_multiattach": "false",
        "ide_bus": "false",
        "unified_limits": "false",
    },
    "service_available": {
        "nova": "true",
        # Server create finds `fixed_network_name` through the network endpoint, cloudseed's
        # read-only Neutron slice; nothing in the selection writes to Neutron.
        "neutron": "true",
        # tempest's admin compute tests need an image client, and flavors.test_flavors_negative
        # creates, uploads and deletes an image: the catalog's image endpoint is cloudseed's
        # Glance slice (a project's own images; no import, members, PATCH or download).
        "glance": "true",
        "cinder": "false",
        "swift": "false",
        "horizon": "false",
        "placement": "false",
    },
    "validation": {"run_validation": "false"},
    "network-feature-enabled": {"port_security": "false", "floating_ips": "false"},
    "volume-feature-enabled": {"snapshot": "false", "backup": "false"},
}

# tempest's compute API tests of issue 16: key pairs, servers (create, list with filters,
# show, update, delete, metadata, tags, rebuild, reboot, stop/start, instance actions, multiple
# create, names and hostnames), flavors and images reads, and the admin variants.
FULL_SELECTION = (
    r"^tempest\.api\.compute\.("
    r"keypairs\."
    r"|flavors\."
    r"|images\.(test_list_images|test_list_image_filters_negative|test_image_metadata_negative)\."
    r"|servers\.(test_create_server|test_list_server_filters|test_list_servers_negative"
    r"|test_servers|test_servers_negative|test_servers_microversions|test_delete_server"
    r"|test_server_metadata|test_server_metadata_negative|test_server_actions"
    r"|test_instance_actions|test_instance_actions_negative|test_multiple_create"
    r"|test_multiple_create_negative|test_server_tags)\."
    # Not admin.test_flavors*: they create and delete flavors, which cloudseed's API does not
    # (`cloudseed flavor add`); docs/tempest.md.
    r"|admin\.(test_keypairs_v210|test_create_server|test_delete_server|test_servers"
    r"|test_servers_negative)\."
    r")"
)
# The few minutes `make test` runs (tests/compat/test_tempest.py).
SHORT_SELECTION = (
    r"^tempest\.api\.compute\.("
    r"keypairs\."
    r"|servers\.test_server_metadata\."
    r"|servers\.test_instance_actions\."
    r"|servers\.test_servers\.ServersTestJSON\."
    r"|servers\.test_create_server\.ServersTestJSON\."
    r"|servers\.test_server_actions\.ServerActionsTestJSON\.(test_rebuild|test_reboot)"
    r"|servers\.test_servers_microversions\.ServerShowV25[47]Test\."
    r")"
)


class TempestUnavailable(tool_venv.Unavailable):
    """tempest (or Keystone) could not be installed because the package registry is unreachable."""


def required() -> bool:
    """Under CI (``CLOUDSEED_REQUIRE_DBS=1``) a tempest that cannot be had is a failure."""
    return keystone_support.required()


def _stderr_report(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# --- the venv ------------------------------------------------------------------------------------


def _bin(venv: Path, name: str) -> Path:
    return venv / "bin" / name


def _works(venv: Path) -> bool:
    if not tool_venv.has_marker(venv, REQUIREMENTS):
        return False
    return tool_venv.answers(venv, _bin(venv, "tempest"), "--version")


def _build(venv: Path, report: Report) -> None:
    started = time.monotonic()
    tool_venv.build(
        venv,
        REQUIREMENTS,
        timeout=INSTALL_TIMEOUT,
        unavailable=TempestUnavailable,
        network_errors=osc.NETWORK_ERRORS,
    )
    if not _works(venv):
        raise RuntimeError(f"{_bin(venv, 'tempest')} --version does not work after install")
    report(f"tempest: venv built in {time.monotonic() - started:.1f} s")


def tempest_venv(report: Report = _stderr_report) -> Path:
    """The cached venv with tempest; builds it when needed (``TempestUnavailable`` offline)."""
    return tool_venv.cached(VENV_DIR, _works, lambda venv: _build(venv, report))


# --- the cloud -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cloud:
    keystone: Keystone
    compute_url: str  # http://127.0.0.1:<port>/v2.1
    image_id: str
    image2_id: str
    network_name: str
    accounts_file: Path


def _register_endpoints(keystone: Keystone, compute_url: str) -> None:
    """Put cloudseed in Keystone's catalog: compute, and network (the Neutron slice)."""
    token = keystone_support.issue_token(
        keystone.auth_url,
        "admin",
        keystone_support.ADMIN_PASSWORD,
        {"system": {"all": True}},
    )
    root = compute_url.removesuffix("/v2.1")
    with httpx.Client(
        base_url=keystone.auth_url, headers={"X-Auth-Token": token}, timeout=30
    ) as client:
        for kind, name, url in (
            ("compute", "nova", compute_url),
            ("network", "neutron", f"{root}/network"),
            ("image", "glance", f"{root}/image"),
        ):
            service = client.post("/services", json={"service": {"type": kind, "name": name}})
            service.raise_for_status()
            for interface in ("public", "internal", "admin"):
                response = client.post(
                    "/endpoints",
                    json={
                        "endpoint": {
                            "service_id": service.json()["service"]["id"],
                            "interface": interface,
                            "url": url,
                            "region_id": "RegionOne",
                        }
                    },
                )
                response.raise_for_status()


def _provision_accounts(keystone: Keystone, directory: Path, concurrency: int) -> Path:
    """tempest's pre-provisioned accounts (accounts.yaml): projects of two users with roles
    member and reader (a primary or alt, and its project reader), and admins in projects of
    their own. Creating them once instead of per test
    class (dynamic credentials) spares Keystone hundreds of writes."""
    token = keystone_support.issue_token(
        keystone.auth_url, "admin", keystone_support.ADMIN_PASSWORD, {"system": {"all": True}}
    )
    lines = []
    with httpx.Client(
        base_url=keystone.auth_url, headers={"X-Auth-Token": token}, timeout=30
    ) as client:

        def ok(response: httpx.Response) -> dict[str, Any]:
            response.raise_for_status()
            return response.json() if response.content else {}

        roles = {r["name"]: r["id"] for r in ok(client.get("/roles"))["roles"]}
        # (user, project, roles): tempest takes a primary or alt and then a project reader of
        # the same project, so every project has two users with both roles.
        accounts: list[tuple[str, str, tuple[str, ...]]] = [
            (f"user{n}{half}", f"project{n}", ("member", "reader"))
            for n in range(2 * concurrency + 1)
            for half in "ab"
        ]
        accounts += [(f"admin{n}", f"admin{n}", ("admin",)) for n in range(concurrency + 1)]
        projects: dict[str, str] = {}
        for name, project_name, user_roles in accounts:
            if project_name not in projects:
                projects[project_name] = ok(
                    client.post(
                        "/projects",
                        json={
                            "project": {"name": f"tempest-{project_name}", "domain_id": "default"}
                        },
                    )
                )["project"]["id"]
            project = projects[project_name]
            password = f"{name}-secret"
            user = ok(
                client.post(
                    "/users",
                    json={
                        "user": {
                            "name": f"tempest-{name}",
                            "password": password,
                            "domain_id": "default",
                            "default_project_id": project,
                        }
                    },
                )
            )["user"]["id"]
            for role in user_roles:
                ok(client.put(f"/projects/{project}/users/{user}/roles/{roles[role]}"))
            lines += [
                f"- username: tempest-{name}",
                f"  project_name: tempest-{project_name}",
                f"  password: {password}",
                "  domain_name: Default",
                f"  roles: [{', '.join(user_roles)}]",
            ]
    accounts_file = directory / "accounts.yaml"
    accounts_file.write_text("\n".join(lines) + "\n")
    return accounts_file


@contextmanager
def tempest_cloud(
    directory: Path, *, concurrency: int = 2, report: Report = _stderr_report
) -> Iterator[Cloud]:
    """Keystone, then cloudseed in keystone mode (fake driver) with two images, two flavors and
    a network, both in the catalog. ``TempestUnavailable`` when Keystone cannot be installed."""
    try:
        (directory / "keystone").mkdir(parents=True, exist_ok=True)
        with keystone_support.running_keystone(directory / "keystone", report=report) as keystone:
            state = directory / "cloudseed"
            state.mkdir(parents=True, exist_ok=True)
            database = f"sqlite:///{state / 'cloudseed.sqlite'}"
            config = state / "cloudseed.conf"
            config.write_text(f"""\
[DEFAULT]
state_path = {state}
compute_driver = fake

[api]
auth_strategy = keystone

[api_database]
connection = {database}

[database]
connection = {database}

[fake_driver]
delay_ms = 50

[keystone_authtoken]
www_authenticate_uri = {keystone.auth_url}
auth_url = {keystone.auth_url}
auth_type = password
username = {keystone.service_user.name}
password = {keystone.service_user.password}
project_name = {keystone.service_user.project}
user_domain_name = Default
project_domain_name = Default
""")
            settings = load_settings(config_file=config, environ={})
            schema_sync.sync(settings)
            disk = state / "disk.raw"
            disk.write_bytes(b"\0" * 4096)
            api_db = Database.connect("api", settings.api_database_url)
            try:

                def work(session: Session) -> tuple[str, str]:
                    flavors.add_flavor(
                        session, name="m1.tiny", flavorid="1", vcpus=1, ram=512, disk=1
                    )
                    flavors.add_flavor(
                        session, name="m1.small", flavorid="2", vcpus=1, ram=1024, disk=2
                    )
                    image = images.add_image(
                        session, name="cirros", path=disk, disk_format="raw"
                    ).uuid
                    image2 = images.add_image(
                        session, name="cirros-alt", path=disk, disk_format="raw"
                    ).uuid
                    networks.add_network(
                        session,
                        name="private",
                        cidr="10.0.0.0/16",
                        gateway="10.0.0.1",
                        dns=["10.0.0.2"],
                    )
                    return image, image2

                image, image2 = api_db.run(work, write=True)
            finally:
                api_db.dispose()
            # An availability zone of its own would hide the host from tempest's "nova".
            settings = dataclasses.replace(
                settings,
                default=dataclasses.replace(
                    settings.default, host="tempest-compute", default_availability_zone="nova"
                ),
            )
            with running_api(settings) as base:
                compute_url = f"{base}/v2.1"
                _register_endpoints(keystone, compute_url)
                accounts = _provision_accounts(keystone, directory, concurrency)
                yield Cloud(keystone, compute_url, image, image2, "private", accounts)
    except keystone_support.KeystoneUnavailable as exc:
        raise TempestUnavailable(str(exc)) from exc


# --- tempest.conf and a run ----------------------------------------------------------------------


def config_text(cloud: Cloud, workspace: Path, *, max_microversion: str) -> str:
    sections: dict[str, dict[str, str]] = {
        "DEFAULT": {"log_file": str(workspace / "tempest.log"), "debug": "false"},
        "auth": {
            "use_dynamic_credentials": "false",
            "test_accounts_file": str(cloud.accounts_file),
            "create_isolated_networks": "false",
            "admin_username": "admin",
            "admin_password": keystone_support.ADMIN_PASSWORD,
            "admin_project_name": "admin",
            "admin_domain_name": "Default",
            "tempest_roles": "member",
        },
        "identity": {
            "uri_v3": cloud.keystone.auth_url,
            "auth_version": "v3",
            "region": "RegionOne",
            "v3_endpoint_type": "public",
        },
        "identity-feature-enabled": {"api_v2": "false", "api_v3": "true"},
        "compute": {
            "image_ref": cloud.image_id,
            "image_ref_alt": cloud.image2_id,
            "flavor_ref": "1",
            "flavor_ref_alt": "2",
            "fixed_network_name": cloud.network_name,
            "min_microversion": "2.1",
            "max_microversion": max_microversion,
            "build_timeout": "60",
            "build_interval": "1",
            "region": "RegionOne",
            "endpoint_type": "publicURL",
        },
        "network": {"region": "RegionOne", "endpoint_type": "publicURL"},
        **FEATURES,
    }
    lines: list[str] = []
    for name, options in sections.items():
        lines.append(f"[{name}]")
        lines += [f"{key} = {value}" for key, value in options.items()]
        lines.append("")
    return "\n".join(lines)


@dataclass(frozen=True)
class Outcome:
    test: str
    status: str  # "success" | "skip" | "fail"
    reason: str  # why it was skipped, or the tail of the failure
    seconds: float


@dataclass
class Run:
    max_microversion: str
    seconds: float
    outcomes: list[Outcome]

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)


# Reads `stestr last --subunit` on stdin (in tempest's venv) and prints one JSON line per test.
_DECODE = """\
import json, sys
import subunit, testtools
results = {}
def on_test(test):
    details = test.get("details", {})
    text = ""
    for key in ("reason", "traceback"):
        if key in details:
            text = details[key].as_text()
            break
    times = [t for t in test.get("timestamps", ()) if t is not None]
    seconds = (times[-1] - times[0]).total_seconds() if len(times) == 2 else 0.0
    results[test["id"]] = {"status": test["status"], "reason": text, "seconds": seconds}
stream = subunit.ByteStreamToStreamResult(sys.stdin.buffer, non_subunit_name="stdout")
result = testtools.StreamToDict(on_test)
result.startTestRun()
stream.run(result)
result.stopTestRun()
for test_id, value in sorted(results.items()):
    print(json.dumps({"test": test_id, **value}))
"""

# "[id-...]" and the "(...)" tempest appends to an id carry no information for a reader.
_ID_NOISE = re.compile(r"\[[^\]]*\]$")


def run_tempest(
    cloud: Cloud,
    workspace: Path,
    *,
    selection: str,
    max_microversion: str,
    concurrency: int = 2,
    report: Report = _stderr_report,
) -> Run:
    venv = tempest_venv(report)
    for old in (workspace, workspace.parent / f"{workspace.name}.workspaces.yaml"):
        if old.is_dir():
            shutil.rmtree(old)
        elif old.exists():
            old.unlink()
    # tempest makes ~/.tempest/etc whatever it is told: a HOME of its own keeps it here.
    env = tool_venv.clean_env({"HOME": str(workspace.parent)})
    subprocess.run(
        # Its own workspace registry: nothing is written to ~/.tempest.
        [
            str(_bin(venv, "tempest")),
            "init",
            "--workspace-path",
            str(workspace.parent / f"{workspace.name}.workspaces.yaml"),
            str(workspace),
        ],
        check=True,
        capture_output=True,
        env=env,
        timeout=300,
    )
    (workspace / "etc" / "tempest.conf").write_text(
        config_text(cloud, workspace, max_microversion=max_microversion)
    )
    started = time.monotonic()
    result = subprocess.run(
        [
            str(_bin(venv, "tempest")),
            "run",
            "--regex",
            selection,
            "--concurrency",
            str(concurrency),
        ],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    seconds = time.monotonic() - started
    (workspace / "tempest-run.out").write_text(result.stdout + result.stderr)
    last = subprocess.run(
        [str(_bin(venv, "stestr")), "last", "--subunit"],
        cwd=workspace,
        env=env,
        capture_output=True,
        timeout=300,
        check=False,
    )
    decoded = subprocess.run(
        [str(_bin(venv, "python")), "-c", _DECODE],
        input=last.stdout,
        env=env,
        capture_output=True,
        timeout=300,
        check=True,
    )
    outcomes = []
    for line in decoded.stdout.decode().splitlines():
        item: dict[str, Any] = json.loads(line)
        status = {"success": "success", "skip": "skip"}.get(item["status"], "fail")
        outcomes.append(
            Outcome(
                test=_ID_NOISE.sub("", item["test"]),
                status=status,
                reason=item["reason"].strip(),
                seconds=float(item["seconds"]),
            )
        )
    if not outcomes:
        raise RuntimeError(f"tempest ran nothing:\n{(result.stdout + result.stderr)[-4000:]}")
    return Run(max_microversion, seconds, outcomes)


def summary(run: Run) -> str:
    """One line of counts, then each skip (reason) and failure."""
    lines = [
        f"max_microversion {run.max_microversion}: {run.count('success')} passed, "
        f"{run.count('skip')} skipped, {run.count('fail')} failed in {run.seconds:.0f} s"
    ]
    for outcome in run.outcomes:
        if outcome.status == "fail":
            lines.append(f"FAILED {outcome.test}\n{outcome.reason[-3000:]}")
    return "\n".join(lines)
