"""What to put into an image, and how: plain values, no IO.

``InjectionRequest`` is the data (key, password, metadata, network text, files);
``InjectionOptions`` is the operator's policy from ``[libvirt]`` (which items are allowed, which
partition, which handlers). The service applies the policy to the request, so a caller can
always build the full request and let the settings decide.
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cloudseed.injection.errors import InvalidInjectionRequest
from cloudseed.injection.network import render_interfaces

if TYPE_CHECKING:
    from cloudseed.settings import Settings

HANDLER_NAMES = ("guestfs", "debugfs", "loop", "nbd")
IMAGE_FORMATS = ("raw", "qcow2")
PARTITION_OFF = -2
PARTITION_INSPECT = -1
PARTITION_WHOLE_DISK = 0


def guest_path(path: str) -> str:
    """A guest path made absolute and normal; refuses ``..`` and characters no tool quotes.

    Nova takes ``meta.js`` to mean ``/meta.js``; we do the same for every relative path.
    ``..`` is refused rather than collapsed, because what it climbs over could be a symlink.
    """
    if not path or any(ord(c) < 32 or c == "\x7f" for c in path):
        raise InvalidInjectionRequest(f"Guest path {path!r} is empty or has control characters.")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise InvalidInjectionRequest(f"Guest path {path!r} may not contain '..'.")
    if not parts:
        raise InvalidInjectionRequest(f"Guest path {path!r} names the root directory.")
    return posixpath.join("/", *parts)


@dataclass(frozen=True)
class InjectionRequest:
    """Everything that may be written into one guest; ``None`` or empty means "not this"."""

    key_data: str | None = None
    admin_password: str | None = field(default=None, repr=False)  # never shown
    metadata: Mapping[str, str] = field(default_factory=dict)
    # /etc/network/interfaces text; ``network.render_interfaces`` makes one from ports.
    network_config: str | None = None
    files: tuple[tuple[str, bytes], ...] = ()

    def __post_init__(self) -> None:
        normalised = tuple((guest_path(path), data) for path, data in self.files)
        object.__setattr__(self, "files", normalised)
        if self.admin_password is not None and (
            "\n" in self.admin_password or "\r" in self.admin_password
        ):
            # The hash is made by a tool that reads the password as one line.
            raise InvalidInjectionRequest("The admin password may not contain a line break.")
        if self.key_data is not None and not self.key_data.strip():
            raise InvalidInjectionRequest("The key is empty.")

    @classmethod
    def for_instance(
        cls,
        *,
        key_data: str | None,
        ports: Sequence[Mapping[str, object]] = (),
        admin_password: str | None = None,
        metadata: Mapping[str, str] | None = None,
        files: tuple[tuple[str, bytes], ...] = (),
        include_network: bool = False,
    ) -> InjectionRequest:
        """The request create and rebuild make: the instance's key and, with
        ``include_network`` (Nova's ``flat_injected``, off by default), an interfaces file
        rendered from its ports. Plain values, not the driver's GuestSpec: injection sits
        below compute and does not import it."""
        return cls(
            key_data=key_data or None,
            admin_password=admin_password,
            metadata=dict(metadata or {}),
            files=files,
            network_config=render_interfaces(ports) if include_network else None,
        )

    @property
    def is_empty(self) -> bool:
        return not (
            self.key_data
            or self.admin_password is not None
            or self.metadata
            or self.network_config
            or self.files
        )

    def allowed_by(self, options: InjectionOptions) -> InjectionRequest:
        """The request less the items the operator did not enable (Nova's inject_key and
        inject_password); metadata, network and files are always allowed."""
        return dataclasses.replace(
            self,
            key_data=self.key_data if options.inject_key else None,
            admin_password=self.admin_password if options.inject_password else None,
        )


@dataclass(frozen=True)
class InjectionOptions:
    """``[libvirt]`` injection settings, checked; build with ``from_settings`` or directly."""

    partition: int = PARTITION_OFF
    inject_key: bool = False
    inject_password: bool = False
    handlers: tuple[str, ...] = HANDLER_NAMES
    # A qcow2 overlay reads its backing file; only the driver's own images may have one.
    allow_backing_file: bool = False
    # Seconds for each external tool call (qemu-img, debugfs, mount, appliance launch).
    tool_timeout: float = 300.0

    def __post_init__(self) -> None:
        if self.partition < PARTITION_OFF:
            raise InvalidInjectionRequest(f"Partition {self.partition} is not -2, -1, 0 or N.")
        unknown = [h for h in self.handlers if h not in HANDLER_NAMES]
        if unknown:
            raise InvalidInjectionRequest(
                f"Unknown image handler(s) {', '.join(unknown)}; known: {', '.join(HANDLER_NAMES)}."
            )

    @property
    def enabled(self) -> bool:
        return self.partition != PARTITION_OFF

    @classmethod
    def from_settings(cls, settings: Settings, **changes: object) -> InjectionOptions:
        from cloudseed.settings import split_list

        libvirt = settings.libvirt
        options = cls(
            partition=libvirt.inject_partition,
            inject_key=libvirt.inject_key,
            inject_password=libvirt.inject_password,
            handlers=tuple(split_list(libvirt.inject_handlers)),
        )
        return dataclasses.replace(options, **changes)  # type: ignore[arg-type]


def check_format(fmt: str) -> str:
    if fmt not in IMAGE_FORMATS:
        raise InvalidInjectionRequest(
            f"Image format {fmt!r} is not supported; use {' or '.join(IMAGE_FORMATS)}."
        )
    return fmt
