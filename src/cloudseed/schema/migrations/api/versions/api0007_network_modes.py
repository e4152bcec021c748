"""Networks get a mode (issue 33): ``slirp`` (QEMU's user-mode network per guest, the
default and what every existing network is) or ``bridge`` (a Linux bridge per network in a
network namespace cloudseed owns); ``egress`` (bridged guests may reach beyond their
network) and ``ec2_metadata_address`` (the metadata proxy also answers at fd00:ec2::254).

Revision ID: api0007
Revises: api0006
Create Date: 2026-11-30 10:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "api0007"
down_revision = "api0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("networks") as batch:
        batch.add_column(sa.Column("mode", sa.String(16), nullable=False, server_default="slirp"))
        batch.add_column(
            sa.Column("egress", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.add_column(
            sa.Column(
                "ec2_metadata_address", sa.Boolean(), nullable=False, server_default=sa.false()
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("networks") as batch:
        batch.drop_column("ec2_metadata_address")
        batch.drop_column("egress")
        batch.drop_column("mode")
