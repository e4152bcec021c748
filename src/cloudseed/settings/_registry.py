"""The registry: the Settings object made of every section, the INI name of each section, and
``all_options``, which lists every option with its type, default, help and environment
variable (docs/configuration.md is tested against it)."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The section classes are imported at run time, not for type checking only:
# typing.get_type_hints(Settings) resolves the field annotations in this module's namespace.
from cloudseed.settings._api_sections import (
    ApiDatabaseSection,
    ApiSection,
    DatabaseSection,
    DefaultSection,
    GlanceSection,
    OsloMiddlewareSection,
    QuotaSection,
    WsgiSection,
)
from cloudseed.settings._compute_sections import (
    ComputeSection,
    FakeDriverSection,
    ImageCacheSection,
    KeysSection,
    LibvirtSection,
    QemuSection,
)
from cloudseed.settings._metadata_sections import (
    IdentitySection,
    MetadataSection,
    MetricsSection,
    NeutronSection,
)

ENV_PREFIX = "CLOUDSEED_"


@dataclass(frozen=True)
class Settings:
    default: DefaultSection = field(default_factory=DefaultSection)
    api: ApiSection = field(default_factory=ApiSection)
    quota: QuotaSection = field(default_factory=QuotaSection)
    api_database: ApiDatabaseSection = field(default_factory=ApiDatabaseSection)
    database: DatabaseSection = field(default_factory=DatabaseSection)
    oslo_middleware: OsloMiddlewareSection = field(default_factory=OsloMiddlewareSection)
    glance: GlanceSection = field(default_factory=GlanceSection)
    wsgi: WsgiSection = field(default_factory=WsgiSection)
    fake_driver: FakeDriverSection = field(default_factory=FakeDriverSection)
    neutron: NeutronSection = field(default_factory=NeutronSection)
    metadata: MetadataSection = field(default_factory=MetadataSection)
    libvirt: LibvirtSection = field(default_factory=LibvirtSection)
    qemu: QemuSection = field(default_factory=QemuSection)
    compute: ComputeSection = field(default_factory=ComputeSection)
    image_cache: ImageCacheSection = field(default_factory=ImageCacheSection)
    keys: KeysSection = field(default_factory=KeysSection)
    identity: IdentitySection = field(default_factory=IdentitySection)
    metrics: MetricsSection = field(default_factory=MetricsSection)
    # [keystone_authtoken] and other pass-through sections, exactly as written.
    passthrough: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # What was reported while loading (unknown options); logged by whoever starts the service.
    warnings: tuple[str, ...] = ()

    @property
    def state_dir(self) -> Path:
        return Path(self.default.state_path)

    @property
    def api_database_url(self) -> str:
        return self.api_database.connection or _sqlite_url(self.state_dir / "cloudseed_api.sqlite")

    @property
    def cell_database_url(self) -> str:
        return self.database.connection or _sqlite_url(self.state_dir / "cloudseed_cell1.sqlite")


def _sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


# The INI section name for each attribute of Settings.
SECTIONS: dict[str, str] = {
    "default": "DEFAULT",
    "api": "api",
    "quota": "quota",
    "api_database": "api_database",
    "database": "database",
    "oslo_middleware": "oslo_middleware",
    "glance": "glance",
    "wsgi": "wsgi",
    "fake_driver": "fake_driver",
    "neutron": "neutron",
    "metadata": "metadata",
    "libvirt": "libvirt",
    "qemu": "qemu",
    "compute": "compute",
    "image_cache": "image_cache",
    "keys": "keys",
    "identity": "identity",
    "metrics": "metrics",
}


@dataclass(frozen=True)
class OptionInfo:
    section: str
    name: str
    type: type
    default: Any
    help: str
    choices: tuple[str, ...]
    minimum: int | None
    maximum: int | None
    secret: bool

    @property
    def env_var(self) -> str:
        if self.section == "DEFAULT":
            return f"{ENV_PREFIX}{self.name.upper()}"
        return f"{ENV_PREFIX}{self.section.upper()}__{self.name.upper()}"


def all_options() -> Iterator[OptionInfo]:
    """Every registered option, in declaration order."""
    hints = typing.get_type_hints(Settings)
    for attr, section in SECTIONS.items():
        section_cls = hints[attr]
        field_types = typing.get_type_hints(section_cls)
        for f in dataclasses.fields(section_cls):
            yield OptionInfo(
                section=section,
                name=f.name,
                type=field_types[f.name],
                default=f.default,
                help=f.metadata["help"],
                choices=f.metadata["choices"],
                minimum=f.metadata["minimum"],
                maximum=f.metadata["maximum"],
                secret=f.metadata["secret"],
            )
