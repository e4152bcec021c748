"""Loading libguestfs' Python binding into our interpreter, and only that.

Debian ships it as ``python3-guestfs`` for the system Python, in
``/usr/lib/python3/dist-packages``. Putting that whole directory on ``sys.path`` would mix every
Debian Python package into our virtualenv; instead the two files of the binding (``guestfs.py``
and its C extension ``libguestfsmod``) are loaded by path, and only when the extension's ABI
tag is one this interpreter accepts (same CPython minor version). A binding already importable
the normal way wins.
"""

from __future__ import annotations

import functools
import importlib
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from cloudseed.injection.errors import BindingMissing

SYSTEM_DIRS = (Path("/usr/lib/python3/dist-packages"), Path("/usr/lib/python3/site-packages"))


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise BindingMissing(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


@functools.cache
def guestfs_module() -> ModuleType:
    """The ``guestfs`` module; raises ``BindingMissing`` saying what is missing."""
    try:
        return importlib.import_module("guestfs")
    except ImportError:
        pass
    for directory in SYSTEM_DIRS:
        wrapper = directory / "guestfs.py"
        if not wrapper.exists():
            continue
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            extension = directory / f"libguestfsmod{suffix}"
            if extension.exists():
                try:
                    _load("libguestfsmod", extension)
                    return _load("guestfs", wrapper)
                except ImportError as exc:
                    raise BindingMissing(
                        f"the libguestfs binding in {directory} does not load "
                        f"into Python {sys.version.split()[0]}: {exc}"
                    ) from None
        raise BindingMissing(
            f"the libguestfs binding in {directory} is not built for Python "
            f"{sys.version_info.major}.{sys.version_info.minor}"
        )
    raise BindingMissing("libguestfs' Python binding is not installed (python3-guestfs)")
