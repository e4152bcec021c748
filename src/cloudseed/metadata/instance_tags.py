"""The tags a guest reads of its own server when its metadata options enable
``instance_metadata_tags`` (2.109): EC2's ``meta-data/tags/instance/KEY`` and ``tags`` in
``meta_data.json``. IO-free.

Today they are the server's metadata items, each key a tag with its value, as EC2 shows an
instance's tags (key and value). Nova's server tags (2.26, plain strings) are to join them as
keys with empty values: ``instance_tags`` is the one place to add them.
"""

from __future__ import annotations

from cloudseed.metadata.facts import GuestFacts


def instance_tags(facts: GuestFacts) -> dict[str, str]:
    """Tag -> value for the guest, in key order. Server tags (2.26) are not here yet: once
    the facts carry them, they join as ``{tag: ""}`` (a metadata item of the same key wins, as
    it has a value)."""
    return dict(facts.meta)
