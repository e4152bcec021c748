"""The database schema: every model registered per kind of database (``registry``), the
Alembic histories (``migrations/api``, ``migrations/cell``, and ``migrations/nova_metadata``
for the Nova drop-in's own database) and ``cloudseed db sync|check`` (``sync``).

It sits above the domains (it imports all their models) and below the entry points, so
``cloudseed.db`` can stay a plain engine/session layer with no domain imports.
"""
