"""Debian 13 (trixie)'s cloud-init (25.x), unpacked under ``<repo>/.cache`` (git-ignored): a
newer cloud-init than the host's (Debian 12's 22.4: tests/support/cloudinit_run.py), whose
NoCloudNet reads ``network-config`` from a seed URL too (23.1 and later).

The package comes from deb.debian.org: trixie's ``main/binary-all/Packages.xz`` names the
``.deb`` and its SHA256, the ``.deb`` is downloaded, checked against it and unpacked with
``dpkg-deb -x`` (no install: the host's python3 runs the tree with it first on ``sys.path``,
and bookworm's python3-yaml, -jinja2, -requests, -jsonschema, -configobj and -jsonpatch, which
22.4 depends on, are what 25.x imports too). Once unpacked it is reused without the network;
delete ``.cache/cloud-init-trixie`` to take a newer trixie point release.

An archive that cannot be reached raises ``TrixieUnavailable`` (callers skip, or fail under
``CLOUDSEED_REQUIRE_DBS=1``); a ``.deb`` that does not match the index is a ``RuntimeError``.
"""

from __future__ import annotations

import hashlib
import lzma
import shutil
import subprocess
import tempfile
from pathlib import Path

import httpx

from tests.support import tool_venv

ARCHIVE = "http://deb.debian.org/debian/"
INDEX = ARCHIVE + "dists/trixie/main/binary-all/Packages.xz"
PACKAGE = "cloud-init"
CACHE = tool_venv.CACHE_DIR / "cloud-init-trixie"
# Written last into an unpacked tree: the package version it holds. A tree without it is
# half-unpacked (an interrupted run) and unpacked again.
MARKER = "cloudseed-version.txt"
TIMEOUT = 60.0  # seconds for one HTTP request: the index is about 4.5 MB, the .deb 0.7 MB


class TrixieUnavailable(tool_venv.Unavailable):
    """Trixie's cloud-init could not be had: deb.debian.org is unreachable (or no dpkg-deb)."""


def package_stanza(index: str, name: str) -> dict[str, str]:
    """The fields of ``name``'s entry in a Debian ``Packages`` index (a suite's index lists
    one version of each package)."""
    for stanza in index.split("\n\n"):
        fields = {}
        for line in stanza.splitlines():
            if line and not line[0].isspace() and ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if fields.get("Package") == name:
            return fields
    raise RuntimeError(f"{INDEX} names no package {name!r}")


def _get(client: httpx.Client, url: str) -> bytes:
    try:
        response = client.get(url)
    except httpx.TransportError as exc:
        raise TrixieUnavailable(f"{url} cannot be reached: {exc!r}") from exc
    if response.status_code != 200:
        raise TrixieUnavailable(f"{url} answered {response.status_code}")
    return response.content


def _download() -> tuple[str, Path]:
    """The package's version and its ``.deb`` in the cache, checked against the index."""
    with httpx.Client(timeout=TIMEOUT, follow_redirects=True) as client:
        index = lzma.decompress(_get(client, INDEX)).decode()
        fields = package_stanza(index, PACKAGE)
        deb = CACHE / Path(fields["Filename"]).name
        if not deb.is_file() or hashlib.sha256(deb.read_bytes()).hexdigest() != fields["SHA256"]:
            content = _get(client, ARCHIVE + fields["Filename"])
            digest = hashlib.sha256(content).hexdigest()
            if digest != fields["SHA256"]:
                raise RuntimeError(
                    f"{fields['Filename']} has SHA256 {digest}, the index says {fields['SHA256']}"
                )
            deb.write_bytes(content)
    return fields["Version"], deb


def _unpacked(tree: Path) -> bool:
    return (tree / MARKER).is_file() and (tree / "usr/lib/python3/dist-packages/cloudinit").is_dir()


def cloud_init_path() -> Path:
    """The directory holding trixie's ``cloudinit`` package: put it first on ``sys.path``."""
    tree = CACHE / "tree"
    if not _unpacked(tree):
        with tool_venv.locked(CACHE.name):
            if not _unpacked(tree):
                if shutil.which("dpkg-deb") is None:
                    raise TrixieUnavailable("dpkg-deb is not installed (it comes with dpkg)")
                CACHE.mkdir(parents=True, exist_ok=True)
                version, deb = _download()
                shutil.rmtree(tree, ignore_errors=True)
                scratch = Path(tempfile.mkdtemp(prefix="unpacking-", dir=CACHE))
                try:
                    subprocess.run(
                        ["dpkg-deb", "-x", str(deb), str(scratch)],
                        check=True,
                        capture_output=True,
                        timeout=120,
                    )
                    (scratch / MARKER).write_text(version + "\n")
                    scratch.rename(tree)
                except BaseException:
                    shutil.rmtree(scratch, ignore_errors=True)
                    raise
    return tree / "usr/lib/python3/dist-packages"
