"""From a fresh clone to a logged-in VM: README.md's "Boot a real VM", timed.

    .venv/bin/python bench/readme_walkthrough.py [--write docs/benchmarks.md]

Clones this repository into a temporary directory, hands the clone the guest image already
built by ``make image-debian`` (the image build is timed separately: its own build.txt), and
runs the README section's commands there, as written (tests/e2e/test_readme.py reads them the
same way), in a mount and PID namespace of their own so that everything they start ends with
them. Unlike the test, the network is the machine's: the fresh clone's ``make run`` creates its
venv from the package index, as a new operator's would. So the walkthrough's fixed ports
(8774, 8775, 10022) must be free here; the script stops if one is taken.

Bash's trace (``PS4`` with a timestamp) marks when each command started; the steps reported
are measured between those marks. Run as root (QEMU, namespaces)."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.readme import IMAGE, NAMESPACES, walkthrough  # noqa: E402

PORTS = (8774, 8775, 10022)
TRACE = re.compile(r"^\+{1,} @(\d+\.\d+) (.*)$")
# (label, the first traced command of the step); a step lasts until the next one starts.
STEPS = (
    ("image (cached: make image-debian finds it up to date)", "make image-debian"),
    ("make run until the API answers (venv, install, db sync, serve)", "make run"),
    ("operator: image, flavor, network", "cs image show"),
    ("user: key pair, server create", "-f var/vm-key"),
    ("boot: create until cloud-init has finished (console)", "console"),
    ("SSH login with the key through the forward", "cs server ssh"),
    ("delete and stop", "-X DELETE"),
)
START = "<!-- bench:readme:start -->"
END = "<!-- bench:readme:end -->"


def port_taken(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def marks(trace: str) -> list[tuple[float, str]]:
    found = []
    for line in trace.splitlines():
        match = TRACE.match(line)
        if match:
            found.append((float(match.group(1)), match.group(2)))
    return found


def step_times(found: list[tuple[float, str]], end: float) -> list[tuple[str, float]]:
    starts = []
    for label, command in STEPS:
        at = next((t for t, text in found if command in text), None)
        if at is None:
            raise SystemExit(f"no traced command with {command!r}")
        starts.append((label, at))
    times = []
    for i, (label, at) in enumerate(starts):
        until = starts[i + 1][1] if i + 1 < len(starts) else end
        times.append((label, until - at))
    return times


def run(work: Path) -> tuple[float, float, list[tuple[str, float]], str]:
    clone = work / "cloudseed"
    started = time.time()
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    cloned = time.time()
    images = clone / ".cache" / "images"
    images.mkdir(parents=True)
    for built in IMAGE.parent.iterdir():
        if built.is_file():
            shutil.copy2(built, images / built.name)
    copied = time.time()
    trace = ["set -e", "export PS4='+ @$(date +%s.%N) '", "set -x"]
    script = "\n".join([*trace, walkthrough((clone / "README.md").read_text())])
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDSEED_")}
    done = subprocess.run(
        [*(n for n in NAMESPACES if n != "--net"), "bash", "-c", script],
        cwd=clone,
        env=environ,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    ended = time.time()
    if done.returncode != 0:
        raise SystemExit(f"the walkthrough failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}")
    steps = step_times(marks(done.stderr), ended)
    return cloned - started, ended - copied, steps, done.stdout


def section(clone_s: float, total_s: float, steps: list[tuple[str, float]], stdout: str) -> str:
    build = (IMAGE.parent / "build.txt").read_text().strip()
    load = os.getloadavg()[0]
    rows = "\n".join(f"| {label} | {seconds:.1f} s |" for label, seconds in steps)
    # From the command `cloudseed server ssh` printed to the end: what the login showed.
    lines = stdout.splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("ssh -p ")), 0)
    printed = " / ".join(line.strip() for line in lines[first:] if line.strip())
    return f"""{START}
## Boot a real VM

`.venv/bin/python bench/readme_walkthrough.py --write docs/benchmarks.md`: README.md's "Boot a
real VM" run as written in a fresh clone of the repository (`git clone` {clone_s:.1f} s), the
guest image handed over from `make image-debian` (its build is timed below), on this 2-core
machine without KVM (TCG), load average {load:.1f} at the end. From the first command to the
service stopped after the delete: **{total_s:.0f} s** ({total_s / 60:.1f} minutes).

| step | time |
|---|---|
{rows}

What `ssh` printed in the guest: `{printed}`

The image build (`make image-debian`, as root, the first time only; its `build.txt`):

```
{build}
```
{END}"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="replace this section of that file")
    args = parser.parse_args()
    if not IMAGE.exists():
        raise SystemExit(f"{IMAGE} is missing: run `make image-debian` first")
    taken = [port for port in PORTS if port_taken(port)]
    if taken:
        raise SystemExit(f"ports in use here, the walkthrough needs them: {taken}")
    work = Path(tempfile.mkdtemp(prefix="cloudseed-walkthrough-"))
    try:
        text = section(*run(work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(text)
    if args.write:
        doc = args.write.read_text()
        if START in doc:
            head, rest = doc.split(START, 1)
            doc = head + text + rest.split(END, 1)[1]
        else:
            doc = doc.rstrip("\n") + "\n\n" + text + "\n"
        args.write.write_text(doc)


if __name__ == "__main__":
    main()
