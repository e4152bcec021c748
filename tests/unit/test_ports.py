"""tests/support/ports.py: test ports come from outside the kernel's ephemeral range, and no
two test processes are given the same one."""

from __future__ import annotations

import multiprocessing
import socket

from tests.support import ports


def test_ports_are_below_the_ephemeral_range_and_never_given_twice():
    given = [ports.free_port() for _ in range(3 * ports.BLOCK)]  # across several blocks
    assert len(set(given)) == len(given)
    assert all(ports.FIRST <= port < ports.ephemeral_start() for port in given)


def test_a_port_something_listens_on_is_skipped():
    first = ports.free_port()
    # The next port of this process's block, taken by someone else before we hand it out.
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", first + 1))
        squatter.listen()
        assert ports.free_port() != first + 1


def test_a_range_is_consecutive_and_free():
    span = ports.free_port_range(8)
    assert len(span) == 8 and span.step == 1
    for port in span:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", port))


def _ports_of_a_child(queue: multiprocessing.Queue[list[int]]) -> None:
    queue.put([ports.free_port() for _ in range(8)])


def test_a_forked_child_is_given_other_ports_than_its_parent():
    ports.free_port()  # this process holds a block, which the child inherits
    context = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[list[int]] = context.Queue()
    child = context.Process(target=_ports_of_a_child, args=(queue,))
    child.start()
    mine = {ports.free_port() for _ in range(8)}
    theirs = set(queue.get(timeout=30))
    child.join(timeout=30)
    assert child.exitcode == 0
    assert len(theirs) == 8 and not mine & theirs
