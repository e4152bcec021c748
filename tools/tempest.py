"""``make tempest``: tempest's compute API tests against cloudseed behind a real Keystone.

Stands up Keystone and cloudseed once (``tests/support/tempest.py``), runs the selection at
``max_microversion = 2.104`` (Nova 34's maximum) and at ``latest``, prints passed / skipped /
failed with the reason of each skip, and with ``--write`` replaces the summary section of a
Markdown file (between ``<!-- tempest:start -->`` and ``<!-- tempest:end -->``).

Usage (from the repository root, with the project's venv)::

    .venv/bin/python tools/tempest.py [--selection full|short] [--max-microversion 2.104 ...]
        [--concurrency 2] [--write docs/tempest.md]

Exits 1 when a test failed. The work directory (tempest's workspaces, logs) is kept under
``.cache/tempest-run`` for reading.
"""

from __future__ import annotations

import argparse
import collections
import platform
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import tempest, tool_venv

START, END = "<!-- tempest:start -->", "<!-- tempest:end -->"


def markdown(runs: list[tempest.Run], selection: str, total: float) -> str:
    lines = [
        START,
        f"tempest {tempest.REQUIREMENTS[0].split('==')[1]}, selection `{selection}`, "
        f"{platform.python_implementation()} {platform.python_version()}, "
        f"set-up and runs {total:.0f} s in all, `--concurrency 2`.",
        "",
        "| max_microversion | passed | skipped | failed | run time |",
        "|---|---|---|---|---|",
    ]
    for run in runs:
        lines.append(
            f"| {run.max_microversion} | {run.count('success')} | {run.count('skip')} | "
            f"{run.count('fail')} | {run.seconds:.0f} s |"
        )
    lines += ["", "Skipped, by tempest's reason (the most tests one run skipped for it):", ""]
    most: collections.Counter[str] = collections.Counter()
    for run in runs:
        per_run = collections.Counter(o.reason for o in run.outcomes if o.status == "skip")
        for reason, count in per_run.items():
            most[reason] = max(most[reason], count)
    for reason, count in sorted(most.items(), key=lambda item: (-item[1], item[0])):
        lines.append(f"- {reason.replace('|', '/')}: {count}")
    failed = [(r, o) for r in runs for o in r.outcomes if o.status == "fail"]
    lines += ["", "Failed:" if failed else "Failed: none.", ""]
    for run, outcome in failed:
        last = outcome.reason.strip().splitlines()[-1:] or [""]
        lines.append(f"- `{outcome.test}` at {run.max_microversion}: {last[0]}")
    lines.append(END)
    return "\n".join(lines) + "\n"


def write_section(path: Path, section: str) -> None:
    text = path.read_text() if path.exists() else ""
    if START in text and END in text:
        before, rest = text.split(START, 1)
        after = rest.split(END, 1)[1].lstrip("\n")
        text = before + section + after
    else:
        text = text + ("\n" if text and not text.endswith("\n") else "") + section
    path.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--selection", default="full", help="full, short, or a regular expression of test ids"
    )
    parser.add_argument("--max-microversion", action="append", dest="versions")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--write", type=Path)
    args = parser.parse_args()
    versions = args.versions or ["2.104", "latest"]
    selection = {"full": tempest.FULL_SELECTION, "short": tempest.SHORT_SELECTION}.get(
        args.selection, args.selection
    )
    work = tool_venv.CACHE_DIR / "tempest-run"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    started = time.monotonic()
    tempest.tempest_venv()
    runs = []
    with tempest.tempest_cloud(work, concurrency=args.concurrency) as cloud:
        for version in versions:
            run = tempest.run_tempest(
                cloud,
                work / f"workspace-{version}",
                selection=selection,
                max_microversion=version,
                concurrency=args.concurrency,
            )
            runs.append(run)
            print(tempest.summary(run), flush=True)
            for outcome in run.outcomes:
                if outcome.status == "skip":
                    print(f"  skipped {outcome.test}: {outcome.reason}")
    total = time.monotonic() - started
    section = markdown(runs, args.selection, total)
    print(section)
    if args.write:
        write_section(args.write, section)
    return 1 if any(run.count("fail") for run in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
