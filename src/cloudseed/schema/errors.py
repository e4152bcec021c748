"""Schema errors.

CloudseedError ── SchemaMismatch      a database is not at the newest revision, or differs from
                                   the models; the message says to run ``cloudseed db sync``
"""

from __future__ import annotations

from cloudseed.errors import CloudseedError


class SchemaMismatch(CloudseedError):
    """The live schema is not what the models and migrations say it should be."""
