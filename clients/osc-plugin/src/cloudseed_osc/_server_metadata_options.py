"""``openstack server set --metadata-option KEY=VALUE SERVER``: a running server's metadata
options (compute API 2.109, cloudseed; EC2's ModifyInstanceMetadataOptions).

A hook on ``server set``, acting in ``before()`` as ``--user-data`` does: one
``PUT /servers/{id}`` at 2.109 holding only ``metadata_options``, sent before the stock
command's own changes, so that a refused option stops the command before anything else
changes. KEY is one of the four options; VALUE ``none`` unsets it (the server follows its
cloud again). The API checks the values (400 with the reason).
"""

from __future__ import annotations

import argparse

from cliff import hooks
from osc_lib import exceptions

from cloudseed_osc._compute import compute_of, fault_message, require_microversion

METADATA_OPTIONS_MICROVERSION = "2.109"
KEYS = (
    "http_endpoint",
    "http_tokens",
    "http_put_response_hop_limit",
    "instance_metadata_tags",
)
EPILOG = (
    "--metadata-option comes from the cloudseed-osc plugin and needs a cloud with compute "
    "API microversion 2.109 (cloudseed)."
)


def parse_options(items: list[str]) -> dict[str, object]:
    """``KEY=VALUE`` items as the API's ``metadata_options``; a CommandError for a bad one."""
    options: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in KEYS:
            raise exceptions.CommandError(
                f"--metadata-option {item!r}: expected KEY=VALUE with KEY one of {', '.join(KEYS)}."
            )
        if value.lower() == "none":
            options[key] = None
        elif key == "http_put_response_hop_limit":
            try:
                options[key] = int(value)
            except ValueError:
                raise exceptions.CommandError(
                    f"--metadata-option {item!r}: the hop limit is a number (1-64)."
                ) from None
        else:
            options[key] = value
    return options


class SetMetadataOptionsHook(hooks.CommandHook):
    """Adds ``--metadata-option`` to ``openstack server set``."""

    def get_parser(self, parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        parser.add_argument(
            "--metadata-option",
            metavar="<key=value>",
            action="append",
            dest="metadata_options",
            default=[],
            help="Set one of the server's metadata options (compute API 2.109, cloudseed): "
            f"{', '.join(KEYS)}; VALUE 'none' unsets it. Repeat for more.",
        )
        return parser

    def get_epilog(self) -> str | None:
        return EPILOG

    def before(self, parsed_args: argparse.Namespace) -> argparse.Namespace:
        if not parsed_args.metadata_options:
            return parsed_args
        options = parse_options(parsed_args.metadata_options)
        compute = compute_of(self.cmd)
        require_microversion(
            compute, METADATA_OPTIONS_MICROVERSION, "this cloud has no per-server metadata options"
        )
        server = compute.find_server(parsed_args.server, ignore_missing=False)
        response = compute.put(
            f"/servers/{server.id}",
            json={"server": {"metadata_options": options}},
            microversion=METADATA_OPTIONS_MICROVERSION,
        )
        if response.status_code >= 400:
            raise exceptions.CommandError(
                f"{fault_message(response)} (HTTP {response.status_code})"
            )
        return parsed_args

    def after(self, parsed_args: argparse.Namespace, return_code: int) -> int:
        return return_code
