"""replay.py's bookkeeping and holes, and what ``at_once`` lets be replayed."""

from __future__ import annotations

import json
import random

from cloudseed.metadata.answers import JSON, Answer, at_once
from cloudseed.metadata.render import SeededJSON
from cloudseed.replay import ASKED_MARGIN, Hole, MakeReplayable, Replayable, Replays, refilled


def replayable(guest: str = "g1", hole: Hole | None = None) -> MakeReplayable:
    """How an app says its answer may be replayed: a maker of its Replayable."""
    made = Replayable(guest, lambda: True, lambda: None, hole)
    return lambda: made


def made_by(make: MakeReplayable | None) -> Replayable | None:
    return None if make is None else make()


def test_a_hole_is_filled_afresh_where_it_sits() -> None:
    seeded = SeededJSON(b'{"a": 1, "random_seed": "', b"", b"", b'", "z": 2}')
    hole = seeded.seed_hole()
    assert hole is not None
    found = at_once(Answer(200, seeded.render(), JSON), "GET", replayable(hole=hole))
    rest = found.header_lines + b"\r\n" + found.body
    again = [refilled(rest, hole) for _ in range(3)]
    assert len({len(r) for r in [rest, *again]}) == 1  # the same length: Content-Length holds
    bodies = [r.partition(b"\r\n\r\n")[2] for r in again]
    documents = [json.loads(body) for body in bodies]
    assert {(d["a"], d["z"]) for d in documents} == {(1, 2)}
    assert len({d["random_seed"] for d in documents}) == 3
    assert all(r.startswith(found.header_lines) for r in again)


def test_no_seed_no_hole() -> None:
    assert SeededJSON(b"{}", b"", b"", None).seed_hole() is None


def test_at_once_keeps_a_hole_only_in_a_whole_answer() -> None:
    hole = Hole(3, lambda: b"xx")
    ok = Answer(200, b"abcxx123", JSON)
    whole = replayable(hole=hole)
    assert at_once(ok, "GET", whole).replayable is whole
    head = made_by(at_once(ok, "HEAD", replayable(hole=hole)).replayable)
    assert head is not None and head.hole is None
    not_modified = made_by(at_once(Answer(304, b""), "GET", replayable(hole=hole)).replayable)
    assert not_modified is not None and not_modified.hole is None
    # An answer that records a delivery is never replayed.
    delivering = Answer(200, b"k", JSON, sent=lambda: None)
    assert at_once(delivering, "GET", replayable()).replayable is None


def test_replays_are_bounded_and_dropped_by_guest() -> None:
    now = [0.0]
    # An entry counts its bytes and 2,400 more.
    replays = Replays(max_bytes=5500, max_entry=3200, idle_before_replaced=30, clock=lambda: now[0])
    of_a, of_b = replayable("a"), replayable("b")
    replays.keep(("p", b"1"), b"s", b"x" * 100, of_a)
    replays.keep(("p", b"2"), b"s", b"x" * 100, of_b)
    replays.keep(("p", b"big"), b"s", b"x" * 800, of_a)  # 3,204: over max_entry, not kept
    assert len(replays) == 2 and replays.get(("p", b"big")) is None
    # Full, and its oldest entry was used less than 30 s ago: the new answer is not kept.
    replays.keep(("p", b"3"), b"s", b"x" * 500, of_a)
    assert replays.get(("p", b"3")) is None and len(replays) == 2
    # Entry 1 is looked up at 20 s; at 40 s entry 2 is 40 s idle and makes room, 1 stays.
    now[0] = 20.0
    assert replays.get(("p", b"1")) is not None
    now[0] = 40.0
    replays.keep(("p", b"3"), b"s", b"x" * 500, of_a)
    assert replays.get(("p", b"2")) is None
    assert replays.get(("p", b"1")) is not None and replays.get(("p", b"3")) is not None
    replays.changed("a")
    assert len(replays) == 0
    replays.keep(("p", b"2"), b"s", b"x" * 100, of_b)
    replays.changed(None)
    assert len(replays) == 0


def test_a_guest_asking_again_and_again_replaces_a_storms_answers_never_replayed() -> None:
    now = [0.0]
    replays = Replays(max_bytes=3 * 2500, idle_before_replaced=30, clock=lambda: now[0])
    storm = [("p", b"storm-%d" % i) for i in range(3)]
    for key in storm:  # each asked once and kept: the store is full
        replays.keep(key, b"s", b"x" * 50, replayable("storm"))
    replays.get(storm[0])  # replayed once: one more ask is needed to replace it
    hot = ("p", b"hot")
    for _ in range(ASKED_MARGIN):
        replays.keep(hot, b"s", b"x" * 50, replayable("hot"))
        assert replays.get(hot) is None  # refused, a second after the storm
    replays.keep(hot, b"s", b"x" * 50, replayable("hot"))  # asked more than the margin
    assert replays.get(hot) is not None
    assert replays.get(storm[1]) is None  # the least recently replayed went
    assert replays.get(storm[0]) is not None and replays.get(storm[2]) is not None


def test_guests_crawled_in_turn_do_not_trade_places() -> None:
    """A storm larger than the store, crawled again and again in random order: the answers
    kept stay kept (trading them wrote and dropped an entry per request)."""
    rng = random.Random(7)
    replays = Replays(max_bytes=40 * 2500, idle_before_replaced=1e9)
    keys = [("p", b"guest-%d" % i) for i in range(100)]
    kept_after_each_pass = []
    for _ in range(6):
        rng.shuffle(keys)
        for key in keys:
            if replays.get(key) is None:
                replays.keep(key, b"s", b"x" * 50, replayable(key[1].decode()))
        kept_after_each_pass.append({key for key in keys if key in replays})
    first = kept_after_each_pass[0]
    assert len(first) == 40
    assert all(kept == first for kept in kept_after_each_pass[1:])


def test_an_answer_larger_than_the_store_is_not_kept() -> None:
    replays = Replays(max_bytes=3000, max_entry=10_000)
    replays.keep(("p", b"1"), b"s", b"x" * 5000, replayable())
    assert len(replays) == 0


def test_a_replayable_is_made_only_for_an_answer_kept() -> None:
    """A storm's answers find the store full: refused, their Replayable is never made (the
    app's closures and the metrics edge's wrapping cost a sixth of a first ask)."""
    now = [0.0]
    replays = Replays(max_bytes=2 * 2500, idle_before_replaced=30, clock=lambda: now[0])
    made: list[str] = []

    def making(guest: str) -> MakeReplayable:
        def make() -> Replayable:
            made.append(guest)
            return Replayable(guest, lambda: True, lambda: None)

        return make

    replays.keep(("p", b"1"), b"s", b"x" * 50, making("a"))
    replays.keep(("p", b"2"), b"s", b"x" * 50, making("b"))
    for i in range(3, 10):  # full, its entries in use: refused
        replays.keep(("p", b"%d" % i), b"s", b"x" * 50, making("storm"))
    assert made == ["a", "b"] and len(replays) == 2
    # A maker that finds the answer may not be replayed after all keeps nothing and makes no
    # room: the entries that would have been dropped for it stay.
    now[0] = 100.0
    replays.keep(("p", b"late"), b"s", b"x" * 50, lambda: None)
    assert len(replays) == 2 and ("p", b"1") in replays and ("p", b"late") not in replays
