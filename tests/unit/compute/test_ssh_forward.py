"""The SSH forward's opt-in, port choice and forms (issue 20), without QEMU."""

from __future__ import annotations

import pytest

from cloudseed.compute.ssh_forward import METADATA_KEY, Forward, choose_port, wanted


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({METADATA_KEY: "true"}, True),
        ({METADATA_KEY: " True "}, True),
        ({METADATA_KEY: "yes"}, True),
        ({METADATA_KEY: "false"}, False),
        ({METADATA_KEY: ""}, False),
        ({"ssh_forward": "true"}, False),  # only the namespaced key
        ({}, False),
    ],
)
def test_opt_in_is_the_server_metadata_item(metadata: dict[str, str], expected: bool) -> None:
    assert wanted(metadata) is expected


def test_forms() -> None:
    forward = Forward("127.0.0.1", 10022)
    assert str(forward) == "127.0.0.1:10022"
    assert forward.hostfwd() == "tcp:127.0.0.1:10022-:22"


PORTS = range(10022, 10026)


def test_a_taken_port_is_skipped() -> None:
    taken = {10022, 10023}
    assert choose_port(PORTS, previous=None, reserved=(), is_free=lambda p: p not in taken) == 10024


def test_ports_other_guests_keep_are_skipped_even_when_free() -> None:
    assert choose_port(PORTS, previous=None, reserved={10022}, is_free=lambda p: True) == 10023


def test_the_previous_port_is_kept_while_free() -> None:
    assert choose_port(PORTS, previous=10025, reserved={10022}, is_free=lambda p: True) == 10025
    # Taken meanwhile: the first free one instead.
    assert choose_port(PORTS, previous=10025, reserved=(), is_free=lambda p: p != 10025) == 10022
    # Out of a range the operator changed since.
    assert choose_port(PORTS, previous=2222, reserved=(), is_free=lambda p: True) == 10022


def test_no_port_left() -> None:
    assert choose_port(PORTS, previous=None, reserved={10022}, is_free=lambda p: p == 10022) is None
