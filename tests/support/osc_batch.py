"""Several ``openstack`` commands in one interpreter: a script, run with the python of the
OSC venv (``Cli.python``), so that a test pays the CLI's start-up (its imports and entry
points: most of an ``openstack`` run) once for a batch::

    python osc_batch.py COMMANDS.json

COMMANDS.json is a list of argument lists, each run as ``openstack ARGS...`` would run it
(``openstackclient.shell.OpenStackShell().run``), one after the other with the same
environment. Prints a JSON list, one ``{"argv", "code", "stdout", "stderr"}`` per command.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import sys
from pathlib import Path


def main() -> int:
    from openstackclient import shell

    commands = json.loads(Path(sys.argv[1]).read_text())
    results = []
    for argv in commands:
        root = logging.getLogger()
        for handler in list(root.handlers):  # each run adds its own console handler
            root.removeHandler(handler)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = shell.OpenStackShell().run(argv)
            except SystemExit as exc:  # argparse's errors and --help
                code = exc.code if isinstance(exc.code, int) else 1
        results.append(
            {"argv": argv, "code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}
        )
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
