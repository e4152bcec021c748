"""Readiness's vendordata (2.110; ``[metadata] boot_report_webhook``): a cloud-config part
that turns on cloud-init's ``reporting`` webhook, pointed at the metadata service's
``/openstack/latest/boot_report``, for the servers that opt in. IO-free.

Opting in is the server metadata item ``cloudseed:boot_report=true`` (``openstack server
create --property cloudseed:boot_report=true``), as the qemu driver's SSH forward; with the
setting ``all`` every server gets it, with ``never`` none (the endpoint still takes the events
of guests whose own user data configures the webhook).

Where the part goes follows the login-time check (``login_check.py``): it is added to
vendor_data.json's ``cloud-init`` parts, or to vendor_data2.json's ``cloud-init`` key when
StaticJSON is not a provider (there is no vendor_data.json then), after the operator's parts.
Only the metadata service serves it, never a config drive nor a NoCloud seed: the guest's
events are taken from the metadata service's callers alone. cloud-init reads vendordata's
cloud-config at its network stage, so a new instance's first reported event is of
``init-network``; from the next boot on, ``init-local`` reports too.

The handler is named ``cloudseed``, so a ``reporting`` section of the user's own (merged over
vendordata by cloud-init) keeps its handlers beside it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cloudseed.vendordata import documents

METADATA_ITEM = "cloudseed:boot_report"
NEVER, OPT_IN, ALL = "never", "opt-in", "all"
SCOPES = (NEVER, OPT_IN, ALL)
HANDLER = "cloudseed"
_YES = frozenset({"true", "yes", "on", "1"})
# The user's cloud-config parts keep their values whichever part comes first (as the login
# check's part).
MERGE_HOW = "dict(recurse_array,no_replace)+list(append)"


def cloud_config(endpoint: str) -> str:
    """The ``#cloud-config`` part for a webhook posting to ``endpoint``."""
    return (
        "#cloud-config\n"
        "# cloudseed's boot report (docs/metadata.md#boot-reports): cloud-init posts each step\n"
        "# of the boot to the metadata service, and the compute API shows the server's\n"
        "# bootstrap_status (microversion 2.110).\n"
        f'merge_how: "{MERGE_HOW}"\n'
        "reporting:\n"
        f"  {HANDLER}:\n"
        "    type: webhook\n"
        f"    endpoint: {json.dumps(endpoint)}\n"
    )


class BootReportParts:
    """Whether a server gets the part, and the vendordata documents with it (each kept for
    the last document it was added to: every opted-in guest gets the same bytes)."""

    def __init__(self, *, endpoint: str, scope: str) -> None:
        self.endpoint = endpoint
        self.scope = scope
        self._part = cloud_config(endpoint)
        self._vendor_data: tuple[bytes, bytes] | None = None
        self._vendor_data2: tuple[bytes, bytes] | None = None

    def wanted(self, metadata: Mapping[str, str]) -> bool:
        if self.scope == ALL:
            return True
        if self.scope == NEVER:
            return False
        return metadata.get(METADATA_ITEM, "").strip().lower() in _YES

    def in_vendor_data(self, document: bytes) -> bytes:
        """vendor_data.json with the part among its ``cloud-init`` parts."""
        if self._vendor_data is None or self._vendor_data[0] is not document:
            added = _with_part(documents.parse(document), self._part)
            self._vendor_data = (document, documents.compact(added))
        return self._vendor_data[1]

    def in_vendor_data2(self, document: bytes) -> bytes:
        """vendor_data2.json with the part in its ``cloud-init`` key (added when absent)."""
        if self._vendor_data2 is not None and self._vendor_data2[0] is document:
            return self._vendor_data2[1]
        parsed = documents.parse(document)
        if not isinstance(parsed, dict):
            return document  # not what Vendordata serves; left as it is
        added = {**parsed, "cloud-init": _joined(parsed.get("cloud-init"), self._part)}
        if added["cloud-init"] is None:
            return document
        result = documents.compact(added)
        self._vendor_data2 = (document, result)
        return result


def _joined(value: Any, part: str) -> list[Any] | None:
    """A ``cloud-init`` value with ``part`` after the operator's own; None when cloud-init
    could not use the value anyway (``sources.convert_vendordata`` refuses a dict or a
    number), which is then left alone."""
    if not value:
        return [part]
    if isinstance(value, str):
        return [value, part]
    if isinstance(value, list):
        return [*value, part]
    return None


def _with_part(document: Any, part: str) -> Any:
    """vendor_data.json as cloud-init reads it (a dict's ``cloud-init`` key, or the whole
    document when it is a string or a list) with ``part`` added."""
    if isinstance(document, dict):
        added = _joined(document.get("cloud-init"), part)
        return document if added is None else {**document, "cloud-init": added}
    added = _joined(document, part)
    return document if added is None else added
