"""NoCloud seed tokens (IO-free): one server's token for one seed, nothing else."""

from __future__ import annotations

import uuid as uuids

import pytest

from cloudseed.nocloud import seeds

SERVER = "6f2c1f55-2b1e-4a43-9b8e-3b3c8f0d9a10"
OTHER = "0a1b2c3d-0000-4000-8000-000000000000"
KEY = b"secret"


def test_a_token_names_its_server_and_checks_against_its_seed_only() -> None:
    seed = seeds.new_seed(1000.0, 60)
    assert seed.expires_at == 1060
    token = seeds.token(KEY, SERVER, seed)
    assert len(token) == seeds.TOKEN_LENGTH
    assert token == seeds.token(KEY, SERVER, seed)  # shown again without being stored
    presented = seeds.read_token(token)
    assert presented is not None and presented.server == SERVER
    assert seeds.valid(KEY, presented, seed, 1059.9)
    assert not seeds.valid(KEY, presented, seed, 1060)  # expired
    assert not seeds.valid(KEY, presented, None, 1000)  # revoked, or none
    assert not seeds.valid(b"other key", presented, seed, 1000)
    assert not seeds.valid(KEY, presented, seeds.new_seed(1000.0, 60), 1000)  # rotated
    # Another server's uuid with this MAC is no token of either.
    forged = seeds.Presented(OTHER, presented.mac)
    assert not seeds.valid(KEY, forged, seed, 1000)
    # The expiry is part of the MAC: moving it on makes another token.
    later = seeds.Seed(seed.nonce, 2000)
    assert not seeds.valid(KEY, presented, later, 1000)


def test_stored_form_round_trips_and_anything_else_is_no_seed() -> None:
    for seed in (seeds.Seed("ab" * 16, 1234), seeds.Seed("cd" * 16, None)):
        assert seeds.parse_stored(seed.stored()) == seed
    assert seeds.new_seed(5.0, 0).expires_at is None  # lifetime 0: never expires
    for value in (
        None,
        seeds.REVOKED,
        "",
        "1:xyz:5",
        "2:" + "a" * 32 + ":5",
        "1:" + "A" * 32 + ":-",
    ):
        assert seeds.parse_stored(value) is None


@pytest.mark.parametrize(
    "text",
    ["", "A" * 63, "A" * 65, "A" * 63 + "=", "A" * 63 + "/", "A" * 63 + ".", "é" * 64],
)
def test_read_token_refuses_what_is_not_a_token_shape(text: str) -> None:
    assert seeds.read_token(text) is None


def test_read_token_takes_any_64_token_characters() -> None:
    presented = seeds.read_token("A" * 64)
    assert presented is not None
    assert presented.server == str(uuids.UUID(int=0))
    assert len(presented.mac) == 32


def test_url_and_kernel_command_line() -> None:
    url = seeds.seed_url("http://169.254.169.254/nocloud/", "T" * 64)
    assert url == "http://169.254.169.254/nocloud/" + "T" * 64 + "/"
    assert seeds.kernel_cmdline(url) == f"ds=nocloud;s={url}"
