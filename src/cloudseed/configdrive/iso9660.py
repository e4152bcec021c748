"""ISO 9660 config drives through pycdlib: Rock Ridge and Joliet, volume label ``config-2``.

Guests read the Rock Ridge names (Linux) or the Joliet names (Windows); the plain ISO 9660
names underneath are only for readers that know neither, so they are the paths mapped to
level-3 d-characters (``2012-08-10`` -> ``2012_08_10``), made unique per directory.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from typing import BinaryIO

from cloudseed.configdrive.contents import directories
from cloudseed.configdrive.errors import UnreadableDrive

LABEL = "config-2"
PUBLISHER = "cloudseed"
_NOT_D_CHARACTER = re.compile(r"[^A-Z0-9_]")


def write(tree: Mapping[str, bytes], out: BinaryIO, *, label: str = LABEL) -> None:
    """Write an ISO image of ``tree`` (path -> bytes) to ``out``, labelled ``label``."""
    import pycdlib  # imported on first use: the CLI and the API start without it

    iso = pycdlib.PyCdlib()
    iso.new(
        interchange_level=3,
        vol_ident=label,
        pub_ident_str=PUBLISHER,
        app_ident_str=PUBLISHER,
        joliet=3,
        rock_ridge="1.09",
    )
    names = _IsoNames()
    for directory in directories(tree):
        iso.add_directory(
            iso_path=names.directory(directory),
            rr_name=directory.rsplit("/", 1)[-1],
            joliet_path="/" + directory,
        )
    for path, content in tree.items():
        iso.add_fp(
            io.BytesIO(content),
            len(content),
            iso_path=names.file(path),
            rr_name=path.rsplit("/", 1)[-1],
            joliet_path="/" + path,
        )
    iso.write_fp(out)
    iso.close()


class _IsoNames:
    """Plain ISO 9660 names for paths: d-characters, at most 30 characters, unique."""

    def __init__(self) -> None:
        self._by_path: dict[str, str] = {"": ""}
        self._taken: dict[str, set[str]] = {}

    def directory(self, path: str) -> str:
        return self._name(path, is_file=False)

    def file(self, path: str) -> str:
        return self._name(path, is_file=True) + ";1"

    def _name(self, path: str, *, is_file: bool) -> str:
        parent, _, leaf = path.rpartition("/")
        parent_iso = self._by_path[parent]
        stem, dot, ext = (
            leaf.upper().rpartition(".") if is_file and "." in leaf else (leaf.upper(), "", "")
        )
        stem = _NOT_D_CHARACTER.sub("_", stem)[:24] or "_"
        ext = _NOT_D_CHARACTER.sub("_", ext)[:5]
        taken = self._taken.setdefault(parent_iso, set())
        candidate, n = stem, 0
        while (candidate + dot + ext) in taken:
            n += 1
            candidate = f"{stem[: 24 - len(str(n)) - 1]}_{n}"
        name = candidate + dot + ext
        taken.add(name)
        full = f"{parent_iso}/{name}"
        self._by_path[path] = full
        return full


def read(image: BinaryIO) -> dict[str, bytes]:
    """Every file of an ISO image by its Rock Ridge name (Joliet, then plain ISO names for
    images without Rock Ridge). Raises UnreadableDrive."""
    import pycdlib
    from pycdlib.pycdlibexception import PyCdlibException

    iso = pycdlib.PyCdlib()
    try:
        iso.open_fp(image)
    except (PyCdlibException, OSError, ValueError) as exc:
        raise UnreadableDrive(f"not an ISO 9660 image: {exc}") from None
    try:
        if iso.has_rock_ridge():
            key = "rr_path"
        elif iso.has_joliet():
            key = "joliet_path"
        else:
            key = "iso_path"
        tree: dict[str, bytes] = {}
        for root, _dirs, files in iso.walk(**{key: "/"}):
            for name in files:
                full = root.rstrip("/") + "/" + name
                buffer = io.BytesIO()
                iso.get_file_from_iso_fp(buffer, **{key: full})
                clean = full.lstrip("/")
                if key == "iso_path":
                    clean = clean.rsplit(";", 1)[0]
                tree[clean] = buffer.getvalue()
        return tree
    except PyCdlibException as exc:
        raise UnreadableDrive(f"broken ISO 9660 image: {exc}") from None
    finally:
        iso.close()


def label(image: BinaryIO) -> str:
    """The volume label (the primary volume descriptor's volume identifier)."""
    image.seek(16 * 2048 + 40)
    return image.read(32).decode("ascii", "replace").rstrip()
