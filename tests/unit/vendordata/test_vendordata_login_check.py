"""The login-time key check's cloud-init parts: the documented file is the served part, the
command is Python that guests can run, the installer writes exactly the same files, and the
parts join the operator's own vendordata where cloud-init reads it."""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from cloudseed.settings import Settings
from cloudseed.vendordata import Vendordata, login_check
from tests.support.vendordata import REQUEST, settings_from

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "keys" / "login-check.cloud-config"


def test_the_documented_part_is_the_served_part() -> None:
    # Regenerate with: python -c 'from cloudseed.vendordata import login_check as l;
    # open("docs/keys/login-check.cloud-config", "w").write(l.cloud_config())'
    assert DOC.read_text(encoding="utf-8") == login_check.cloud_config()
    assert login_check.parts() == [login_check.cloud_config(), login_check.installer()]


def test_the_part_as_cloud_config() -> None:
    text = login_check.cloud_config()
    assert text.startswith("#cloud-config\n")
    config = yaml.safe_load(text)
    assert config["allow_public_ssh_keys"] is False
    assert config["merge_how"] == "dict(recurse_array,no_replace)+list(append)"
    command, drop_in = config["write_files"]
    assert command == {
        "path": "/usr/local/sbin/cloudseed-authorized-keys",
        "owner": "root:root",
        "permissions": "0755",
        "content": login_check.command_source(),
    }
    assert drop_in["path"] == "/etc/ssh/sshd_config.d/60-cloudseed-authorized-keys.conf"
    assert drop_in["permissions"] == "0644"
    directives = [line for line in drop_in["content"].splitlines() if not line.startswith("#")]
    assert directives == [
        "AuthorizedKeysCommand /usr/local/sbin/cloudseed-authorized-keys %u",
        "AuthorizedKeysCommandUser nobody",
    ]
    (reload,) = config["runcmd"]
    assert reload[:2] == ["sh", "-c"] and "try-reload-or-restart ssh.service" in reload[2]


def test_the_command_is_python_any_guest_runs() -> None:
    source = login_check.command_source()
    assert source.startswith("#!/usr/bin/python3 -I\n")
    compile(source, "cloudseed-authorized-keys", "exec")
    # Debian 10 and Ubuntu 18.04 guests have Python 3.6/3.7: nothing newer in the syntax.
    ast.parse(source, feature_version=(3, 6))
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").partition(".")[0])
    assert imported <= {"os", "sys", "urllib"}  # the standard library only


def test_the_installer_writes_the_same_files(tmp_path: Path) -> None:
    script = login_check.installer()
    subprocess.run(["sh", "-n"], input=script, text=True, check=True)
    # The same script with its absolute paths moved under tmp_path, and a systemctl that
    # records how it was called.
    root = tmp_path / "root"
    moved = "".join(
        line if inside else line.replace(" /", f" {root}/")
        for line, inside in _heredoc_lines(script)
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "systemctl.calls"
    systemctl = bin_dir / "systemctl"
    systemctl.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    systemctl.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    subprocess.run(["sh", "-c", moved], env=env, check=True)
    command = root / "usr/local/sbin/cloudseed-authorized-keys"
    assert command.read_text() == login_check.command_source()
    assert command.stat().st_mode & 0o777 == 0o755
    drop_in = root / "etc/ssh/sshd_config.d/60-cloudseed-authorized-keys.conf"
    assert drop_in.read_text() == login_check.DROP_IN
    assert drop_in.stat().st_mode & 0o777 == 0o644
    assert calls.read_text() == "try-reload-or-restart ssh.service\n"
    assert not list(command.parent.glob("*.new"))
    subprocess.run(["sh", "-c", moved], env=env, check=True)  # again: the same files
    assert command.read_text() == login_check.command_source()


def _heredoc_lines(script: str) -> list[tuple[str, bool]]:
    """The script's lines, each with whether it is inside a here-document."""
    lines, inside = [], False
    for line in script.splitlines(keepends=True):
        if inside and line == "CLOUDSEED_EOF\n":
            inside = False
            lines.append((line, True))
            continue
        lines.append((line, inside))
        inside = inside or line.rstrip().endswith("<<'CLOUDSEED_EOF'")
    return lines


PARTS = login_check.parts()


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({}, {"cloud-init": PARTS}),
        ({"other": 1}, {"other": 1, "cloud-init": PARTS}),
        ({"cloud-init": "#!/bin/sh\necho op\n"}, {"cloud-init": ["#!/bin/sh\necho op\n", *PARTS]}),
        ({"cloud-init": ["#cloud-config\n{}\n"]}, {"cloud-init": ["#cloud-config\n{}\n", *PARTS]}),
        ({"cloud-init": None}, {"cloud-init": PARTS}),
        ({"cloud-init": ""}, {"cloud-init": PARTS}),
        # What cloud-init refuses (convert_vendordata: a dict, a number) is left alone.
        ({"cloud-init": {"a": 1}}, {"cloud-init": {"a": 1}}),
        ({"cloud-init": 5}, {"cloud-init": 5}),
        # A document that is itself the parts (cloud-init reads a string or list whole).
        ("#cloud-config\n{}\n", ["#cloud-config\n{}\n", *PARTS]),
        (["a"], ["a", *PARTS]),
        (None, PARTS),
        (False, PARTS),
        (7, 7),
    ],
)
def test_with_parts(document: Any, expected: Any) -> None:
    assert login_check.with_parts(document) == expected


def vendordata(settings: Settings, *, check: bool) -> Vendordata:
    return Vendordata(settings, login_check=check)


@pytest.mark.anyio
async def test_the_parts_go_to_vendor_data_json(tmp_path: Path) -> None:
    static = tmp_path / "vendor.json"
    static.write_text(json.dumps({"cloud-init": "#cloud-config\nbootcmd: [echo op]\n", "x": 1}))
    settings = settings_from(tmp_path, {"vendordata_jsonfile_path": str(static)})
    plain, checked = vendordata(settings, check=False), vendordata(settings, check=True)
    try:
        assert json.loads(plain.vendor_data_json or b"") == json.loads(static.read_text())
        served = json.loads(checked.vendor_data_json or b"")
        assert served == {"cloud-init": ["#cloud-config\nbootcmd: [echo op]\n", *PARTS], "x": 1}
        assert checked.vendor_data_json is checked.vendor_data_json  # merged once
        # Once is enough: cloud-init 22.4 applies vendor_data2.json too.
        assert await checked.vendor_data2(REQUEST) == await plain.vendor_data2(REQUEST)
        assert json.loads(await checked.vendor_data2(REQUEST))["static"] == json.loads(
            static.read_text()
        )
    finally:
        await plain.aclose()
        await checked.aclose()


@pytest.mark.anyio
async def test_without_vendor_data_json_vendor_data2_carries_them(tmp_path: Path) -> None:
    settings = settings_from(tmp_path, {"vendordata_providers": ""})
    checked = vendordata(settings, check=True)
    try:
        assert checked.vendor_data_json is None
        assert json.loads(await checked.vendor_data2(REQUEST)) == {"cloud-init": PARTS}
    finally:
        await checked.aclose()
    plain = vendordata(settings, check=False)
    try:
        assert await plain.vendor_data2(REQUEST) == b"{}"
    finally:
        await plain.aclose()
