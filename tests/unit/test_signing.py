"""The metadata proxy's signature check, and its memory of signatures found valid."""

from __future__ import annotations

import pytest

from cloudseed import signing
from cloudseed.signing import Verifier, sign


def test_valid_signatures_pass_and_others_do_not() -> None:
    verifier = Verifier("secret")
    good = sign("secret", "instance-1")
    assert verifier.valid("instance-1", good)
    assert verifier.valid("instance-1", good)  # again, remembered
    assert not verifier.valid("instance-2", good)  # a remembered signature, another value
    assert not verifier.valid("instance-1", sign("other", "instance-1"))
    assert not verifier.valid("instance-1", None)
    assert not verifier.valid("instance-1", "é" * 64)
    assert not Verifier("other").valid("instance-1", good)


def test_only_valid_signatures_are_remembered_and_the_memory_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    verifier = Verifier("secret")
    for i in range(10):
        verifier.valid(f"instance-{i}", "0" * 64)
    assert verifier._valid == {}
    monkeypatch.setattr(signing, "_REMEMBERED_MAX", 3)
    for i in range(7):
        assert verifier.valid(f"instance-{i}", sign("secret", f"instance-{i}"))
        assert len(verifier._valid) <= 3
