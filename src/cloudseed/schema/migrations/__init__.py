"""The Alembic histories (``api``, ``cell``) and the environment they share."""
