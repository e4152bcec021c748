"""Session tokens are parsed strictly: only the exact form issue() writes validates."""

from __future__ import annotations

import time

import pytest

from cloudseed.metadata.errors import TokenRequired
from cloudseed.metadata.tokens import Tokens

UUID = "7b0a3c1e-0000-4000-8000-000000000001"


def test_issued_token_validates() -> None:
    tokens = Tokens("key")
    token, ttl = tokens.issue(UUID, b"60")
    assert ttl == 60
    tokens.check(UUID, token.encode())


@pytest.mark.parametrize(
    "rewrite",
    [
        lambda v, e, m: f"{v}.0{e}.{m}",  # leading zero
        lambda v, e, m: f"{v}.+{e}.{m}",  # sign
        lambda v, e, m: f"{v}.{e[:4]}_{e[4:]}.{m}",  # underscore
        lambda v, e, m: f"{v}. {e}.{m}",  # space
        lambda v, e, m: f"{v}.{e} .{m}",
        lambda v, e, m: f"{v}.{e}.{m.upper()}",
        lambda v, e, m: f"{v}.{e}.{m} ",
        lambda v, e, m: f"{v}.{int(e) + 1}.{m}",
        lambda v, e, m: f"V1.{e}.{m}",
        lambda v, e, m: f"{v}.{e}.{m}.",
        lambda v, e, m: f"{v}.{'٣' * len(e)}.{m}",  # non-ASCII digits
    ],
    ids=[
        "leading-zero",
        "plus",
        "underscore",
        "space-before",
        "space-after",
        "upper-mac",
        "trailing-space",
        "later-expiry",
        "version-case",
        "extra-dot",
        "arabic-digits",
    ],
)
def test_rewritten_tokens_are_refused(rewrite) -> None:
    tokens = Tokens("key")
    token, _ = tokens.issue(UUID, b"60")
    version, expires, mac = token.split(".")
    with pytest.raises(TokenRequired):
        tokens.check(UUID, rewrite(version, expires, mac).encode())


def test_expired_and_foreign_tokens_are_refused() -> None:
    tokens = Tokens("key")
    token, _ = tokens.issue(UUID, b"60")
    with pytest.raises(TokenRequired):
        tokens.check(UUID.replace("1", "2"), token.encode())
    with pytest.raises(TokenRequired):
        Tokens("other key").check(UUID, token.encode())
    expired = f"v1.{int(time.time()) - 1}.{tokens._mac(UUID, int(time.time()) - 1)}"
    with pytest.raises(TokenRequired):
        tokens.check(UUID, expired.encode())
