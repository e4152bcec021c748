"""The module python-openstackclient loads for the ``openstack.cli.extension`` entry point.

It declares an API named ``cloudseed`` (version 1) so that the ``openstack`` command loads the
commands of the entry point group ``openstack.cloudseed.v1``: ``server key list | add | remove
| set`` and ``project key list | set``. Those commands use the compute connection the
``openstack`` command already has (``client_manager.sdk_connection.compute``) at microversion
2.106, so ``make_client`` returns that connection and there is no endpoint of its own to
configure. Loaded at every start of ``openstack``: it imports nothing but argparse.
"""

from __future__ import annotations

import argparse
from typing import Any

API_NAME = "cloudseed"
API_VERSION_OPTION = "os_cloudseed_api_version"
DEFAULT_API_VERSION = "1"
API_VERSIONS = ("1",)


def make_client(instance: Any) -> Any:
    """``client_manager.cloudseed``: the openstacksdk compute proxy of the run."""
    return instance.sdk_connection.compute


def build_option_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    # OSC reads the version of every plugin API from this option; "1" is the only one.
    parser.add_argument(
        "--os-cloudseed-api-version",
        metavar="<cloudseed-api-version>",
        default=DEFAULT_API_VERSION,
        help=argparse.SUPPRESS,
    )
    return parser
