"""Import every model module, so each database's MetaData is complete.

Alembic's autogenerate and ``cloudseed db check`` compare these against the live schema; a
model module missing here would look like a table to drop.
"""

from __future__ import annotations

from cloudseed.cells import models as _cells  # noqa: F401
from cloudseed.db.base import ApiBase, CellBase
from cloudseed.flavors import models as _flavors  # noqa: F401
from cloudseed.images import models as _images  # noqa: F401
from cloudseed.keypairs import models as _keypairs  # noqa: F401
from cloudseed.networks import models as _networks  # noqa: F401
from cloudseed.quotas import models as _quotas  # noqa: F401
from cloudseed.servers import models as _servers  # noqa: F401

METADATA = {"api": ApiBase.metadata, "cell": CellBase.metadata}
