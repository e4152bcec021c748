"""Regenerate the options tables in docs/configuration.md from the settings registry.

Run ``python tools/options_table.py`` (or ``make docs``) after adding or changing an option;
tests/unit/test_settings.py fails while the page differs from what this writes.
"""

from __future__ import annotations

import re
from pathlib import Path

from cloudseed.nova_metadata.options import our_defaults, our_options
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


NOVA_HEADING = "## Options of `cloudseed nova-metadata`"


def nova_table() -> str:
    """The drop-in's own options (nova_metadata/config.py), which live in nova.conf."""
    defaults = our_defaults()
    out = [
        NOVA_HEADING,
        "",
        "`cloudseed nova-metadata` (docs/nova-dropin.md) reads Nova's options from nova.conf as "
        "Nova reads them, and these of its own from the same files' `[cloudseed_metadata]` "
        "section (no environment variables).",
        "",
        "| option | default | meaning |",
        "|---|---|---|",
    ]
    for name, meaning in our_options():
        default = defaults[name]
        if isinstance(default, list):
            shown = f"`{','.join(str(d) for d in default)}`" if default else "(empty)"
        else:
            shown = _default(default)
        out.append(f"| `{name}` | {shown} | {meaning} |")
    return "\n".join(out) + "\n"


def regenerated(text: str) -> str:
    """``text`` (the page) with its options sections as the registries make them (the
    drop-in's placed after cloudseed's the first time)."""
    text = re.sub(r"## Options\n.*?(?=\n## |\Z)", lambda _: tables(), text, count=1, flags=re.S)
    pattern = re.escape(NOVA_HEADING) + r"\n.*?(?=\n## |\Z)"
    if re.search(pattern, text, flags=re.S):
        return re.sub(pattern, lambda _: nova_table(), text, count=1, flags=re.S)
    return re.sub(
        r"(## Options\n.*?)(?=\n## |\Z)",
        lambda m: m[1] + "\n" + nova_table(),
        text,
        count=1,
        flags=re.S,
    )


def main() -> None:
    PAGE.write_text(regenerated(PAGE.read_text()))


if __name__ == "__main__":
    main()
