"""Alembic environment, configured from code (cloudseed.db.migrate): the caller hands over an
open connection and the target MetaData in ``config.attributes``.

Each kind of database keeps its revision in its own version table and looks only at its own
tables, so a small deployment may put the API and cell schemas in one database.
"""

from alembic import context

config = context.config
connection = config.attributes["connection"]
metadata = config.attributes["metadata"]


def _ours(name, type_, parent_names):
    return type_ != "table" or name in metadata.tables


context.configure(
    connection=connection,
    target_metadata=metadata,
    version_table="alembic_version_api",
    include_name=_ours,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
