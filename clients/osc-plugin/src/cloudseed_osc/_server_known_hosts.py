"""``openstack server known-hosts SERVER``: the server's SSH host keys as ready ``known_hosts``
lines, so that the first ``ssh`` to it can run with ``StrictHostKeyChecking=yes``.

A new command, not a hook: cliff loads it from the ``openstack.compute.v2`` entry point
namespace, where python-openstackclient finds the compute commands. The keys come from
cloudseed's ``GET /servers/{id}/host-keys`` (an extension at every microversion, so the request
names none); the host names are the server's addresses as the API lists them, plus any
``--host`` the user adds (the compute API does not show a cloudseed SSH forward: ``cloudseed
known-hosts`` on a node with the databases prints that one too).

Each line is ``HOSTS TYPE BASE64`` with the hosts comma-separated, as OpenSSH writes them.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from osc_lib import exceptions
from osc_lib.command import command

from cloudseed_osc._compute import compute_of, fault_message

NOT_SUPPORTED = "this cloud does not publish host keys"


class ServerKnownHosts(command.Command):
    """Print known_hosts lines for a server's SSH host keys (cloudseed)."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("server", metavar="<server>", help="Server (name or ID)")
        parser.add_argument(
            "--host",
            metavar="<host>",
            action="append",
            dest="hosts",
            default=[],
            help="Another name the server is reached by, written as known_hosts writes it "
            "(e.g. vm1.example.org or [192.0.2.1]:2222); repeat for more.",
        )
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> None:
        compute = compute_of(self)
        server = compute.find_server(parsed_args.server, ignore_missing=False)
        response = compute.get(f"/servers/{server.id}/host-keys")
        if response.status_code == 404:
            # The server was just found, so a 404 here is the URL: a cloud without it.
            raise exceptions.CommandError(f"{NOT_SUPPORTED} ({fault_message(response)}).")
        if response.status_code >= 400:
            raise exceptions.CommandError(
                f"{fault_message(response)} (HTTP {response.status_code})"
            )
        keys = _keys_of(response.text)
        if not keys:
            raise exceptions.CommandError(
                f"No host keys are recorded for server {server.id} yet: its guest has not "
                "phoned home (cloud-init's phone_home module) and its console shows none."
            )
        hosts = _unique([*addresses_of(server.addresses or {}), *parsed_args.hosts])
        if not hosts:
            raise exceptions.CommandError(
                f"Server {server.id} has no address; name one with --host."
            )
        for key in keys:
            self.app.stdout.write(f"{','.join(hosts)} {key}\n")


def addresses_of(addresses: dict[str, Any]) -> list[str]:
    """Every address of the server's ``addresses`` (network name -> list of ports), in order."""
    found: list[str] = []
    for ports in addresses.values():
        for port in ports or ():
            address = port.get("addr") if isinstance(port, dict) else None
            if isinstance(address, str) and address:
                found.append(address)
    return found


def _keys_of(text: str) -> list[str]:
    """The ``key`` of every entry of the body (``TYPE BASE64``), or a CommandError."""
    try:
        body: Any = json.loads(text)
        entries = body["host_keys"]
        return [str(entry["key"]) for entry in entries]
    except (ValueError, KeyError, TypeError):
        raise exceptions.CommandError(
            f"{NOT_SUPPORTED}: unexpected answer to GET host-keys"
        ) from None


def _unique(names: list[str]) -> list[str]:
    return list(dict.fromkeys(names))
