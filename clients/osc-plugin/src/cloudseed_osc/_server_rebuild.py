"""``openstack server rebuild --user-data FILE | --no-user-data``: the right microversion.

The stock command already has both options and sends them correctly, but it lets them through
from microversion 2.54, while ``user_data`` in a rebuild only exists from 2.57: at 2.54-2.56
the request goes out and Nova answers 400. The hook adds no option; its ``before()`` refuses
these two below 2.57, before any request, with the same wording the stock command uses for its
other version checks. From 2.57 on it does nothing, and the stock rebuild runs as it is.
"""

from __future__ import annotations

import argparse

from cliff import hooks
from openstack import utils as sdk_utils
from osc_lib import exceptions

from cloudseed_osc._compute import compute_of

REBUILD_USER_DATA_MICROVERSION = "2.57"


class RebuildUserDataHook(hooks.CommandHook):
    """Gates ``openstack server rebuild --user-data/--no-user-data`` on 2.57 instead of 2.54."""

    def get_parser(self, parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        return parser

    def get_epilog(self) -> str | None:
        return None

    def before(self, parsed_args: argparse.Namespace) -> argparse.Namespace:
        # getattr: should a future client drop an option, the hook must not break the command.
        if getattr(parsed_args, "user_data", None):
            option = "--user-data"
        elif getattr(parsed_args, "no_user_data", False):
            option = "--no-user-data"
        else:
            return parsed_args
        # The SDK's own check, as the stock command's: it honours --os-compute-api-version
        # when given, and otherwise the cloud's newest version (what the SDK will negotiate).
        if not sdk_utils.supports_microversion(
            compute_of(self.cmd), REBUILD_USER_DATA_MICROVERSION
        ):
            raise exceptions.CommandError(
                f"--os-compute-api-version {REBUILD_USER_DATA_MICROVERSION} or greater is "
                f"required to support the {option} option"
            )
        return parsed_args

    def after(self, parsed_args: argparse.Namespace, return_code: int) -> int:
        return return_code
