"""The suite's own shape: test modules are leaves. What several of them share lives in
tests/support/ (libraries) or a layer's conftest.py (fixtures), so a test module never imports
another test module or a conftest.py (pytest finds conftest fixtures by itself)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]


def imported_modules(path: Path, root: Path = CHECKOUT) -> list[str]:
    """Every module the file at ``path`` (under ``root``) imports, as absolute names; a name
    imported from a package counts too, as it may be a module (``from tests.x import test_y``)."""
    package = ".".join(path.relative_to(root).parent.parts)
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.append(base)
            found += [f"{base}.{alias.name}" for alias in node.names]
    return found


def is_test_module_or_conftest(module: str) -> bool:
    last = module.rsplit(".", 1)[-1]
    return module.startswith("tests.") and (last.startswith("test_") or last == "conftest")


def test_no_test_module_imports_another_or_a_conftest() -> None:
    offenders = [
        f"{path.relative_to(CHECKOUT)} imports {module}"
        for path in sorted((CHECKOUT / "tests").rglob("*.py"))
        if path.name.startswith("test_") or path.name == "conftest.py"
        for module in imported_modules(path)
        if is_test_module_or_conftest(module)
    ]
    assert offenders == [], "\n".join(offenders)


# Written with {pkg} so that a grep of the suite for imports between test modules finds none here.
@pytest.mark.parametrize(
    ("source", "offends"),
    [
        ("from {pkg}.test_metadata_service import boot", True),
        ("import {pkg}.test_metadata_service", True),
        ("from {pkg} import test_metadata_service", True),
        ("from .test_metadata_service import boot", True),
        ("from tests.compat.conftest import Cli", True),
        ("from tests.support.guests import boot", False),
        ("from tests.e2e.harness import E2ECloud", False),
        ("from cloudseed.settings import Settings", False),
    ],
)
def test_the_check_sees_each_way_of_importing(tmp_path: Path, source: str, offends: bool) -> None:
    path = tmp_path / "tests" / "functional" / "test_example.py"
    path.parent.mkdir(parents=True)
    path.write_text(source.format(pkg="tests.functional") + "\n")
    found = imported_modules(path, root=tmp_path)
    assert any(is_test_module_or_conftest(m) for m in found) == offends, found
