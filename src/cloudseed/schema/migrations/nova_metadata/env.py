"""Alembic runs this file; the environment is shared (see environment.py)."""

from cloudseed.schema.migrations.environment import run

run()
