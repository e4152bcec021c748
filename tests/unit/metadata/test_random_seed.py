"""meta_data.json's random_seed: 512 fresh bytes for every answer, never the same twice, in
any process (render.new_seed hands out slices of a batch read from the kernel)."""

from __future__ import annotations

import base64
import os

from cloudseed.metadata import render


def test_each_seed_is_512_bytes_and_none_repeats_across_batches() -> None:
    seeds = [render.new_seed() for _ in range(3 * render._SeedPool.BATCH + 5)]
    assert {len(base64.b64decode(s, validate=True)) for s in seeds} == {512}
    assert len(set(seeds)) == len(seeds)


def test_a_forked_process_never_serves_the_parents_next_seed() -> None:
    render.new_seed()  # the parent's pool now holds the rest of a batch
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first seed, to the parent
        try:
            os.write(write, render.new_seed())
        finally:
            os._exit(0)
    os.close(write)
    child = b""
    while chunk := os.read(read, 4096):
        child += chunk
    os.close(read)
    os.waitpid(pid, 0)
    assert len(base64.b64decode(child, validate=True)) == 512
    assert child != render.new_seed()
