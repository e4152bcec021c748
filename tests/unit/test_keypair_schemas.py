"""Key pair name rules per microversion, checked against an independent statement of Nova's
rules over random names."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudseed.keypairs import schemas
from cloudseed.web.errors import ValidationFailed
from cloudseed.web.validation import validate

RULES = {
    "2.1": (schemas.CREATE_V21, re.compile(r"[_\- a-zA-Z0-9]+")),
    "2.92": (schemas.CREATE_V292, re.compile(r"[_\-@. a-zA-Z0-9]+")),
}


def nova_accepts(name: str, allowed: re.Pattern[str]) -> bool:
    printable = all(
        not unicodedata.category(c).startswith("C")
        and (not unicodedata.category(c).startswith("Z") or unicodedata.category(c) == "Zs")
        for c in name
    )
    return (
        1 <= len(name) <= 255
        and printable
        and not name[0].isspace()
        and not name[-1].isspace()
        and allowed.fullmatch(name) is not None
    )


names = st.one_of(
    st.text(alphabet="ab_- .@/Z09", min_size=0, max_size=12),
    st.text(min_size=0, max_size=8),
    st.text(alphabet="x", min_size=250, max_size=260),
)


@pytest.mark.parametrize("version", sorted(RULES))
@settings(max_examples=300, deadline=None)
@given(name=names)
def test_name_rule(version, name):
    schema, allowed = RULES[version]
    body = {"keypair": {"name": name, "public_key": "k"}}
    if nova_accepts(name, allowed):
        validate(schema, body)
    else:
        with pytest.raises(ValidationFailed):
            validate(schema, body)


@settings(max_examples=100, deadline=None)
@given(
    extra=st.text(min_size=1, max_size=10).filter(
        lambda k: k not in ("name", "public_key", "type", "user_id")
    )
)
def test_unknown_body_fields_always_rejected(extra):
    with pytest.raises(ValidationFailed, match="Additional properties are not allowed"):
        validate(schemas.CREATE_V292, {"keypair": {"name": "k", "public_key": "p", extra: 1}})
