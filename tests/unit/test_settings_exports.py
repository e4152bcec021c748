"""cloudseed.settings is a package of private modules; every public name they define is
importable from the package itself, as it was when settings was one module (ruff keeps
``__all__`` sorted)."""

import ast
from pathlib import Path

import cloudseed.settings as settings


def _public_names_defined_in(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return {name for name in names if not name.startswith("_")}


def test_every_public_name_is_exported_from_the_package():
    package_dir = Path(settings.__file__).parent
    defined = set()
    for path in package_dir.glob("_*.py"):
        if path.name != "__init__.py":
            defined |= _public_names_defined_in(path)
    assert len(settings.__all__) == len(set(settings.__all__))
    assert set(settings.__all__) == defined
    for name in settings.__all__:
        assert hasattr(settings, name), name
