"""``openstack server wait --ready SERVER``: wait until the server's guest says its boot is done
(compute API 2.110, cloudseed's readiness).

A new command in ``openstack.compute.v2``, as ``server known-hosts``. It polls the server view
at 2.110 and reads ``bootstrap_status``, which the guest's cloud-init reports through the
metadata service (cloud-init's reporting webhook, turned on by vendordata for servers created
with ``--property cloudseed:boot_report=true``; or its phone_home). Exits 0 once the status is
``done``; otherwise a CommandError (exit 1) saying why: the boot failed (naming the module
cloud-init reported failed), the server went to ERROR or was deleted, or ``--timeout`` ran
out. ``--ready`` is the one condition there is: it names what is waited for, so that other
conditions can come later without changing what this spelling means.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from osc_lib import exceptions
from osc_lib.command import command

from cloudseed_osc._compute import compute_of, fault_message, require_microversion

READINESS_MICROVERSION = "2.110"
UNSUPPORTED = "this cloud does not report whether servers are ready"


class ServerWait(command.Command):
    """Wait until a server's guest reports its boot done (cloudseed, compute API 2.110)."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("server", metavar="<server>", help="Server (name or ID)")
        parser.add_argument(
            "--ready",
            action="store_true",
            help="Wait until the guest reports its boot done (cloud-init's modules-final "
            "stage, or its phone_home); fail when it reports a failed module.",
        )
        parser.add_argument(
            "--timeout",
            metavar="<seconds>",
            type=float,
            default=1800.0,
            help="Give up after this many seconds (default: 1800).",
        )
        parser.add_argument(
            "--interval",
            metavar="<seconds>",
            type=float,
            default=2.0,
            help="Seconds between two looks at the server (default: 2).",
        )
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> None:
        if not parsed_args.ready:
            raise exceptions.CommandError("Say what to wait for: --ready.")
        if parsed_args.timeout < 0 or parsed_args.interval <= 0:
            raise exceptions.CommandError("--timeout must be >= 0 and --interval > 0.")
        compute = compute_of(self)
        require_microversion(compute, READINESS_MICROVERSION, UNSUPPORTED)
        server_id = compute.find_server(parsed_args.server, ignore_missing=False).id
        deadline = time.monotonic() + parsed_args.timeout
        while True:
            server = _server(compute, server_id)
            status = server.get("bootstrap_status") or {}
            state = status.get("status")
            if state == "done":
                self.app.stdout.write(f"Server {server_id} is ready.\n")
                return
            if state == "failed":
                raise exceptions.CommandError(
                    f"Server {server_id}'s boot failed: cloud-init reported module "
                    f"{status.get('failed_module')!r} failed."
                )
            if server.get("status") == "ERROR":
                raise exceptions.CommandError(f"Server {server_id} is in ERROR.")
            left = deadline - time.monotonic()
            if left <= 0:
                raise exceptions.CommandError(
                    f"Timed out after {parsed_args.timeout:g} s waiting for server "
                    f"{server_id} to be ready: its boot is {state or 'unknown'}."
                )
            time.sleep(min(parsed_args.interval, left))


def _server(compute: Any, server_id: str) -> dict[str, Any]:
    response = compute.get(f"/servers/{server_id}", microversion=READINESS_MICROVERSION)
    if response.status_code == 404:
        raise exceptions.CommandError(f"Server {server_id} is gone.")
    if response.status_code >= 400:
        raise exceptions.CommandError(f"{fault_message(response)} (HTTP {response.status_code})")
    try:
        server: dict[str, Any] = json.loads(response.text)["server"]
    except (ValueError, KeyError, TypeError):
        raise exceptions.CommandError(f"{UNSUPPORTED}: unexpected answer to GET server") from None
    if "bootstrap_status" not in server:
        raise exceptions.CommandError(f"{UNSUPPORTED}: no bootstrap_status at 2.110")
    return server
