"""``openstack project key list | set PROJECT``: the keys an administrator gives every server of
a project (compute API 2.106, cloudseed; ``/os-project-keys/{project_id}``).

PROJECT is the project's ID as the compute API knows it: cloudseed has no Keystone client, and
these commands look nothing up in the identity service. ``set`` sends the whole list (the API
replaces it), so it has no read-modify-write and no race of its own.
"""

from __future__ import annotations

import argparse
from typing import Any

from osc_lib import exceptions
from osc_lib.command import command

from cloudseed_osc._compute import compute_of
from cloudseed_osc._keys import (
    get_project_keys,
    parse_expiries,
    put_project_keys,
    require_live_keys,
)

COLUMNS = ("Name", "User ID", "Type", "Fingerprint", "Expires At")


def project_key_rows(
    project_keys: list[dict[str, Any]],
) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
    rows = [
        (k["name"], k["user_id"], k.get("type"), k.get("fingerprint"), k.get("expires_at"))
        for k in project_keys
    ]
    return COLUMNS, rows


class ListProjectKeys(command.Lister):
    """List the keys every server of a project gets (compute API 2.106, cloudseed)."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("project", metavar="<project-id>", help="Project ID")
        return parser

    def take_action(
        self, parsed_args: argparse.Namespace
    ) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
        compute = compute_of(self)
        require_live_keys(compute)
        return project_key_rows(get_project_keys(compute, parsed_args.project))


class SetProjectKeys(command.Lister):
    """Replace the keys every server of a project gets (administrators; compute API 2.106,
    cloudseed). The change reaches the project's running servers."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("project", metavar="<project-id>", help="Project ID")
        keys = parser.add_mutually_exclusive_group(required=True)
        keys.add_argument(
            "--key",
            metavar="<user-id>:<key-name>",
            action="append",
            dest="keys",
            help="Key pair NAME of user USER-ID, in order (repeat for several)",
        )
        keys.add_argument("--no-key", action="store_true", help="No project keys")
        parser.add_argument(
            "--key-expires",
            metavar="<user-id>:<key-name>=<timestamp>",
            action="append",
            help="That key (one of the --key) stops being served at TIMESTAMP (ISO 8601)",
        )
        return parser

    def take_action(
        self, parsed_args: argparse.Namespace
    ) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
        keys: list[str] = parsed_args.keys or []
        expiries = parse_expiries(parsed_args.key_expires, option="--key-expires")
        unknown = sorted(set(expiries) - set(keys))
        if unknown:
            raise exceptions.CommandError(
                f"--key-expires names {', '.join(unknown)}, which no --key gives"
            )
        project_keys = []
        for key in keys:
            user_id, sep, name = key.partition(":")
            if not sep or not user_id or not name:
                raise exceptions.CommandError(f"--key takes USER-ID:KEY-NAME, not {key!r}")
            entry = {"name": name, "user_id": user_id}
            if key in expiries:
                entry["expires_at"] = expiries[key]
            project_keys.append(entry)
        compute = compute_of(self)
        require_live_keys(compute)
        return project_key_rows(put_project_keys(compute, parsed_args.project, project_keys))
