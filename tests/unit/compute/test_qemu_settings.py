"""Where the qemu driver's metadata proxies forward to, and the checks on [qemu]."""

from __future__ import annotations

import pytest

from cloudseed.compute.qemu import _metadata_upstream
from cloudseed.errors import ConfigError
from cloudseed.settings import load_settings


def upstream(**env: str) -> tuple[str, int]:
    return _metadata_upstream(load_settings(environ=env))


def test_defaults_to_the_services_own_metadata_listener() -> None:
    assert upstream() == ("127.0.0.1", 8775)
    assert upstream(CLOUDSEED_METADATA_LISTEN="0.0.0.0", CLOUDSEED_METADATA_LISTEN_PORT="9000") == (
        "127.0.0.1",
        9000,
    )
    assert upstream(CLOUDSEED_METADATA_LISTEN="::") == ("::1", 8775)


def test_metadata_url_wins() -> None:
    assert upstream(CLOUDSEED_QEMU__METADATA_URL="http://10.1.2.3:8080") == ("10.1.2.3", 8080)


def test_a_port_picked_at_start_needs_the_url() -> None:
    with pytest.raises(ConfigError, match="metadata_url"):
        upstream(CLOUDSEED_METADATA_LISTEN_PORT="0")


@pytest.mark.parametrize(
    "url", ["10.0.0.1:80", "https://h:1", "http://h", "http://h:1/x", "http://h:port", "http://:80"]
)
def test_bad_metadata_urls_stop_start_up(url: str) -> None:
    with pytest.raises(ConfigError, match=r"\[qemu\] metadata_url"):
        load_settings(environ={"CLOUDSEED_QEMU__METADATA_URL": url})


def test_unknown_accelerator_is_refused() -> None:
    with pytest.raises(ConfigError, match="accel"):
        load_settings(environ={"CLOUDSEED_QEMU__ACCEL": "hvf"})


def test_ssh_forward_defaults_and_range() -> None:
    q = load_settings(environ={}).qemu
    assert q.ssh_forward_address == "127.0.0.1"
    assert q.ssh_forward_port_range == range(10022, 11000)
    one = load_settings(environ={"CLOUDSEED_QEMU__SSH_FORWARD_PORTS": "2222"}).qemu
    assert one.ssh_forward_port_range == range(2222, 2223)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"CLOUDSEED_QEMU__SSH_FORWARD_PORTS": "10999-10022"}, "ssh_forward_ports"),
        ({"CLOUDSEED_QEMU__SSH_FORWARD_PORTS": "0-10"}, "ssh_forward_ports"),
        ({"CLOUDSEED_QEMU__SSH_FORWARD_PORTS": "10022-70000"}, "ssh_forward_ports"),
        ({"CLOUDSEED_QEMU__SSH_FORWARD_PORTS": "ssh"}, "FIRST-LAST"),
        ({"CLOUDSEED_QEMU__SSH_FORWARD_ADDRESS": "localhost"}, "IPv4 address"),
        ({"CLOUDSEED_QEMU__SSH_FORWARD_ADDRESS": "::1"}, "IPv4 address"),
    ],
)
def test_bad_ssh_forward_settings_stop_start_up(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(environ=env)


@pytest.mark.parametrize("model", ["qemu64", "max", "Haswell-noTSX-IBRS", "max,-avx2,+sse4.2"])
def test_cpu_models_are_taken(model: str) -> None:
    assert load_settings(environ={"CLOUDSEED_QEMU__CPU_MODEL": model}).qemu.cpu_model == model


@pytest.mark.parametrize(
    "model", ["-cpu", "max -smp 64", "max,", "qemu 64", "max,-avx2,", "a,b=c,d=", "max;reboot"]
)
def test_a_cpu_model_that_is_not_one_stops_start_up(model: str) -> None:
    with pytest.raises(ConfigError, match=r"\[qemu\] cpu_model"):
        load_settings(environ={"CLOUDSEED_QEMU__CPU_MODEL": model})
