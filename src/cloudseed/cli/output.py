"""One output style for every command that lists or shows records, the openstack CLI's.

``-f table`` (the default) draws a table: one row per record for a list, a Field/Value table
for one record. ``-f json`` prints the records as JSON (a list, or one object) and ``-f value``
prints the bare values, space-separated, one record per line, for scripts (``IMAGE=$(cloudseed
image add ... -f value -c id)``). ``-c/--column`` (repeatable) keeps only the named columns, in
the order given.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click
from prettytable import PrettyTable

F = TypeVar("F", bound=Callable[..., Any])

FORMATS = ("table", "json", "value")

Record = dict[str, Any]


def output_options(command: F) -> F:
    """``-f/--format`` and ``-c/--column``, passed to the command as ``output``."""
    command = click.option(
        "-c",
        "--column",
        "columns",
        multiple=True,
        metavar="COLUMN",
        help="Show only this column (repeatable).",
    )(command)
    return click.option(
        "-f",
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default="table",
        show_default=True,
        help="Output format.",
    )(command)


def emit_list(
    records: Sequence[Record], *, fmt: str, columns: Sequence[str], default: Sequence[str]
) -> None:
    """Print ``records``: the ``default`` columns, in that order, unless ``-c`` names others
    (any field of the records). An empty list still shows its header."""
    available = list(default) + [k for k in (records[0] if records else {}) if k not in default]
    chosen = _chosen(columns, available) if columns else list(default)
    rows = [{name: record.get(name) for name in chosen} for record in records]
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2, default=str))
    elif fmt == "value":
        for row in rows:
            click.echo(" ".join(_text(value) for value in row.values()))
    else:
        table = PrettyTable(field_names=list(chosen))
        table.align = "l"
        for row in rows:
            table.add_row([_text(value) for value in row.values()])
        click.echo(table.get_string())


def emit_one(record: Record, *, fmt: str, columns: Sequence[str]) -> None:
    """Print one record: a Field/Value table, a JSON object, or its values one per line."""
    chosen = _chosen(columns, list(record)) if columns else list(record)
    shown = {name: record.get(name) for name in chosen}
    if fmt == "json":
        click.echo(json.dumps(shown, indent=2, default=str))
    elif fmt == "value":
        for value in shown.values():
            click.echo(_text(value))
    else:
        table = PrettyTable(field_names=["Field", "Value"])
        table.align = "l"
        for name, value in shown.items():
            table.add_row([name, _text(value)])
        click.echo(table.get_string())


def pick(records: Sequence[Record], wanted: str, *, kind: str) -> Record:
    """The one record whose id or name is ``wanted``: what ``show`` commands print, so a script
    can look up what an earlier run registered (``cs image show demo -f value -c id || cs image
    add ...``). None, or a name several records share, is an error naming the choices."""
    by_id = [r for r in records if r.get("id") == wanted]
    found = by_id or [r for r in records if r.get("name") == wanted]
    if not found:
        raise click.ClickException(f"no {kind} with the id or name {wanted!r}")
    if len(found) > 1:
        ids = ", ".join(str(r.get("id")) for r in found)
        raise click.ClickException(
            f"{len(found)} {kind}s are named {wanted!r} ({ids}): give the id"
        )
    return found[0]


def _chosen(columns: Sequence[str], available: Sequence[str]) -> list[str]:
    unknown = [name for name in columns if name not in available]
    if unknown:
        raise click.BadParameter(
            f"no column {', '.join(map(repr, unknown))}; columns: {', '.join(available)}",
            param_hint="-c/--column",
        )
    return list(columns)


def _text(value: Any) -> str:
    """A value as one line of text: "" for None, JSON for lists and mappings."""
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)
