"""`cloudseed db sync` makes the first identity key; `cloudseed identity rotate|list` as an
operator runs them (SQLite in a scratch directory: the commands, not the backend, are under
test; tests/functional/test_identity_keys.py covers the three databases)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

from tests.support.cli import run


def keys(data_dir: Path) -> list[dict[str, str | None]]:
    code, out = run("--data-dir", str(data_dir), "identity", "list", "-f", "json")
    assert code == 0, out
    listed: list[dict[str, str | None]] = json.loads(out)
    return listed


def test_sync_makes_one_first_key(tmp_path: Path) -> None:
    code, out = run("--data-dir", str(tmp_path), "db", "sync")
    assert code == 0, out
    (line,) = [x for x in out.splitlines() if x.startswith("identity: signing key ")]
    kid = line.removeprefix("identity: signing key ")
    assert run("--data-dir", str(tmp_path), "db", "sync")[1].endswith(f"signing key {kid}\n")
    (only,) = keys(tmp_path)
    assert (only["kid"], only["state"], only["retired_at"]) == (kid, "signing", None)


def test_rotate_publishes_the_new_key_and_keeps_the_old_one_for_the_grace(tmp_path: Path) -> None:
    assert run("--data-dir", str(tmp_path), "db", "sync")[0] == 0
    (first,) = keys(tmp_path)
    code, out = run("--data-dir", str(tmp_path), "identity", "rotate", "-f", "json")
    assert code == 0, out
    rotation = json.loads(out)
    assert rotation["retired"] == first["kid"] and rotation["kid"] != first["kid"]
    assert rotation["removed"] == ""
    listed = {k["kid"]: k for k in keys(tmp_path)}
    # Published at once; signing once every process has seen it (2 x key_cache_seconds).
    assert listed[rotation["kid"]]["state"] == "next"
    assert listed[first["kid"]]["state"] == "signing"
    assert listed[first["kid"]]["published_until"] == rotation["retired_published_until"]
    # With no cache the new key signs at once.
    env = {"CLOUDSEED_IDENTITY__KEY_CACHE_SECONDS": "0"}
    code, out = run("--data-dir", str(tmp_path), "identity", "list", "-f", "json", env=env)
    states = {k["kid"]: k["state"] for k in json.loads(out)}
    assert states == {rotation["kid"]: "signing", first["kid"]: "published"}


def test_encrypted_keys_at_rest_with_the_secret(tmp_path: Path) -> None:
    env = {"CLOUDSEED_IDENTITY__KEY_ENCRYPTION_SECRET": "s3cret"}
    assert run("--data-dir", str(tmp_path), "db", "sync", env=env)[0] == 0
    with contextlib.closing(sqlite3.connect(tmp_path / "cloudseed_api.sqlite")) as db:
        (stored,) = db.execute("SELECT private_key FROM identity_keys").fetchone()
    assert stored.startswith("-----BEGIN ENCRYPTED PRIVATE KEY-----\n")


def test_a_grace_shorter_than_a_token_is_refused(tmp_path: Path) -> None:
    env = {"CLOUDSEED_IDENTITY__KEY_GRACE_SECONDS": "300"}
    code, out = run("--data-dir", str(tmp_path), "identity", "list", env=env)
    assert code != 0
    assert "[identity] key_grace_seconds: must be at least" in out
