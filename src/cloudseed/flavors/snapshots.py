"""The flavor as an instance keeps it: a copy taken at create (``service.snapshot``), stored as
a JSON document in ``instance_extra.flavor``, so later edits of the flavor change no server.

IO-free, and the one place that turns the stored document into the typed value and back.
The document uses the compute API's names (``id``, ``ram``, ``disk``, ``ephemeral``); the
value uses those of Nova's Flavor object (``flavorid``, ``memory_mb``, ``root_gb``,
``ephemeral_gb``), like the registry's columns (``models.Flavor``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FlavorSnapshot:
    flavorid: str
    name: str
    vcpus: int
    memory_mb: int
    root_gb: int  # 0: the image's own size, as in Nova
    ephemeral_gb: int = 0
    swap: int = 0  # MiB

    def stored(self) -> dict[str, object]:
        """The stored document's fields, in its order."""
        return {
            "id": self.flavorid,
            "name": self.name,
            "vcpus": self.vcpus,
            "ram": self.memory_mb,
            "disk": self.root_gb,
            "ephemeral": self.ephemeral_gb,
            "swap": self.swap,
        }

    def document(self) -> str:
        return json.dumps(self.stored())

    @classmethod
    def from_document(cls, document: str | None) -> FlavorSnapshot | None:
        """The value of a stored document; None for an instance that has none (an empty
        one included). cloudseed writes every field; a field a document lacks reads as
        0 (or "")."""
        fields: dict[str, Any] = json.loads(document) if document else {}
        if not fields:
            return None
        return cls(
            flavorid=_text(fields.get("id")),
            name=_text(fields.get("name")),
            vcpus=_number(fields.get("vcpus")),
            memory_mb=_number(fields.get("ram")),
            root_gb=_number(fields.get("disk")),
            ephemeral_gb=_number(fields.get("ephemeral")),
            swap=_number(fields.get("swap")),
        )


def _text(value: object) -> str:
    return "" if value is None else str(value)


def _number(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
