"""What a create request asks for, as the route parsed and checked it from the body
(``servers/api/servers.py``): ``creation.service.create_servers`` resolves it and writes the
servers, ``creation.rows`` writes each one's rows from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cloudseed.servers.creation import personality
from cloudseed.servers.history.bootstrap import Actor
from cloudseed.servers.live_keys.sets import KeyRequest
from cloudseed.servers.metadata_options.options import UNSET, MetadataOptions


@dataclass(frozen=True)
class CreateRequest:
    name: str
    flavor_ref: str
    image_ref: str
    actor: Actor
    roles: frozenset[str]
    key_name: str | None = None
    # 2.106: the server's own keys (key_name is the same as a one-element list), and whether
    # it opts out of its project's keys.
    key_names: tuple[KeyRequest, ...] | None = None
    block_project_keys: bool = False
    user_data: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    config_drive: bool = False
    hostname: str | None = None
    description: str | None = None
    availability_zone: str | None = None
    access_ip_v4: str | None = None
    access_ip_v6: str | None = None
    # None or "auto": every registered network's first one; "none": no port. An item's
    # ``tag`` (2.32, 2.42) is its port's device role tag.
    networks: list[dict[str, Any]] | str | None = None
    # Server tags (2.52), checked by the schema (servers/tags.py).
    tags: tuple[str, ...] = ()
    # The request's max_count; as many as the quota allows down to min_count are created.
    count: int = 1
    min_count: int = 1
    admin_pass: str | None = None
    # Personality files (path, base64 text): checked here, then carried to the build in its
    # operation's payload, which drops them when the operation ends.
    files: personality.Encoded = ()
    # An admin's choice of compute host and node (2.74), also "zone:host:node" in the zone.
    requested_host: str | None = None
    requested_node: str | None = None
    # ``os:scheduler_hints`` as kept (servers/creation/scheduler_hints.py).
    scheduler_hints: dict[str, list[str]] = field(default_factory=dict)
    # Security group names, checked (servers/lifecycle/security_groups.py); none: "default".
    security_groups: list[str] = field(default_factory=list)
    # 2.109: the metadata options the request sets (the project's defaults fill the rest).
    metadata_options: MetadataOptions = UNSET
