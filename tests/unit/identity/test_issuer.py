"""cloudseed.identity.issuer: the one issuer the tokens and the discovery document name."""

from __future__ import annotations

import socket

import pytest

from cloudseed.identity.issuer import issuer_of
from cloudseed.settings import load_settings


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"CLOUDSEED_IDENTITY__ISSUER": "https://id.example/"}, "https://id.example"),
        (
            {
                "CLOUDSEED_IDENTITY__ISSUER": "https://id.example",
                "CLOUDSEED_API__COMPUTE_LINK_PREFIX": "https://api.example",
            },
            "https://id.example",
        ),
        (
            {"CLOUDSEED_API__COMPUTE_LINK_PREFIX": "https://api.example/compute/"},
            ("https://api.example/compute"),
        ),
        ({}, "http://127.0.0.1:8774"),
        (
            {"CLOUDSEED_OSAPI_COMPUTE_LISTEN": "::1", "CLOUDSEED_OSAPI_COMPUTE_LISTEN_PORT": "9"},
            "http://[::1]:9",
        ),
        ({"CLOUDSEED_OSAPI_COMPUTE_LISTEN": "0.0.0.0"}, f"http://{socket.getfqdn()}:8774"),
    ],
)
def test_issuer(environ: dict[str, str], expected: str) -> None:
    assert issuer_of(load_settings(environ=environ)) == expected
