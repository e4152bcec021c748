"""The contents of the guest files injection edits, as text in and text out. No IO.

Nova's layout is kept where a guest or an operator could notice it: the marker comment before an
injected key, root's shadow line with only the hash field replaced, the rc.local relabel line.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable

KEY_MARKER = "# The following ssh key was injected by cloudseed"
RELABEL_COMMENT = "# Added by cloudseed: restore SELinux labels of the files it injected"


def account_id(table: str, name: str) -> int | None:
    """The numeric id (field 3) of ``name`` in /etc/passwd or /etc/group text."""
    for line in table.splitlines():
        fields = line.split(":")
        if len(fields) >= 3 and fields[0] == name and fields[2].isdigit():
            return int(fields[2])
    return None


def has_account(table: str, name: str) -> bool:
    return any(line.split(":", 1)[0] == name for line in table.splitlines() if ":" in line)


def with_root_password(shadow: str, password_hash: str) -> str:
    """/etc/shadow with root's hash replaced; every other field and line stays as it was."""
    lines = shadow.split("\n")
    for index, line in enumerate(lines):
        fields = line.split(":")
        if fields[0] == "root" and len(fields) >= 2:
            fields[1] = password_hash
            lines[index] = ":".join(fields)
            return "\n".join(lines)
    raise LookupError("root")


def with_key_appended(authorized_keys: str, key: str) -> str:
    """authorized_keys with the key appended after the marker, unless it is already there."""
    key = key.strip()
    if key in (line.strip() for line in authorized_keys.splitlines()):
        return authorized_keys
    return f"{authorized_keys}\n{KEY_MARKER}\n{key}\n"


def with_relabel_hook(rc_local: str | None, paths: Iterable[str]) -> str:
    """rc.local that runs restorecon on the paths at boot; a new file gets a shebang.

    The lines go before a final ``exit 0`` (Debian's and Ubuntu's rc.local end with one), where
    Nova appends after it and they never run.
    """
    quoted = " ".join(shlex.quote(p) for p in sorted(set(paths)))
    hook = f"{RELABEL_COMMENT}\nrestorecon -RF {quoted} 2>/dev/null || :\n"
    if rc_local is None:
        return f"#!/bin/sh\n{hook}"
    lines = rc_local.splitlines(keepends=True)
    while lines and not lines[-1].strip():
        lines.pop()
    if lines and lines[-1].strip() == "exit 0":
        return "".join(lines[:-1]) + hook + lines[-1]
    text = rc_local if not rc_local or rc_local.endswith("\n") else rc_local + "\n"
    return text + hook
