"""cloud-init's own phone_home module posting to a metadata service: a script, not a module.

Run it with the interpreter cloud-init is installed for (Debian: ``/usr/bin/python3``); the test
suite never imports cloudinit::

    /usr/bin/python3 -I -B cloudinit_phone_home.py URL --instance-id ID --hostname H \
        --fqdn F --keys DIR --work DIR

It calls ``cloudinit.config.cc_phone_home.handle`` as cloud-init's final stage does, with the
cloud-config ``phone_home: {url: URL, post: all, tries: 1}``, and prints one JSON object,
``{"cloud_init_version": ...}``; cloud-init's debug log goes to ``DIR/cloud-init.log``.

What is patched, and why: only what a test host is not. The module asks its ``Cloud`` for the
instance id and host names: a stand-in with those methods (and cloud-init's own ``Paths``)
answers from the arguments. It reads the host keys from ``/etc/ssh/ssh_host_*_key.pub``, which
a test host need not have: ``util.load_file`` reads those names from ``--keys`` instead (a key
missing there is missing, as on a guest: cloud-init sends "N/A"). The form and the HTTP POST
are cloud-init's (``url_helper``, ``requests``), untouched.
"""

from __future__ import annotations

import argparse
import inspect
import json
import logging
import os
from pathlib import Path
from typing import Any


class _Names:
    def __init__(self, hostname: str) -> None:
        self.hostname = hostname


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--instance-id", required=True)
    parser.add_argument("--hostname", required=True)
    parser.add_argument("--fqdn", required=True)
    parser.add_argument("--keys", required=True, type=Path, help="holds ssh_host_*_key.pub")
    parser.add_argument("--work", required=True, type=Path, help="scratch directory")
    args = parser.parse_args()

    from cloudinit import version  # noqa: I001 (importing cloudinit resets logging)
    from cloudinit import helpers, util
    from cloudinit.config import cc_phone_home

    args.work.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(
        filename=args.work / "cloud-init.log",
        level=logging.DEBUG,
        force=True,
        format="%(asctime)s %(name)s[%(levelname)s]: %(message)s",
    )

    class StandInCloud:
        paths = helpers.Paths({"cloud_dir": str(args.work / "cloud")})

        def get_instance_id(self) -> str:
            return str(args.instance_id)

        def get_hostname(self, fqdn: bool = False, **_: Any) -> _Names:
            return _Names(args.fqdn if fqdn else args.hostname)

    load_file = util.load_file

    def host_key_files(fname: Any, *rest: Any, **options: Any) -> Any:
        if str(fname).startswith("/etc/ssh/"):
            fname = args.keys / os.path.basename(str(fname))
        return load_file(fname, *rest, **options)

    util.load_file = host_key_files
    cfg = {"phone_home": {"url": args.url, "post": "all", "tries": 1}}
    handle: Any = cc_phone_home.handle
    log = logging.getLogger("cloudinit.config.cc_phone_home")
    if "log" in inspect.signature(handle).parameters:  # 22.4 has it; 23.x and later do not
        handle("phone_home", cfg, StandInCloud(), log, [])
    else:
        handle("phone_home", cfg, StandInCloud(), [])
    print(json.dumps({"cloud_init_version": version.version_string()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
