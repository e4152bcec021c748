"""Several ``--key-name`` on ``openstack server create`` and ``openstack server rebuild``.

The stock option is single-valued (argparse's store: the last one wins). The hook does not add
a second option next to it: it makes the stock ``--key-name`` repeatable, so the command a user
would guess (``--key-name a --key-name b``) is the one that works, and ``openstack help`` shows
one option. cliff gives a hook the command's parser before the stock options are added; the
hook registers the parser's default argparse action as a function that builds ``--key-name``
as ``_RepeatableKeyName`` (every value in ``cloudseed_key_names``, the first left in
``key_name``) and any other option as argparse would. With one ``--key-name`` and no
``--key-expires`` nothing else changes: the stock command sends ``key_name`` at its own
microversion, as without the plugin.

With several names, or ``--key-expires NAME=TIMESTAMP``, the request must be the 2.106 one,
with ``key_names`` instead of ``key_name``. The stock command builds and sends that request
itself (openstacksdk's ``create_server`` / ``rebuild_server``), and a hook cannot change its
arguments, so ``before()`` wraps the compute proxy's ``post`` for this run: the first create
(``POST /servers``) or rebuild action it sends gets ``key_names`` and microversion 2.106, and
the wrapper then removes itself. Everything else the stock command does (the other options,
``--wait``, the output) is unchanged. A 2.100 create or rebuild body is valid at 2.106 (2.101 to
2.106 only add fields).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from cliff import hooks
from osc_lib import exceptions

from cloudseed_osc._compute import compute_of
from cloudseed_osc._keys import (
    KEYS_MICROVERSION,
    KeyEntry,
    key_entries,
    parse_expiries,
    require_live_keys,
)

if TYPE_CHECKING:
    from openstack.compute.v2._proxy import Proxy

NAMES_DEST = "cloudseed_key_names"
EXPIRES_DEST = "cloudseed_key_expires"
REPEAT_HELP = (
    " Repeat the option for several keys: from the second one, or with --key-expires, the "
    "request uses compute API microversion 2.106 (cloudseed) and sends key_names."
)


class _RepeatableKeyName(argparse._StoreAction):
    """``--key-name`` given any number of times: every name in ``cloudseed_key_names``, the
    first in the stock ``key_name`` (what the stock command sends when there is only one)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        names = [*(getattr(namespace, NAMES_DEST, None) or []), str(values)]
        setattr(namespace, NAMES_DEST, names)
        setattr(namespace, self.dest, names[0])


def _key_name_or_store(**kwargs: Any) -> argparse.Action:
    if "--key-name" in kwargs.get("option_strings", ()):
        kwargs["help"] = (kwargs.get("help") or "Key pair").rstrip(". ") + "." + REPEAT_HELP
        return _RepeatableKeyName(**kwargs)
    return argparse._StoreAction(**kwargs)


class KeyNamesHook(hooks.CommandHook):
    """Makes ``--key-name`` repeatable and adds ``--key-expires`` (base of the two hooks)."""

    request_key = ""  # "server" for create, "rebuild" for the rebuild action

    def get_parser(self, parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        # cliff calls hooks with the command's bare parser, before the stock command adds its
        # own options: the stock --key-name does not exist yet. argparse builds every option
        # given without ``action=`` from the parser's "action" registry entry for None (shared
        # with its groups), so that entry becomes a function that builds --key-name as
        # _RepeatableKeyName and every other such option as argparse does.
        parser.register("action", None, _key_name_or_store)
        parser.set_defaults(**{NAMES_DEST: None})
        parser.add_argument(
            "--key-expires",
            metavar="<name>=<timestamp>",
            action="append",
            dest=EXPIRES_DEST,
            help="The key NAME (one of the --key-name) stops being served to the server at "
            "TIMESTAMP (ISO 8601, e.g. 2030-01-02T03:04:05Z). Repeat for several keys. "
            "Compute API microversion 2.106 (cloudseed).",
        )
        return parser

    def get_epilog(self) -> str | None:
        return None

    def before(self, parsed_args: argparse.Namespace) -> argparse.Namespace:
        names: list[str] = getattr(parsed_args, NAMES_DEST, None) or []
        expiries = parse_expiries(getattr(parsed_args, EXPIRES_DEST, None), option="--key-expires")
        if len(names) <= 1 and not expiries:
            return parsed_args
        unknown = sorted(set(expiries) - set(names))
        if unknown:
            raise exceptions.CommandError(
                f"--key-expires names {', '.join(unknown)}, which no --key-name gives"
            )
        compute = compute_of(self.cmd)
        require_live_keys(compute)
        _send_key_names_once(compute, self.request_key, key_entries(names, expiries))
        return parsed_args

    def after(self, parsed_args: argparse.Namespace, return_code: int) -> int:
        return return_code


class CreateKeyNamesHook(KeyNamesHook):
    """``openstack server create --key-name A --key-name B [--key-expires A=TS]``."""

    request_key = "server"


class RebuildKeyNamesHook(KeyNamesHook):
    """``openstack server rebuild --key-name A --key-name B [--key-expires A=TS]``."""

    request_key = "rebuild"


def _send_key_names_once(compute: Proxy, request_key: str, key_names: list[KeyEntry]) -> None:
    """Wrap ``compute.post`` (an instance attribute, this run only) so that the next request
    whose JSON body is ``{request_key: {...}}`` carries ``key_names`` at 2.106."""
    stock_post: Callable[..., Any] = compute.post

    def post(url: str, *args: Any, **kwargs: Any) -> Any:
        body = kwargs.get("json")
        if not (isinstance(body, dict) and isinstance(body.get(request_key), dict)):
            return stock_post(url, *args, **kwargs)
        del compute.post  # once: back to the proxy's own method
        fields = {k: v for k, v in body[request_key].items() if k != "key_name"}
        kwargs["json"] = {**body, request_key: {**fields, "key_names": key_names}}
        kwargs["microversion"] = KEYS_MICROVERSION
        return stock_post(url, *args, **kwargs)

    compute.post = post  # type: ignore[method-assign]
