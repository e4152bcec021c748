"""cloud-init's own reporting webhook posting a boot's events: a script, not a module.

Run it with the interpreter cloud-init is installed for (Debian: ``/usr/bin/python3``); the test
suite never imports cloudinit::

    /usr/bin/python3 -I -B cloudinit_webhook.py PART --work DIR [--fail MODULE] [--lib DIR]

PART is a file holding a ``#cloud-config`` part as vendordata carries it. Its ``reporting``
section is read with cloud-init's YAML loader and applied as every stage of cloud-init applies
it (``reporting.update_configuration``, what ``cmd/main.py``'s ``apply_reporting_cfg`` calls),
so the handler, its thread and its HTTP posts are cloud-init's ``WebHookHandler``, untouched.
Then the stages of a first boot that vendordata configured run as cloud-init names and nests
them (``ReportEventStack``: ``init-network``, ``modules-config`` and ``modules-final``, each
module a ``config-<name>`` child, a module's exception caught outside its stack as
``config/modules.py`` does), and the events are flushed after each stage as ``cmd/main.py``
does. ``--fail MODULE`` makes that module raise; ``--lib DIR`` puts another cloud-init's tree
first on ``sys.path`` (trixie's 25.x: tests/support/cloudinit_trixie.py). Prints one JSON object,
``{"cloud_init_version": ..., "posted": N}``; the debug log goes to ``DIR/cloud-init.log``.

Nothing is patched: no module's work is done (the modules' bodies are not what is tested), only
their reporting.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

STAGES = (
    ("init-network", "searching for network datasources", ("seed_random", "ssh")),
    ("modules-config", "running modules for config", ("locale", "runcmd")),
    ("modules-final", "running modules for final", ("scripts_user", "final_message")),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", type=Path)
    parser.add_argument("--work", required=True, type=Path, help="scratch directory")
    parser.add_argument("--fail", default=None, help="the module that raises")
    parser.add_argument("--lib", default=None, help="a cloud-init tree to import instead")
    args = parser.parse_args()
    if args.lib:
        sys.path.insert(0, args.lib)

    from cloudinit import version  # noqa: I001 (importing cloudinit resets logging)
    from cloudinit import reporting, util
    from cloudinit.reporting import events, handlers

    args.work.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(
        filename=args.work / "cloud-init.log",
        level=logging.DEBUG,
        force=True,
        format="%(asctime)s %(name)s[%(levelname)s]: %(message)s",
    )
    config = util.load_yaml(args.part.read_text())
    reporting.update_configuration(config["reporting"])
    webhooks = [
        h
        for h in reporting.instantiated_handler_registry.registered_items.values()
        if isinstance(h, handlers.WebHookHandler)
    ]
    assert len(webhooks) == 1, webhooks
    posted = 0
    for stage, description, modules in STAGES:
        with events.ReportEventStack(stage, description) as reporter:
            for module in modules:
                name = f"config-{module}"
                stack = events.ReportEventStack(
                    name=name,
                    description=f"running {name} with frequency once-per-instance",
                    parent=reporter,
                )
                try:
                    with stack:
                        if module == args.fail:
                            raise RuntimeError(f"{module} failed, as told")
                        stack.message = f"{name} ran successfully"
                except RuntimeError:
                    logging.exception("Running module %s failed", module)
                posted += 2
        posted += 2
        reporting.flush_events()
    print(json.dumps({"cloud_init_version": version.version_string(), "posted": posted}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
