"""``openstack server key list | add | remove | set``: a running server's own keys (2.106).

Each is one or two requests at compute API microversion 2.106, through the ``openstack``
command's own compute connection (``client_manager.sdk_connection``): ``list`` reads the server
view; ``set`` replaces the server's own keys with ``PUT /servers/{id}`` ``key_names``; ``add``
and ``remove`` read the server's own keys (with their expiries), change that list and PUT it
back, leaving out the server's expired keys (no longer served, and the API refuses an
``expires_at`` in the past). All four print the key table of the server as the API shows it
afterwards.

The race: the API has no ETag or revision on servers, so a change made by someone else between
``add``/``remove``'s read and its PUT is overwritten (last writer wins). The window is one
round trip; the table printed after the PUT is the server's keys as they are, so a lost change
shows there. ``set`` has no read, and so no window: it states the whole list.
"""

from __future__ import annotations

import argparse
from typing import Any

from osc_lib import exceptions
from osc_lib.command import command

from cloudseed_osc._compute import compute_of
from cloudseed_osc._keys import (
    get_server,
    kept_entries,
    key_entries,
    own_keys,
    parse_expiries,
    put_key_names,
    require_live_keys,
)

COLUMNS = ("Name", "Fingerprint", "Source", "Expires At", "Expired", "Delivery")


def key_rows(server: dict[str, Any]) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
    """The ``keys`` of a 2.106 server view as a table: own keys first, then the project's."""
    rows = []
    for key in server.get("keys", []):
        delivery = key.get("delivery") or {}
        state = delivery.get("state") or ""
        detail = delivery.get("via") or delivery.get("reason")
        rows.append(
            (
                key["name"],
                key.get("fingerprint"),
                key.get("source"),
                key.get("expires_at"),
                key.get("expired"),
                f"{state} ({detail})" if detail else state,
            )
        )
    return COLUMNS, rows


class _ServerKeyCommand(command.Lister):
    """Shared: the ``server`` argument, the 2.106 check, and the table at the end."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("server", metavar="<server>", help="Server (name or ID)")
        return parser

    def take_action(
        self, parsed_args: argparse.Namespace
    ) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
        compute = compute_of(self)
        require_live_keys(compute)
        server_id = compute.find_server(parsed_args.server, ignore_missing=False).id
        return key_rows(self.change(parsed_args, compute, server_id))

    def change(self, parsed_args: argparse.Namespace, compute: Any, server_id: str) -> Any:
        return get_server(compute, server_id)


class ListServerKeys(_ServerKeyCommand):
    """List a server's keys: its own, then its project's (compute API 2.106, cloudseed)."""


class AddServerKey(_ServerKeyCommand):
    """Add a key pair to a running server's keys (compute API 2.106, cloudseed)."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("key", metavar="<key-name>", help="Key pair to add (yours)")
        parser.add_argument(
            "--expires-at",
            metavar="<timestamp>",
            help="The key stops being served at this time (ISO 8601, e.g. "
            "2030-01-02T03:04:05Z). For a key the server already has, changes its expiry.",
        )
        return parser

    def change(self, parsed_args: argparse.Namespace, compute: Any, server_id: str) -> Any:
        keys = own_keys(get_server(compute, server_id))
        present = [k for k in keys if k["name"] == parsed_args.key]
        if present and parsed_args.expires_at is None:
            raise exceptions.CommandError(
                f"Server {parsed_args.server} already has key {parsed_args.key}"
            )
        if present:
            present[0].update(expires_at=parsed_args.expires_at, expired=False)
        else:
            keys.append(
                {"name": parsed_args.key, "expires_at": parsed_args.expires_at, "expired": False}
            )
        return put_key_names(compute, server_id, kept_entries(keys))


class RemoveServerKey(_ServerKeyCommand):
    """Remove a key pair from a running server's own keys (compute API 2.106, cloudseed)."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("key", metavar="<key-name>", help="Key pair to remove")
        return parser

    def change(self, parsed_args: argparse.Namespace, compute: Any, server_id: str) -> Any:
        keys = own_keys(get_server(compute, server_id))
        kept = [k for k in keys if k["name"] != parsed_args.key]
        if len(kept) == len(keys):
            raise exceptions.CommandError(
                f"Server {parsed_args.server} has no key {parsed_args.key} of its own"
            )
        return put_key_names(compute, server_id, kept_entries(kept))


class SetServerKeys(_ServerKeyCommand):
    """Replace a running server's own keys (compute API 2.106, cloudseed)."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        keys = parser.add_mutually_exclusive_group(required=True)
        keys.add_argument(
            "--key",
            metavar="<key-name>",
            action="append",
            dest="keys",
            help="Key pair the server keeps or gets, in order (repeat for several)",
        )
        keys.add_argument(
            "--no-key",
            action="store_true",
            help="Remove every key of the server's own (its project's keys stay)",
        )
        parser.add_argument(
            "--key-expires",
            metavar="<name>=<timestamp>",
            action="append",
            help="The key NAME (one of the --key) stops being served at TIMESTAMP (ISO 8601)",
        )
        return parser

    def change(self, parsed_args: argparse.Namespace, compute: Any, server_id: str) -> Any:
        names: list[str] = parsed_args.keys or []
        expiries = parse_expiries(parsed_args.key_expires, option="--key-expires")
        unknown = sorted(set(expiries) - set(names))
        if unknown:
            raise exceptions.CommandError(
                f"--key-expires names {', '.join(unknown)}, which no --key gives"
            )
        return put_key_names(compute, server_id, key_entries(names, expiries))
