"""Alembic runs this file; the environment is shared (see environment.py)."""

from cloudseed.db.migrations.environment import run

run()
