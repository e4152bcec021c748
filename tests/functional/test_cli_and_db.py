"""`cloudseed db`, `cloudseed keypair` and `cloudseed serve` as an operator runs them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from cloudseed.db.engines import Database
from cloudseed.listening import ACCEPTING_SOCKETS
from cloudseed.networks import service as networks
from cloudseed.schema import sync as schema_sync
from cloudseed.schema.errors import SchemaMismatch
from cloudseed.settings import load_settings
from tests.support import keys
from tests.support.cli import run
from tests.support.databases import make_settings
from tests.support.ports import free_port
from tests.support.waiting import wait_until


class TestDb:
    def test_sync_is_idempotent_and_check_passes(self, tmp_path):
        code, out = run("--data-dir", str(tmp_path), "db", "sync")
        assert code == 0, out
        assert f"api: at revision {schema_sync.head_revision('api')}" in out
        assert f"cell1: at revision {schema_sync.head_revision('cell')}" in out
        assert (tmp_path / "cloudseed_api.sqlite").exists()
        assert run("--data-dir", str(tmp_path), "db", "sync")[0] == 0
        code, out = run("--data-dir", str(tmp_path), "db", "check")
        assert (code, out.strip()) == (0, "all databases match the models")

    def test_check_fails_before_sync(self, tmp_path):
        code, out = run("--data-dir", str(tmp_path), "db", "check")
        assert code == 1
        assert "api database is at revision none" in out

    def test_check_detects_drift(self, database_url, tmp_path, backend):
        settings = make_settings(database_url, tmp_path)
        schema_sync.sync(settings)
        schema_sync.check(settings)
        db = Database.connect("api", settings.api_database_url)
        with db.engine.begin() as conn:
            conn.execute(text("ALTER TABLE key_pairs ADD COLUMN stray INTEGER"))
        with pytest.raises(SchemaMismatch, match="differs from the models"):
            schema_sync.check(settings)
        with db.engine.begin() as conn:
            conn.execute(text("ALTER TABLE key_pairs DROP COLUMN stray"))
        db.dispose()
        schema_sync.check(settings)

    def test_invalid_config_stops_with_message(self, tmp_path):
        conf = tmp_path / "c.conf"
        conf.write_text("[api]\nauth_strategy = nope\n")
        code, out = run("--config", str(conf), "db", "sync")
        assert code == 1
        assert "invalid value 'nope' for [api] auth_strategy" in out


class TestKeypairCli:
    def test_import_list_show_delete(self, tmp_path):
        d = ["--data-dir", str(tmp_path)]
        assert run(*d, "db", "sync")[0] == 0
        pub_file = tmp_path / "k.pub"
        pub = keys.ed25519_public()
        pub_file.write_text(pub + "\n")
        code, out = run(
            *d, "keypair", "import", "k1", "--user", "u1", "--public-key", str(pub_file)
        )
        assert code == 0, out
        code, out = run(*d, "keypair", "list", "--user", "u1")
        assert code == 0 and keys.md5_fingerprint(pub) in out
        code, out = run(*d, "keypair", "show", "k1", "--user", "u1", "--format", "json")
        assert code == 0 and '"public_key": "' + pub in out
        code, out = run(
            *d, "keypair", "import", "k1", "--user", "u1", "--public-key", str(pub_file)
        )
        assert (code, out.strip()) == (1, "Error: Key pair 'k1' already exists.")
        bad = tmp_path / "bad.pub"
        bad.write_text("ssh-rsa nonsense")
        code, out = run(*d, "keypair", "import", "k2", "--user", "u1", "--public-key", str(bad))
        assert "Keypair data is invalid: failed to generate fingerprint" in out and code == 1
        assert run(*d, "keypair", "delete", "k1", "--user", "u1")[0] == 0
        code, out = run(*d, "keypair", "show", "k1", "--user", "u1")
        assert (code, out.strip()) == (1, "Error: Keypair k1 not found for user u1")


def listening_sockets(port: int) -> int:
    """TCP sockets in LISTEN state on ``port`` (any address), from /proc/net/tcp."""
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
            count += 1
    return count


@pytest.mark.parametrize("workers", [1, 2])
def test_serve_process_logs_and_stops_cleanly(tmp_path: Path, workers: int):
    """The real `cloudseed serve` process: answers, logs a line per request, exits 0 on
    SIGTERM."""
    cloudseed = [sys.executable, "-m", "cloudseed", "--data-dir", str(tmp_path)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDSEED_")}
    subprocess.run(
        [*cloudseed, "db", "sync"], check=True, env=env, capture_output=True, timeout=120
    )
    port = free_port()
    log_path = tmp_path / "serve.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [
                *(*cloudseed, "serve", "--api-listen", f"127.0.0.1:{port}"),
                # Port 0: the default 8775 may be held by anything else on the machine.
                *("--metadata-listen", "127.0.0.1:0", "--workers", str(workers)),
            ],
            stdout=log,
            stderr=log,
            env=env,
        )
    try:
        base = f"http://127.0.0.1:{port}"

        def answering() -> bool:
            assert proc.poll() is None, log_path.read_text()
            try:
                return httpx.get(f"{base}/healthz", timeout=1).status_code == 200
            except httpx.TransportError:
                return False

        try:
            wait_until(answering, timeout=30, interval=0.1, max_interval=0.1, what="serve up")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{log_path.read_text()}") from None
        r = httpx.get(f"{base}/v2.1/os-keypairs", headers={"X-Auth-Token": "u:p"})
        assert r.status_code == 200
        request_id = r.headers["x-openstack-request-id"]
        # Every worker listens on sockets of its own (SO_REUSEPORT), so the kernel spreads
        # connections over them, ACCEPTING_SOCKETS each; the parent's reservation never listens.
        assert listening_sockets(port) == workers * ACCEPTING_SOCKETS
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    output = log_path.read_text()
    assert code == 0, output
    assert f"{request_id} GET /v2.1/os-keypairs 200" in output
    assert "auth_strategy is noauth2" in output


class TestRegistryCli:
    def test_image_flavor_network(self, tmp_path):
        d = ["--data-dir", str(tmp_path)]
        assert run(*d, "db", "sync")[0] == 0
        raw = tmp_path / "disk.raw"
        raw.write_bytes(b"\0" * 1024)
        code, out = run(
            *d,
            "image",
            "add",
            "cirros",
            "--file",
            str(raw),
            "--disk-format",
            "raw",
            "--property",
            "img_config_drive=mandatory",
            "-f",
            "value",
            "-c",
            "id",
        )
        assert code == 0, out
        image_id = out.strip()
        code, out = run(*d, "image", "add", "fake", "--file", str(raw), "--disk-format", "qcow2")
        assert (code, "is not a qcow2 image" in out) == (1, True)
        code, out = run(*d, "image", "list")
        assert image_id in out and "cirros" in out
        assert (
            run(
                *d,
                "flavor",
                "add",
                "m1.tiny",
                "--vcpus",
                "1",
                "--ram",
                "512",
                "--disk",
                "1",
                "--id",
                "1",
            )[0]
            == 0
        )
        code, out = run(
            *d, "flavor", "add", "m1.tiny", "--vcpus", "1", "--ram", "512", "--disk", "1"
        )
        assert code == 1 and "already exists" in out
        assert "m1.tiny" in run(*d, "flavor", "list")[1]
        code, out = run(
            *d,
            "network",
            "add",
            "private",
            "--cidr",
            "10.1.0.0/24",
            "--gateway",
            "10.1.0.1",
            "--dns",
            "10.1.0.2",
        )
        assert code == 0, out
        code, out = run(*d, "network", "add", "bad", "--cidr", "10.1.0.0/33")
        assert code == 1
        # Overlapping networks are refused (servers on the second could never get an address).
        for overlapping in ("10.1.0.128/25", "10.0.0.0/8", "10.1.0.0/24"):
            code, out = run(*d, "network", "add", "other", "--cidr", overlapping)
            assert code == 1 and "overlaps with network private (10.1.0.0/24)" in out, out
        assert run(*d, "network", "add", "next", "--cidr", "10.1.1.0/24")[0] == 0
        assert run(*d, "network", "add", "v6", "--cidr", "fd00::/64")[0] == 0
        assert '"cidr": "10.1.0.0/24"' in run(*d, "network", "list", "-f", "json")[1]

    def test_network_modes_and_delete(self, tmp_path):
        """``--mode bridge`` (slirp stays the default), what a bridged network needs, and
        ``network delete``, refused while a port is on the network."""
        d = ["--data-dir", str(tmp_path)]
        assert run(*d, "db", "sync")[0] == 0
        code, out = run(*d, "network", "add", "plain", "--cidr", "10.2.0.0/24", "-f", "json")
        assert code == 0 and json.loads(out)["mode"] == "slirp", out
        code, out = run(
            *d, "network", "add", "blue", "--cidr", "10.3.0.0/24", "--gateway", "10.3.0.1",
            "--mode", "bridge", "--egress", "--ec2-metadata-address", "-f", "json",
        )  # fmt: skip
        assert code == 0, out
        shown = json.loads(out)
        assert (shown["mode"], shown["egress"], shown["ec2_metadata_address"]) == (
            "bridge",
            True,
            True,
        )
        for args, message in (
            (["--cidr", "10.4.0.0/24", "--mode", "bridge"], "needs a gateway"),
            (["--cidr", "169.254.169.0/24", "--gateway", "169.254.169.1", "--mode", "bridge"],
             "cannot hold the metadata address 169.254.169.254/32"),
            (["--cidr", "fd00:ec2::/64", "--mode", "bridge"], "fd00:ec2::254/128"),
            (["--cidr", "10.5.0.0/24", "--egress"], "for bridged networks"),
            (["--cidr", "10.6.0.0/24", "--mode", "tunnel"], "Invalid value for '--mode'"),
        ):  # fmt: skip
            code, out = run(*d, "network", "add", "bad", *args)
            assert code != 0 and message in out, (args, out)
        assert run(*d, "network", "add", "six", "--cidr", "fd65::/64", "--mode", "bridge")[0] == 0
        # A port on blue: refused; once released, deleted.
        settings = load_settings(environ={"CLOUDSEED_STATE_PATH": str(tmp_path)})
        db = Database.connect("api", settings.api_database_url)
        try:
            db.run(
                lambda s: networks.allocate(
                    s, network=networks.get_network(s, "blue"), instance_uuid="i-1"
                ),
                write=True,
            )
            code, out = run(*d, "network", "delete", "blue")
            assert code == 1 and "ports still in use on the network" in out, out
            db.run(lambda s: networks.release(s, instance_uuid="i-1"), write=True)
        finally:
            db.dispose()
        assert run(*d, "network", "delete", "blue") == (0, "")
        assert run(*d, "network", "show", "blue")[0] == 1
        assert run(*d, "network", "delete", "blue")[0] == 1
