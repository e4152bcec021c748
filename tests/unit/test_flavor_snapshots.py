"""The flavor an instance keeps (flavors/snapshots.py): its stored document and back."""

from __future__ import annotations

import json

from cloudseed.flavors.snapshots import FlavorSnapshot

TINY = FlavorSnapshot(
    flavorid="1", name="m1.tiny", vcpus=1, memory_mb=512, root_gb=1, ephemeral_gb=2, swap=64
)


def test_the_document_keeps_the_compute_api_names_in_order() -> None:
    # The document servers made before the typed value have: the same bytes.
    assert TINY.document() == json.dumps(
        {
            "id": "1",
            "name": "m1.tiny",
            "vcpus": 1,
            "ram": 512,
            "disk": 1,
            "ephemeral": 2,
            "swap": 64,
        }
    )
    assert FlavorSnapshot.from_document(TINY.document()) == TINY


def test_no_document_is_no_flavor() -> None:
    assert FlavorSnapshot.from_document(None) is None
    assert FlavorSnapshot.from_document("") is None
    assert FlavorSnapshot.from_document("{}") is None


def test_a_field_a_document_lacks_reads_as_zero() -> None:
    partial = FlavorSnapshot.from_document('{"id": "1", "name": "m1.tiny", "vcpus": 1}')
    assert partial == FlavorSnapshot(flavorid="1", name="m1.tiny", vcpus=1, memory_mb=0, root_gb=0)
