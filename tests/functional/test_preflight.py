"""``cloudseed serve`` refuses a configuration that cannot work before anything listens: one
line per problem, all at once, exit status 1, and the ports stay free."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from cloudseed.cli import cli
from cloudseed.cli.preflight import configuration_problems
from cloudseed.settings import load_settings
from tests.support.ports import free_port


def serve(tmp_path: Path, env: dict[str, str]) -> tuple[int, str, int]:
    """Run ``serve`` in this process; a configuration the checks miss would serve until the
    test times out, so every case here must stop by itself."""
    state = tmp_path / "state"
    assert CliRunner().invoke(cli, ["--data-dir", str(state), "db", "sync"]).exit_code == 0
    port = free_port()
    result = CliRunner().invoke(
        cli,
        ["--data-dir", str(state), "serve", "--api-listen", f"127.0.0.1:{port}",
         "--metadata-listen", "127.0.0.1:0"],
        env=env,
        catch_exceptions=False,
    )  # fmt: skip
    return result.exit_code, result.output, port


def test_qemu_without_the_metadata_proxy_stops_before_listening(tmp_path):
    code, out, port = serve(
        tmp_path,
        {"CLOUDSEED_COMPUTE_DRIVER": "qemu", "CLOUDSEED_QEMU__BINARY": "qemu-nonexistent"},
    )
    assert code == 1
    lines = [line for line in out.splitlines() if line.startswith("  - ")]
    assert len(lines) == 2, out
    assert "compute_driver = qemu needs [neutron] service_metadata_proxy = true" in lines[0]
    assert "[qemu] binary 'qemu-nonexistent' is not installed" in lines[1]
    assert "Traceback" not in out
    with socket.socket() as s:  # nothing ever listened there
        s.bind(("127.0.0.1", port))


def test_the_proxy_without_a_shared_secret_is_refused(tmp_path):
    code, out, _ = serve(tmp_path, {"CLOUDSEED_NEUTRON__SERVICE_METADATA_PROXY": "true"})
    assert code == 1
    assert "service_metadata_proxy = true needs [neutron] metadata_proxy_shared_secret" in out


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, []),
        (
            {
                "CLOUDSEED_NEUTRON__SERVICE_METADATA_PROXY": "true",
                "CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET": "s",
            },
            [],
        ),
        (
            {"CLOUDSEED_COMPUTE_DRIVER": "qemu", "CLOUDSEED_QEMU__ACCEL": "kvm",
             "CLOUDSEED_QEMU__BINARY": "/bin/true",
             "CLOUDSEED_NEUTRON__SERVICE_METADATA_PROXY": "true",
             "CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET": "s"},
            ["[qemu] accel = kvm but /dev/kvm cannot be opened"],
        ),
        (
            {"CLOUDSEED_COMPUTE_DRIVER": "qemu", "CLOUDSEED_QEMU__BINARY": "/bin/true",
             "CLOUDSEED_NEUTRON__SERVICE_METADATA_PROXY": "true",
             "CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET": "s",
             "CLOUDSEED_OSAPI_COMPUTE_LISTEN_PORT": "0"},
            ["the compute agent needs [glance] api_servers"],
        ),
        (
            {"CLOUDSEED_GLANCE__API_SERVERS": "http://api:8774/image",
             "CLOUDSEED_API__AUTH_STRATEGY": "keystone"},
            ["a compute agent under [api] auth_strategy = keystone downloads images"],
        ),
    ],
)  # fmt: skip
def test_configuration_problems(tmp_path, environ, expected):
    import os

    settings = load_settings(environ={"CLOUDSEED_STATE_PATH": str(tmp_path), **environ})
    problems = configuration_problems(settings)
    kvm_usable = os.access("/dev/kvm", os.R_OK | os.W_OK)
    if expected and "kvm" in expected[0] and kvm_usable:
        expected = []  # this machine can open /dev/kvm: nothing to report
    assert [p for p in problems if not any(p.startswith(e) for e in expected)] == []
    assert len(problems) == len(expected), problems


def test_a_state_path_that_is_a_file_is_reported(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    settings = load_settings(environ={"CLOUDSEED_STATE_PATH": str(blocker / "state")})
    assert configuration_problems(settings) == [
        f"[DEFAULT] state_path '{blocker / 'state'}' is not a writable directory"
    ]


SAMPLE = Path(__file__).resolve().parents[2] / "docs" / "qemu-driver.conf.sample"


def test_the_qemu_sample_configuration_loads_and_passes_preflight(tmp_path, monkeypatch):
    """docs/qemu-driver.conf.sample cannot rot: every option in it is known, it names every
    [qemu] option, and serve's preflight checks accept it (on a migrated data directory) once
    the operator has given the proxies' secret, as the README does; without it they refuse."""
    import shutil

    import click

    from cloudseed.cli.context import CliContext
    from cloudseed.cli.preflight import preflight
    from cloudseed.settings import all_options

    settings = load_settings(config_file=SAMPLE, environ={})
    assert settings.warnings == ()
    assert settings.default.compute_driver == "qemu"
    assert settings.neutron.service_metadata_proxy
    # No secret anyone could copy from the repository.
    assert not settings.neutron.metadata_proxy_shared_secret
    text = SAMPLE.read_text()
    missing = [o.name for o in all_options() if o.section == "qemu" and f"\n{o.name} =" not in text]
    assert missing == []
    if shutil.which(settings.qemu.binary) is None:
        pytest.skip(f"{settings.qemu.binary} is not installed (preflight would say so)")
    state = tmp_path / "state"
    synced = CliRunner().invoke(
        cli, ["--config", str(SAMPLE), "--data-dir", str(state), "db", "sync"]
    )
    assert synced.exit_code == 0, synced.output
    context = CliContext(config_file=str(SAMPLE), data_dir=str(state))
    with pytest.raises(click.ClickException, match="metadata_proxy_shared_secret"):
        preflight(context, context.settings())
    monkeypatch.setenv("CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET", "s3cret")
    context = CliContext(config_file=str(SAMPLE), data_dir=str(state))
    preflight(context, context.settings())  # raises ClickException with the problems
