"""The admin password as a SHA-512 crypt hash (``$6$``), made by ``openssl passwd -6``.

Why openssl: Python 3.11's ``crypt`` module is deprecated (removed in 3.13), and passlib, the
usual replacement, has had no release since 2020 and imports ``crypt`` itself. OpenSSL is
maintained, already on every Debian host, and draws a random 16-character salt. The password
goes in on standard input, never on the command line where ``ps`` would show it.
"""

from __future__ import annotations

import re

from cloudseed.injection.errors import ImageToolFailed, InvalidInjectionRequest
from cloudseed.programs import run as program

SHA512_CRYPT = re.compile(r"^\$6\$[./0-9A-Za-z]{1,16}\$[./0-9A-Za-z]{86}$")


def sha512_crypt(password: str, *, salt: str | None = None) -> str:
    """``$6$<salt>$<hash>``; ``salt`` only for checking a known hash."""
    if "\n" in password or "\r" in password:
        raise InvalidInjectionRequest("The admin password may not contain a line break.")
    argv = ["openssl", "passwd", "-6", "-stdin"]
    if salt is not None:
        argv[3:3] = ["-salt", salt]
    result = program.run(argv, input=password.encode() + b"\n", timeout=30)
    hashed = result.stdout.decode("ascii", "replace").strip()
    if not SHA512_CRYPT.match(hashed):
        raise ImageToolFailed(tool="openssl", detail="passwd -6 did not print a SHA-512 hash")
    return hashed
