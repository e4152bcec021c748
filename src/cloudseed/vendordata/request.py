"""What DynamicJSON posts to each target: the instance's details in Nova's JSON shape."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class VendordataRequest:
    """One instance's details, as the metadata service or the config drive builder has them."""

    project_id: str
    instance_id: str
    image_id: str  # '' for an instance booted from a volume, as Nova stores image_ref
    user_data: str | None  # the base64 text exactly as stored: Nova sends it undecoded
    hostname: str  # without dhcp_domain
    metadata: Mapping[str, str]
    boot_roles: str  # comma-separated roles of the boot request, '' when unknown

    def body(self) -> bytes:
        """The JSON body, keys in Nova's order.

        Metadata keys are sorted so that the same instance data always gives the same bytes:
        the answer cache is keyed on their digest, whatever order the database returned.
        """
        document = {
            "project-id": self.project_id,
            "instance-id": self.instance_id,
            "image-id": self.image_id,
            "user-data": self.user_data,
            "hostname": self.hostname,
            "metadata": dict(sorted(self.metadata.items())),
            "boot-roles": self.boot_roles,
        }
        return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
