"""``openstack server set --user-data FILE | --no-user-data SERVER``.

The hook acts in ``before()``: the user data is replaced first, in a request of its own at
2.105, and only then does the stock command run. The stock command sends nothing for these
options (it does not know them), so nothing is applied twice, and ``server set --user-data FILE
SERVER`` with no other option is a complete command: the stock part then only looks the server
up. Going first also means a refused update (409, unsupported cloud) stops the whole command
before any of its other changes (``--name``, ``--property`` ...) is made.
"""

from __future__ import annotations

import argparse
import shlex

from cliff import hooks
from osc_lib import exceptions

from cloudseed_osc._compute import (
    UserDataConflict,
    compute_of,
    require_user_data_updates,
    update_user_data,
)
from cloudseed_osc._user_data import read_user_data

EPILOG = (
    "--user-data and --no-user-data come from the cloudseed-osc plugin and need a cloud "
    "with compute API microversion 2.105 (cloudseed)."
)


class SetUserDataHook(hooks.CommandHook):
    """Adds ``--user-data`` and ``--no-user-data`` to ``openstack server set``."""

    def get_parser(self, parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        group = parser.add_mutually_exclusive_group()
        group.add_argument(
            "--user-data",
            metavar="<user-data>",
            dest="user_data",
            help="Replace the server's user data with this file (compute API 2.105, cloudseed). "
            "A server with a config drive needs "
            "'openstack server reboot --hard --user-data' instead. "
            "Cannot be specified with the --no-user-data option.",
        )
        group.add_argument(
            "--no-user-data",
            action="store_true",
            dest="no_user_data",
            help="Remove the server's user data (compute API 2.105, cloudseed). "
            "Cannot be specified with the --user-data option.",
        )
        return parser

    def get_epilog(self) -> str | None:
        return EPILOG

    def before(self, parsed_args: argparse.Namespace) -> argparse.Namespace:
        if parsed_args.user_data is None and not parsed_args.no_user_data:
            return parsed_args
        encoded = None if parsed_args.no_user_data else read_user_data(parsed_args.user_data)
        compute = compute_of(self.cmd)
        require_user_data_updates(compute)
        server = compute.find_server(parsed_args.server, ignore_missing=False)
        try:
            update_user_data(compute, server.id, encoded)
        except UserDataConflict as exc:
            if not server.has_config_drive:
                raise
            raise exceptions.CommandError(
                f"{exc}\nThe user data of a server with a config drive changes with a hard "
                f"reboot: {_reboot_hint(parsed_args)}"
            ) from None
        return parsed_args

    def after(self, parsed_args: argparse.Namespace, return_code: int) -> int:
        return return_code


def _reboot_hint(parsed_args: argparse.Namespace) -> str:
    """The command to run instead, with the user's own file and server, quoted for a shell."""
    data = (
        ["--no-user-data"] if parsed_args.no_user_data else ["--user-data", parsed_args.user_data]
    )
    return shlex.join(["openstack", "server", "reboot", "--hard", *data, parsed_args.server])
