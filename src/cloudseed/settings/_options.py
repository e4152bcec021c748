"""How an option is declared, and the value types and parsers the sections share.

``option()`` is the one way a section field is declared (default, help, checks), so the
registry (``_registry.all_options``) and docs/configuration.md can list every option; this
module imports nothing else of the package, so every section module can use it.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any


class Secret(str):
    """A setting's value that must not be shown: a password, a shared secret, a database URL
    with a password in it.

    It is the string itself everywhere it is used (hashing, headers, handing it to a library),
    but its ``repr`` is a mask, so a Settings object in a log line, a traceback's locals or a
    debugger shows ``Secret('**********')`` instead of the value. Messages about a setting name
    the setting, never interpolate its value.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return "Secret('**********')"


def option(
    default: Any,
    help: str,
    *,
    choices: tuple[str, ...] = (),
    minimum: int | None = None,
    maximum: int | None = None,
    secret: bool = False,
) -> Any:
    """Declare a setting: its default, its help text and the checks on its value."""
    return field(
        default=default,
        metadata={
            "help": help,
            "choices": choices,
            "minimum": minimum,
            "maximum": maximum,
            "secret": secret,
        },
    )


def parse_port_range(value: str) -> tuple[int, int]:
    """``FIRST-LAST`` (or one port) as two ints; ValueError unless 1 <= FIRST <= LAST <= 65535."""
    first, dash, last = value.strip().partition("-")
    try:
        bounds = int(first, 10), int(last if dash else first, 10)
    except ValueError:
        raise ValueError("must be FIRST-LAST, e.g. 10022-10999") from None
    if not 1 <= bounds[0] <= bounds[1] <= 65535:
        raise ValueError("must be FIRST-LAST with 1 <= FIRST <= LAST <= 65535")
    return bounds


def split_list(value: str) -> list[str]:
    """A comma-separated option value as a list, without empty entries."""
    return [item.strip() for item in value.split(",") if item.strip()]
