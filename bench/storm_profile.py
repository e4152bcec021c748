"""A py-spy profile of one worker during a warm wrk pass, summarised by own and inclusive time
per frame."""

from __future__ import annotations

import argparse
import re
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from storm_host import venv_tool
from storm_wrk import pacing_env


@dataclass
class Profile:
    samples: int
    threads: list[tuple[str, int]]  # thread name, samples
    own: list[tuple[str, int]]  # frame, samples in which it was the innermost frame
    inclusive: list[tuple[str, int]]  # frame, samples with it anywhere on the stack


# Frames every stack of a thread passes through (the process's entry, the event loop's own
# run methods, a pool thread's bootstrap): as "inclusive" they would top the list, saying
# nothing. Their own time, if any, still counts. (py-spy names files relative to sys.path.)
ENTRY_FRAMES = re.compile(
    r"^<module> |\((click|multiprocessing)/|\(cloudseed/(serve|cli/\w+)\.py\)"
    r"|\(asyncio/runners\.py\)|^BaseEventLoop\.(run_until_complete|run_forever|_run_once) "
    r"|^Handle\._run |\(threading\.py\)|^_worker \(concurrent/futures/thread\.py\)"
)


def short_frame(frame: str) -> str:
    """``name (path)`` with the path cut to what identifies it."""
    frame = re.sub(r"\(/.*?/site-packages/", "(", frame)
    frame = re.sub(r"\(/.*?/lib/python3\.\d+/", "(stdlib ", frame)
    return re.sub(r"\(/.*?/src/", "(", frame)


def thread_name(root: str) -> str:
    """``thread (123): asyncio_0`` -> ``asyncio_N``: pool threads by kind, not one by one."""
    name = root.partition(": ")[2] or root
    # py-spy reads a thread's name from its memory: one caught while starting or ending reads
    # as garbage (NULs and stray bytes seen), which must not reach the docs.
    if not name.isprintable() or not name.strip():
        return "(unnamed)"
    return re.sub(r"_\d+$", "_N", re.sub(r"-\d+", "-N", name))


def summarize_profile(raw: str, top: int) -> Profile:
    """py-spy's raw (collapsed) output, recorded with --threads: one line per distinct stack,
    ``thread (tid): name;outermost;...;innermost count``."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        root, *frames = stack.split(";")
        frames = [short_frame(f) for f in frames] or ["(no Python frame)"]
        total += count
        threads[thread_name(root)] += count
        own[frames[-1]] += count
        for frame in set(frames):
            if not ENTRY_FRAMES.search(frame):
                inclusive[frame] += count
    return Profile(total, threads.most_common(), own.most_common(top), inclusive.most_common(top))


def profile_worker(args: argparse.Namespace, pid: int, command: list[str], out: Path) -> Profile:
    """py-spy on one worker while wrk runs a warm pass (not measured)."""
    py_spy = venv_tool("py-spy", "pip install py-spy into the venv")
    storm = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=pacing_env(0)
    )
    try:
        time.sleep(2)  # past wrk's connection set-up
        done = subprocess.run(
            [
                py_spy,
                "record",
                "--pid",
                str(pid),
                "--duration",
                str(args.profile_seconds),
                "--rate",
                "250",
                "--format",
                "raw",
                "--nolineno",
                "--threads",
                "--nonblocking",
                "--output",
                str(out),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"py-spy failed:\n{done.stdout}{done.stderr}")
    finally:
        storm.communicate()
    return summarize_profile(out.read_text(), top=12)
