"""The openssl command line, as a relying party runs it against cloudseed's signed identity
(docs/identity.md's commands)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def openssl(cwd: Path, *args: str) -> bytes:
    """``openssl ARGS`` in ``cwd``; its output, asserting it succeeded."""
    result = subprocess.run(
        ["openssl", *args], cwd=cwd, capture_output=True, check=False, timeout=30
    )
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout


def pkcs7_verified(directory: Path, name: str, body: str, command: str = "smime") -> bytes:
    """The content of a PKCS#7 form as the metadata service serves it (``body``: base64 with no
    armour), written to ``directory/name`` and verified by ``openssl COMMAND -verify`` against
    ``directory/certificates.pem``."""
    (directory / name).write_text(f"-----BEGIN PKCS7-----\n{body}\n-----END PKCS7-----\n")
    return openssl(
        directory,
        command,
        "-verify",
        "-in",
        name,
        "-inform",
        "PEM",
        "-certfile",
        "certificates.pem",
        "-CAfile",
        "certificates.pem",
        "-binary",
    )
