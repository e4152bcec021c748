"""e2fsprogs' ``debugfs``: one request per call, with errors told apart from output.

debugfs exits 0 even when a request fails, printing the reason on stderr after its version
banner; so every stderr line other than the banner is an error. One process per request costs a
few milliseconds and keeps each failure attached to the request that caused it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cloudseed.injection.errors import DebugfsError, ImageToolFailed, InvalidInjectionRequest
from cloudseed.injection.guest import Kind
from cloudseed.programs import run as program

BANNER = re.compile(r"^debugfs \S+ \(.*\)$")
NOT_FOUND = ("File not found by ext2_lookup", "Ext2 inode is not a directory")
KINDS: dict[str, Kind] = {"regular": "file", "directory": "dir", "symlink": "symlink"}
SUPERBLOCK_MAGIC_OFFSET = 1080
EXT_MAGIC = b"\x53\xef"


@dataclass(frozen=True)
class InodeStat:
    kind: Kind
    mode: int
    uid: int
    gid: int
    fast_link: str | None


def quote(path: str) -> str:
    """A path as one debugfs argument; its parser has no escape for a double quote."""
    if '"' in path:
        raise InvalidInjectionRequest(
            f"The debugfs handler cannot name {path!r} (it has a "
            "double quote); use guestfs or loop."
        )
    return f'"{path}"'


def parse_stat(text: str) -> InodeStat:
    kind_match = re.search(r"Type: (\w+)", text)
    mode_match = re.search(r"Mode:\s+([0-7]+)", text)
    owner_match = re.search(r"User:\s+(\d+)\s+Group:\s+(\d+)", text)
    if not (kind_match and mode_match and owner_match):
        raise ImageToolFailed(tool="debugfs", detail="unexpected stat output")
    link = re.search(r'Fast link dest: "(.*)"', text)
    return InodeStat(
        kind=KINDS.get(kind_match.group(1), "other"),
        mode=int(mode_match.group(1), 8) & 0o7777,
        uid=int(owner_match.group(1)),
        gid=int(owner_match.group(2)),
        fast_link=link.group(1) if link else None,
    )


class Debugfs:
    """Requests against one filesystem; ``device`` may carry ``?offset=N``."""

    def __init__(self, device: str, *, timeout: float) -> None:
        self.device = device
        self.timeout = timeout

    def request(self, request: str, *, write: bool = False) -> bytes:
        argv = ["debugfs", *(["-w"] if write else []), "-R", request, self.device]
        result = program.run(argv, timeout=self.timeout)
        errors = [
            line
            for line in result.stderr.decode("utf-8", "replace").splitlines()
            if line.strip() and not BANNER.match(line.strip())
        ]
        if errors:
            raise DebugfsError(request, "; ".join(errors))
        return result.stdout

    def stat(self, path: str) -> InodeStat | None:
        try:
            return parse_stat(self.request(f"stat {quote(path)}").decode("utf-8", "replace"))
        except DebugfsError as exc:
            if any(marker in exc.detail for marker in NOT_FOUND):
                return None
            raise

    def features(self) -> set[str]:
        text = self.request("features").decode("utf-8", "replace")
        return set(text.partition(":")[2].split())
