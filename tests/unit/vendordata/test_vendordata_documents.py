"""A target's answer nested deeper than the parser can follow is a bad answer, not a crash."""

from __future__ import annotations

import pytest

from cloudseed.vendordata import documents
from cloudseed.vendordata.errors import NotJSON


@pytest.mark.parametrize("opener", ["[", '{"a":'])
def test_deep_nesting_is_not_json(opener: str) -> None:
    closer = "]" if opener == "[" else "}"
    deep = opener * 100_000 + "1" + closer * 100_000
    with pytest.raises(NotJSON, match="nested too deeply"):
        documents.normalise(deep.encode())


def test_ordinary_nesting_still_parses() -> None:
    assert documents.normalise(b"[" * 50 + b"1" + b"]" * 50) == b"[" * 50 + b"1" + b"]" * 50
