"""docs/architecture.md against the code: the generated module map is current (the same
pattern as docs/configuration.md's options), every module says what it is, and every name
the "Where is X" table points at exists."""

from __future__ import annotations

import importlib
import re
from types import ModuleType

from tools import architecture

WHERE_IS_X = re.compile(r"<!-- BEGIN where is X.*?-->\n(.*?)<!-- END where is X -->", re.S)


def test_the_module_map_is_current() -> None:
    page = architecture.PAGE.read_text()
    assert architecture.page_with_section(page) == page, (
        "docs/architecture.md's module map is behind the code: run `make docs`"
    )


def test_every_module_has_a_docstring() -> None:
    missing = [
        str(path)
        for path in architecture.modules()
        if architecture.first_sentence(architecture.PACKAGE / path) == architecture.NO_DOCSTRING
    ]
    assert missing == []


def test_every_package_sits_in_a_layer() -> None:
    """A top-level package or module the layers contract does not name escapes the layering
    import-linter enforces."""
    placed = {name for layer in architecture.layers() for name in layer}
    tops = {path.parts[0].removesuffix(".py") for path in architecture.modules()}
    assert tops - placed - {"__init__"} == set()


def where_is_x_names() -> list[str]:
    found = WHERE_IS_X.search(architecture.PAGE.read_text())
    assert found is not None, "docs/architecture.md has lost its Where is X table"
    lines = found.group(1).splitlines()
    assert lines[1] == "|---|---|", "the table's head is its first two lines"
    rows = lines[2:]
    assert len(rows) >= 10
    names: list[str] = []
    for row in rows:
        cited = re.findall(r"`([^`]+)`", row.split(" | ", 1)[1])
        assert cited, row
        names += cited
    return names


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` is a module of cloudseed, or a name in one (``a.b.Class.method``)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        assert isinstance(found, ModuleType)
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def test_every_name_in_where_is_x_exists() -> None:
    names = where_is_x_names()
    assert [n for n in names if not n.startswith("cloudseed.")] == [], (
        "name everything in full (cloudseed.package.module.name), so that this test checks it"
    )
    assert [n for n in names if not resolves(n)] == []
