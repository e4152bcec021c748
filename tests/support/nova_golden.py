"""The Nova 34 golden answers (tests/unit/nova_metadata/nova34_golden.json): eight instances
made by Nova 34's objects, as their database rows, with what Nova's metadata API answered for
each path; and an instance's facts as the drop-in reads them from those rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cloudseed.nova_metadata.facts import Ec2Ids, InstanceFacts, facts_from_rows

GOLDEN_FILE = Path(__file__).resolve().parents[1] / "unit" / "nova_metadata" / "nova34_golden.json"
GOLDEN: dict[str, Any] = json.loads(GOLDEN_FILE.read_text())


def facts_of(shape: str) -> InstanceFacts:
    rows = GOLDEN[shape]["rows"]
    return facts_from_rows(
        rows["instance"],
        extra=rows["extra"],
        metadata=[tuple(item) for item in rows["metadata"]],
        system_metadata=dict(rows["system_metadata"]),
        network_info=rows["network_info"],
        bdms=rows["bdms"],
        ec2=Ec2Ids(**rows["ec2"]),
    )


# The columns of an ``instances`` row the drop-in reads, with nothing in them: for unit tests
# that build an instance's facts from a few rows of their own.
BARE_INSTANCE_ROW: dict[str, Any] = {
    "uuid": "u",
    "project_id": "p",
    "hostname": "h",
    "display_name": "h",
    "launch_index": 0,
    "availability_zone": None,
    "reservation_id": "r",
    "image_ref": "",
    "key_name": None,
    "key_data": None,
    "user_data": None,
    "root_device_name": None,
}
