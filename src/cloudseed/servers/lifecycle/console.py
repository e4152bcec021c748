"""What ``os-getConsoleOutput`` returns of a console log: no IO, Nova's rules.

Control characters other than tab and newline are removed (a serial console is full of
carriage returns and escape sequences), and ``length`` keeps that many lines from the end.
As in Nova, a length of None or -1 means the whole log, and so does 0 (Nova cuts with
``lines[-length:]``, and ``lines[-0:]`` is every line).
"""

from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f]")


def console_tail(log: str, length: int | None) -> str:
    if length is not None and length > 0:
        log = "\n".join(log.split("\n")[-length:])
    return _CONTROL.sub("", log)
