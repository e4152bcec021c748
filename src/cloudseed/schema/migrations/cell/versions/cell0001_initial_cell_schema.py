"""Start of the cell database history.

Revision ID: cell0001
Revises:
Create Date: 2026-11-22

Cell databases hold instances; their tables arrive with the servers API. This empty revision
lets ``cloudseed db sync`` create and stamp every cell database from the first release on, so
later revisions upgrade them like any other.
"""

revision = "cell0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
