"""What ``cloudseed serve`` (and every command that runs guests) checks before anything listens.

A configuration that cannot work stops the command with one line per problem, all of them at
once, instead of a worker that logs "listening" and then dies with a traceback, or a service
that starts and fails on the first guest. ``configuration_problems`` is the list; ``preflight``
adds what needs the databases and the optional Keystone extra.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import click

from cloudseed.agent.images import credentials, image_servers
from cloudseed.cli.context import CliContext, DatabaseUnreachable, open_databases
from cloudseed.errors import ConfigError
from cloudseed.programs.run import which
from cloudseed.settings import Settings, split_list

KVM = "/dev/kvm"


def configuration_problems(settings: Settings, *, compute: bool = True) -> list[str]:
    """Each setting, or combination, that would stop the service from working (``compute``:
    this process also runs guests)."""
    problems: list[str] = []
    neutron = settings.neutron
    if neutron.service_metadata_proxy and not neutron.metadata_proxy_shared_secret:
        problems.append(
            "[neutron] service_metadata_proxy = true needs [neutron] "
            "metadata_proxy_shared_secret: without it anyone who reaches the metadata "
            "service could sign requests as any instance"
        )
    if compute and settings.default.compute_driver == "qemu":
        problems += _qemu_problems(settings)
    if compute:
        problems += _image_cache_problems(settings)
    problems += _state_path_problems(settings.state_dir)
    return problems


def _image_cache_problems(settings: Settings) -> list[str]:
    """Where the agent would download images from, and with what (agent/images.py)."""
    if settings.default.compute_driver == "fake" and not split_list(settings.glance.api_servers):
        return []  # no image cache
    try:
        image_servers(settings)
        credentials(settings)
    except ConfigError as exc:
        return [exc.message]
    return []


def _qemu_problems(settings: Settings) -> list[str]:
    problems = []
    if not settings.neutron.service_metadata_proxy:
        # Every guest reaches the metadata service from 127.0.0.1 through its own proxy: only
        # the proxy's signed headers can tell the guests apart.
        problems.append(
            "compute_driver = qemu needs [neutron] service_metadata_proxy = true "
            "(and a metadata_proxy_shared_secret): the guests' metadata proxies sign requests"
        )
    binary = settings.qemu.binary
    if (which(binary) if "/" not in binary else _executable(Path(binary))) is None:
        problems.append(
            f"[qemu] binary {binary!r} is not installed or not executable "
            "(Debian: apt-get install qemu-system-x86)"
        )
    if settings.qemu.accel == "kvm" and not os.access(KVM, os.R_OK | os.W_OK):
        problems.append(f"[qemu] accel = kvm but {KVM} cannot be opened; use accel = auto or tcg")
    return problems


def _executable(path: Path) -> str | None:
    return str(path) if path.is_file() and os.access(path, os.X_OK) else None


def _state_path_problems(state_dir: Path) -> list[str]:
    """The data directory must exist (or be creatable) and be writable."""
    existing = state_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        return [f"[DEFAULT] state_path {str(state_dir)!r} is not a writable directory"]
    return []


def preflight(cli: CliContext, settings: Settings, *, compute: bool = True) -> None:
    """Stop with a message, before binding a port, when serving could not work."""
    problems = configuration_problems(settings, compute=compute)
    if settings.api.auth_strategy == "keystone":
        try:
            import keystonemiddleware.auth_token  # noqa: F401
        except ImportError as exc:
            problems.append(
                "[api] auth_strategy = keystone needs keystonemiddleware, which cannot be "
                f"imported ({exc}): install cloudseed with the keystone extra "
                "(pip install 'cloudseed[keystone]') or set auth_strategy = noauth2"
            )
    if problems:
        raise click.ClickException(
            "the configuration cannot work:\n" + "\n".join(f"  - {p}" for p in problems)
        )
    try:
        with open_databases(cli):
            pass
    except DatabaseUnreachable as exc:
        # An outage at start is not a configuration error: serve, and let /healthz say 503
        # until the database answers (as it does for an outage later on).
        logging.getLogger("cloudseed").warning("%s; the schema was not checked", exc.message)
