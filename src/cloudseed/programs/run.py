"""Run an external program the one way cloudseed allows.

- argv lists only, never a shell, so no value is ever parsed as shell syntax;
- ``LC_ALL=C`` so the messages we parse or show are the untranslated ones;
- one PATH rule: the fixed system directories in ``PATH`` below, never the caller's
  ``PATH``. These programs read untrusted images, some as root, so an environment must not be
  able to swap them; the sbin directories are included because debugfs, sfdisk, losetup and
  mount live there and are not on an ordinary user's PATH;
- a timeout on every call (a crafted image can make a tool spin);
- stdout and stderr captured; with ``check``, a non-zero exit raises ``ProgramFailed`` with the
  program's name and the tail of its stderr. Not installed and timed out raise it too.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence

from cloudseed.programs.errors import ProgramFailed

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ENVIRONMENT = {"LC_ALL": "C", "PATH": PATH}
DEFAULT_TIMEOUT = 120.0
STDERR_TAIL = 400


def which(program: str) -> str | None:
    """Where ``program`` is on the fixed PATH, or None."""
    return shutil.which(program, path=PATH)


def stderr_tail(stderr: bytes, limit: int = STDERR_TAIL) -> str:
    """The last ``limit`` characters of a program's stderr: where the reason usually is."""
    text = stderr.decode("utf-8", "replace").strip()
    return text[-limit:] if text else "no error output"


def run(
    argv: Sequence[str],
    *,
    input: bytes | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    check: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``argv`` and return its output; with ``check``, a non-zero exit raises.

    ``input`` goes to standard input (how secrets are passed: never in argv, which ``ps``
    shows); without it, standard input is /dev/null.
    """
    program = argv[0].rsplit("/", 1)[-1]
    try:
        result = subprocess.run(
            list(argv),
            input=input,
            capture_output=True,
            timeout=timeout,
            env=ENVIRONMENT,
            check=False,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise ProgramFailed(program=program, detail="not installed") from None
    except subprocess.TimeoutExpired:
        raise ProgramFailed(program=program, detail=f"no answer within {timeout:g} s") from None
    if check and result.returncode != 0:
        tail = stderr_tail(result.stderr)
        raise ProgramFailed(
            program=program,
            returncode=result.returncode,
            detail=f"exit status {result.returncode}: {tail}",
            stderr=tail,
        )
    return result
