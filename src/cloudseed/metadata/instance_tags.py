"""The tags a guest reads of its own server when its metadata options enable
``instance_metadata_tags`` (2.109): EC2's ``meta-data/tags/instance/KEY`` and ``tags`` in
``meta_data.json``. IO-free.

EC2 shows an instance's tags with their values; a server here has two kinds: its metadata
items (key and value) and its tags (2.26, plain strings), which join as keys with empty values.
Where a tag and a metadata key are the same string, the metadata item wins: it has a value.
"""

from __future__ import annotations

from cloudseed.metadata.facts import GuestFacts


def instance_tags(facts: GuestFacts) -> dict[str, str]:
    """Tag -> value for the guest, sorted by key."""
    merged = dict.fromkeys(facts.tags, "")
    merged.update(facts.meta)
    return dict(sorted(merged.items()))
