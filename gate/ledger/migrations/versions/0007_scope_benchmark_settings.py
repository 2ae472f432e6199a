"""Per-scope operator setting: does the scope opt in to anonymized cross-customer benchmarks?

Revision ID: 0007_scope_benchmark_settings
Revises: 0006_row_seals
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0007_scope_benchmark_settings"
down_revision = "0006_row_seals"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "scope_benchmark_settings",
        sa.Column("scope", sa.String(120), nullable=False),
        sa.Column("opted_in", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("scope", name="pk_scope_benchmark_settings"),
    )


def downgrade() -> None:
    op.drop_table("scope_benchmark_settings")
