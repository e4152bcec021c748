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
    def public_message(self) -> str:
        # The detail is the program's stderr, which names files on the host.
        return f"{self.program} failed"

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

    @property
    def reason(self) -> str:
        """qemu-img's reason on one line, without the path it names ("Could not open
        '/x.qcow2': Unsupported qcow2 version 99" -> "Unsupported qcow2 version 99")."""
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        last = lines[-1] if lines else self.stderr
        named = f"'{self.path}': "
        return last.rsplit(named, 1)[-1].strip() if named in last else last.strip()
