"""os-getConsoleOutput's cut of a console log, with Nova's rules."""

from __future__ import annotations

from cloudseed.servers.lifecycle import console_tails
from cloudseed.servers.lifecycle.console import console_tail

LOG = "one\r\ntwo\x1b[0m\r\nthree\tcol\nfour"


def test_control_characters_go_but_tab_and_newline_stay() -> None:
    assert console_tail(LOG, None) == "one\ntwo[0m\nthree\tcol\nfour"


def test_length_keeps_lines_from_the_end() -> None:
    assert console_tail(LOG, 2) == "three\tcol\nfour"
    assert console_tail(LOG, 10) == console_tail(LOG, None)


def test_zero_and_minus_one_mean_everything_as_in_nova() -> None:
    assert console_tail(LOG, 0) == console_tail(LOG, None)
    assert console_tail(LOG, -1) == console_tail(LOG, None)


def test_a_stored_tail_is_the_last_100_kib_compressed() -> None:
    text = "".join(f"line {n} of the boot\n" for n in range(20_000))  # about 400 KiB
    stored = console_tails.pack(text)
    assert len(stored) < console_tails.TAIL_BYTES // 5
    back = console_tails.unpack(stored)
    assert len(back.encode()) == console_tails.TAIL_BYTES and text.endswith(back)
    # A character cut in two at the start is replaced, never an error.
    assert console_tails.unpack(console_tails.pack("é" * 60_000)).startswith(("é", "\ufffd"))
