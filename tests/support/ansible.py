"""Ansible with the ``openstack.cloud`` collection, in a venv of its own under ``.cache``.

The ``ansible`` package from PyPI bundles the community collections, ``openstack.cloud`` among
them (ansible 12.3: openstack.cloud 2.5), so no Galaxy server is needed; openstacksdk is the
collection's own requirement (pinned below). ``ansible_venv()`` builds it once (tool_venv.py: pinned
requirements, a marker, a lock) and returns it; ``AnsibleUnavailable`` when the registry cannot
be reached (callers skip, or fail under ``CLOUDSEED_REQUIRE_DBS=1``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tests.support import osc, tool_venv

VENV_DIR = tool_venv.CACHE_DIR / "ansible-venv"
# openstack.cloud 2.5 reads ``openstack.version``, which openstacksdk stopped importing in
# 4.15 ("module 'openstack' has no attribute 'version'"): 4.14 is the newest that works with it.
REQUIREMENTS = ("ansible==12.3.0", "openstacksdk==4.14.0")
INSTALL_TIMEOUT = 900  # seconds; the ansible package is large (all community collections)
COLLECTION = Path("ansible_collections") / "openstack" / "cloud"


class AnsibleUnavailable(tool_venv.Unavailable):
    """Ansible could not be installed because the package registry is unreachable."""


def playbook_binary(venv: Path) -> Path:
    return venv / "bin" / "ansible-playbook"


def _works(venv: Path) -> bool:
    if not tool_venv.has_marker(venv, REQUIREMENTS):
        return False
    if not any((site / COLLECTION).is_dir() for site in venv.glob("lib/python*/site-packages")):
        return False
    return tool_venv.answers(venv, playbook_binary(venv), "--version")


def _build(venv: Path) -> None:
    started = time.monotonic()
    tool_venv.build(
        venv,
        REQUIREMENTS,
        timeout=INSTALL_TIMEOUT,
        unavailable=AnsibleUnavailable,
        network_errors=osc.NETWORK_ERRORS,
    )
    if not _works(venv):
        raise RuntimeError(f"{playbook_binary(venv)} does not work after install")
    print(f"ansible: venv built in {time.monotonic() - started:.1f} s", file=sys.stderr)


def ansible_venv() -> Path:
    return tool_venv.cached(VENV_DIR, _works, _build)
