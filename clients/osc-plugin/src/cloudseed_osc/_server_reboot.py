"""``openstack server reboot --hard --user-data FILE | --no-user-data SERVER``.

The stock command always sends its own reboot (``{"reboot": {"type": "HARD"}}``) from
``take_action()``, and a cliff hook cannot veto that call: ``before()`` may only return new
arguments. A second reboot is not acceptable (it would reboot the guest twice, and the first
one without the new user data), so when a user data option is given, ``before()`` checks it and
then gives the command instance a ``take_action`` of ours for this one run: a single reboot
action carrying ``user_data``, at 2.105, honouring ``--wait`` like the stock command. Without
those options the hook does nothing and the stock reboot runs unchanged.
"""

from __future__ import annotations

import argparse
import functools
from typing import TYPE_CHECKING, TextIO

from cliff import hooks
from openstack import exceptions as sdk_exceptions
from osc_lib import exceptions

from cloudseed_osc._compute import (
    compute_of,
    hard_reboot_with_user_data,
    require_user_data_updates,
)
from cloudseed_osc._user_data import read_user_data

if TYPE_CHECKING:
    from openstack.compute.v2._proxy import Proxy
    from openstack.compute.v2.server import Server

WAIT_INTERVAL = 2  # seconds between polls with --wait; a hard reboot takes seconds
EPILOG = (
    "--user-data and --no-user-data come from the cloudseed-osc plugin, work with --hard "
    "only, and need a cloud with compute API microversion 2.105 (cloudseed)."
)


class RebootUserDataHook(hooks.CommandHook):
    """Adds ``--user-data`` and ``--no-user-data`` to ``openstack server reboot``."""

    def get_parser(self, parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        group = parser.add_mutually_exclusive_group()
        group.add_argument(
            "--user-data",
            metavar="<user-data>",
            dest="user_data",
            help="With --hard: replace the server's user data with this file in the same "
            "reboot (compute API 2.105, cloudseed); the way to change the user data of a "
            "server with a config drive. Cannot be specified with the --no-user-data "
            "option.",
        )
        group.add_argument(
            "--no-user-data",
            action="store_true",
            dest="no_user_data",
            help="With --hard: remove the server's user data in the same reboot (compute API "
            "2.105, cloudseed). Cannot be specified with the --user-data option.",
        )
        return parser

    def get_epilog(self) -> str | None:
        return EPILOG

    def before(self, parsed_args: argparse.Namespace) -> argparse.Namespace:
        if parsed_args.user_data is None and not parsed_args.no_user_data:
            return parsed_args
        option = "--no-user-data" if parsed_args.no_user_data else "--user-data"
        if parsed_args.reboot_type != "HARD":
            # Checked before any request: a soft reboot leaves the guest's disks (and its
            # config drive) as they are, so the API only takes user data with a hard one.
            raise exceptions.CommandError(
                f"{option} needs --hard: user data can only be changed by a hard reboot."
            )
        encoded = None if parsed_args.no_user_data else read_user_data(parsed_args.user_data)
        require_user_data_updates(compute_of(self.cmd))
        # An instance attribute shadows the class's take_action for this run only (cliff's
        # run() calls self.take_action after the before() hooks); see the module docstring.
        self.cmd.take_action = functools.partial(  # type: ignore[method-assign]
            self._reboot_with_user_data, encoded
        )
        return parsed_args

    def after(self, parsed_args: argparse.Namespace, return_code: int) -> int:
        return return_code

    def _reboot_with_user_data(self, encoded: str | None, parsed_args: argparse.Namespace) -> None:
        compute = compute_of(self.cmd)
        server = compute.find_server(parsed_args.server, ignore_missing=False)
        hard_reboot_with_user_data(compute, server.id, encoded)
        if parsed_args.wait:
            _wait_until_active(self.cmd.app.stdout, compute, server)


def _wait_until_active(stdout: TextIO, compute: Proxy, server: Server) -> None:
    """``--wait``: poll until the server is ACTIVE again, showing progress as the stock command
    does, and fail the command if it goes to ERROR."""

    def show_progress(progress: int) -> None:
        if progress:
            stdout.write(f"\rProgress: {progress}")
            stdout.flush()

    # Fetched again first: the SDK's wait returns at once when the object it is given already
    # says ACTIVE, and ``server`` was read before the reboot.
    rebooting = compute.get_server(server.id)
    try:
        compute.wait_for_server(
            rebooting,
            status="ACTIVE",
            failures=["ERROR"],
            interval=WAIT_INTERVAL,
            wait=None,
            callback=show_progress,
        )
    except sdk_exceptions.ResourceFailure:
        raise exceptions.CommandError(f"Error rebooting server: {server.id}") from None
    stdout.write("Complete\n")
