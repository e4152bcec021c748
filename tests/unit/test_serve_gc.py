"""A serve worker's start-up heap is moved out of the collector's full walks
(``serve.freeze_what_start_up_made``): what is alive is frozen, what is garbage is collected
first instead of being kept for good."""

from __future__ import annotations

import gc
import weakref

from cloudseed.serve import freeze_what_start_up_made


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def test_start_up_garbage_is_collected_and_the_rest_frozen():
    gc.unfreeze()
    try:
        garbage_a, garbage_b = Node(), Node()
        garbage_a.other, garbage_b.other = garbage_b, garbage_a  # a cycle: only gc frees it
        dead = weakref.ref(garbage_a)
        del garbage_a, garbage_b
        kept = [Node() for _ in range(1000)]
        before = gc.get_freeze_count()
        assert before == 0
        freeze_what_start_up_made()
        assert dead() is None
        assert gc.get_freeze_count() >= len(kept)
        # A full collection now walks only what was made since.
        assert sum(gc.get_count()) < gc.get_freeze_count()
    finally:
        gc.unfreeze()
