"""Run an external program the one way injection allows.

argv lists only, never a shell; a timeout on every call; a pinned environment (``LC_ALL=C`` so
messages parse, and a fixed ``PATH`` so a caller's environment cannot swap the tools); failures
become ``ImageToolFailed`` with the tail of the program's stderr.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence

from cloudseed.injection.errors import ImageToolFailed

TOOL_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TOOL_ENV = {"LC_ALL": "C", "PATH": TOOL_PATH}
DEFAULT_TIMEOUT = 120.0


def which(tool: str) -> str | None:
    """Where ``tool`` is on the pinned PATH, or None."""
    return shutil.which(tool, path=TOOL_PATH)


def stderr_tail(stderr: bytes, limit: int = 400) -> str:
    text = stderr.decode("utf-8", "replace").strip()
    return text[-limit:] if text else "no error output"


def run(
    argv: Sequence[str],
    *,
    input: bytes | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    check: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``argv`` and return its output; with ``check``, a non-zero exit raises."""
    tool = argv[0].rsplit("/", 1)[-1]
    try:
        result = subprocess.run(
            list(argv),
            input=input,
            capture_output=True,
            timeout=timeout,
            env=TOOL_ENV,
            check=False,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise ImageToolFailed(tool=tool, detail="not installed") from None
    except subprocess.TimeoutExpired:
        raise ImageToolFailed(tool=tool, detail=f"no answer within {timeout:g} s") from None
    if check and result.returncode != 0:
        raise ImageToolFailed(
            tool=tool,
            returncode=result.returncode,
            detail=f"exit status {result.returncode}: {stderr_tail(result.stderr)}",
        )
    return result
