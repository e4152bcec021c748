"""Errors of external programs. The message is what an operator reads: the program's name and
the tail of its stderr, which is usually the reason.

ServiceUnavailable ── ProgramFailed        not installed, timed out, or exited non-zero
                      └── ImageUnreadable  qemu-img could not read an image as the format
                                           it was told (wrong format, damaged file)
"""

from __future__ import annotations

from cloudseed.errors import ServiceUnavailable


class ProgramFailed(ServiceUnavailable):
    def __init__(
        self, *, program: str, detail: str, returncode: int | None = None, stderr: str = ""
    ) -> None:
        super().__init__(f"{program} failed: {detail}")
        self.program = program
        self.detail = detail
        self.returncode = returncode
        self.stderr = stderr  # the tail, as in the message

    @property
    def tool(self) -> str:
        """The program's name (injection's word for it)."""
        return self.program


class ImageUnreadable(ProgramFailed):
    def __init__(self, *, path: str, fmt: str, returncode: int, stderr: str) -> None:
        super().__init__(
            program="qemu-img",
            detail=f"cannot read {path} as {fmt}: {stderr}",
            returncode=returncode,
            stderr=stderr,
        )
        self.path = path
        self.fmt = fmt
