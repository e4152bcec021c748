"""The Alembic environment both histories share, configured from code
(cloudseed.schema.sync): the caller hands over an open connection, the target MetaData and the
version table in ``config.attributes``.

Each kind of database keeps its revision in its own version table and looks only at its own
tables, so a small deployment may put the API and cell schemas in one database.
"""

from __future__ import annotations

from typing import Any

from alembic import context


def run() -> None:
    config = context.config
    connection = config.attributes["connection"]
    metadata = config.attributes["metadata"]

    def ours(name: str | None, type_: str, _parent_names: Any) -> bool:
        return type_ != "table" or name in metadata.tables

    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=config.attributes["version_table"],
        include_name=ours,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()
