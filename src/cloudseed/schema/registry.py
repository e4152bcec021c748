"""Every model module imported, so each database's MetaData is complete.

Alembic's autogenerate and ``cloudseed db check`` compare these against the live schema; a
model module missing here would look like a table to drop. This is the one module that knows
all domains' models, which is why it lives above them and not in ``cloudseed.db``.
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy import MetaData

from cloudseed.cells import models as _cells  # noqa: F401
from cloudseed.db.base import NAMING_CONVENTION, ApiBase, CellBase
from cloudseed.flavors import models as _flavors  # noqa: F401
from cloudseed.hostkeys import models as _hostkeys  # noqa: F401
from cloudseed.hosts import models as _hosts  # noqa: F401
from cloudseed.identity import models as _identity  # noqa: F401
from cloudseed.images import models as _images  # noqa: F401
from cloudseed.keypairs import models as _keypairs  # noqa: F401
from cloudseed.networks import models as _networks  # noqa: F401
from cloudseed.quotas import models as _quotas  # noqa: F401
from cloudseed.servers import models as _servers  # noqa: F401
from cloudseed.servers.metadata_options import models as _metadata_options  # noqa: F401
from cloudseed.servers.notices import models as _notices  # noqa: F401
from cloudseed.servers.readiness import models as _readiness  # noqa: F401

Kind = Literal["api", "cell", "nova_metadata"]

# The Nova drop-in's own small database ([cloudseed_metadata] connection in nova.conf): the
# identity signing keys alone, the same table as in cloudseed's API database, so the same
# models and service functions (identity/service.py) work on it.
NOVA_METADATA = MetaData(naming_convention=NAMING_CONVENTION)
ApiBase.metadata.tables["identity_keys"].to_metadata(NOVA_METADATA)

METADATA: dict[Kind, MetaData] = {
    "api": ApiBase.metadata,
    "cell": CellBase.metadata,
    "nova_metadata": NOVA_METADATA,
}
