"""Regenerate the options tables in docs/configuration.md from the settings registry.

Run ``python tools/options_table.py`` (or ``make docs``) after adding or changing an option;
tests/unit/test_settings.py fails while the page differs from what this writes.
"""

from __future__ import annotations

import re
from pathlib import Path

from cloudseed.settings import all_options

PAGE = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"


# What a section's table does not say: written above it, so regenerating keeps it.
SECTION_NOTES = {"metrics": "The Prometheus endpoint (docs/metrics.md)."}


def _default(value: object) -> str:
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    return f"`{value}`" if value != "" else "(empty)"


def tables() -> str:
    out: list[str] = ["## Options", ""]
    section = None
    for opt in all_options():
        if opt.section != section:
            if section is not None:
                out.append("")
            section = opt.section
            out += [f"### `[{section}]`", ""]
            if section in SECTION_NOTES:
                out += [SECTION_NOTES[section], ""]
            out += [
                "| option | environment | default | meaning |",
                "|---|---|---|---|",
            ]
        meaning = opt.help + (f" One of {', '.join(opt.choices)}." if opt.choices else "")
        default = "(secret)" if opt.secret and opt.default else _default(opt.default)
        out.append(f"| `{opt.name}` | `{opt.env_var}` | {default} | {meaning} |")
    return "\n".join(out) + "\n"


def regenerated(text: str) -> str:
    """``text`` (the page) with its options section as the registry makes it."""
    return re.sub(r"## Options\n.*?(?=\n## |\Z)", lambda _: tables(), text, count=1, flags=re.S)


def main() -> None:
    PAGE.write_text(regenerated(PAGE.read_text()))


if __name__ == "__main__":
    main()
