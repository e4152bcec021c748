"""One typed settings object, built once at start-up and passed to the app factories.

Precedence, lowest first: defaults < config file < ``CLOUDSEED_*`` environment < command-line
flags. The config file is an INI file laid out like ``nova.conf``: where Nova has an option for
the same thing, the section, name and meaning are Nova's, so an operator can carry a nova.conf
over. Each option is declared once, as a dataclass field with its default and help text
(``option()``); ``docs/configuration.md`` is checked against this registry by a test.

Environment variables are ``CLOUDSEED_<SECTION>__<NAME>`` (``CLOUDSEED_API__MAX_LIMIT``), and
``CLOUDSEED_<NAME>`` for the ``[DEFAULT]`` section (``CLOUDSEED_STATE_PATH``).

Nothing else in cloudseed reads the environment or a config file, and nothing reads settings at
import time.

The package, bottom up: ``_options`` (``option()``, ``Secret``, list and port-range parsing),
the sections grouped by domain (``_api_sections``, ``_compute_sections``,
``_metadata_sections``), ``_registry`` (``Settings``, ``SECTIONS``, ``all_options``) and
``_loading`` (``load_settings``). Everything public is imported from here.
"""

from __future__ import annotations

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
from cloudseed.settings._loading import (
    NON_SETTING_ENV,
    NON_SETTING_ENV_PREFIX,
    PASSTHROUGH_SECTIONS,
    SECRET_PASSTHROUGH_NAME,
    load_settings,
)
from cloudseed.settings._metadata_sections import (
    IdentitySection,
    MetadataSection,
    MetricsSection,
    NeutronSection,
)
from cloudseed.settings._options import Secret, option, parse_port_range, split_list
from cloudseed.settings._registry import (
    ENV_PREFIX,
    SECTIONS,
    OptionInfo,
    Settings,
    all_options,
)

__all__ = [
    "ENV_PREFIX",
    "NON_SETTING_ENV",
    "NON_SETTING_ENV_PREFIX",
    "PASSTHROUGH_SECTIONS",
    "SECRET_PASSTHROUGH_NAME",
    "SECTIONS",
    "ApiDatabaseSection",
    "ApiSection",
    "ComputeSection",
    "DatabaseSection",
    "DefaultSection",
    "FakeDriverSection",
    "GlanceSection",
    "IdentitySection",
    "ImageCacheSection",
    "KeysSection",
    "LibvirtSection",
    "MetadataSection",
    "MetricsSection",
    "NeutronSection",
    "OptionInfo",
    "OsloMiddlewareSection",
    "QemuSection",
    "QuotaSection",
    "Secret",
    "Settings",
    "WsgiSection",
    "all_options",
    "load_settings",
    "option",
    "parse_port_range",
    "split_list",
]
