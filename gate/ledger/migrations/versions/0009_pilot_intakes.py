"""Pilot intake submissions (`POST /api/pilot`), exported with the metrics token.

Revision ID: 0009_pilot_intakes
Revises: 0008_workflow_runs
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0009_pilot_intakes"
down_revision = "0008_workflow_runs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pilot_intakes",
        sa.Column("pilot_id", sa.String(40), nullable=False),
        sa.Column("idempotency_key", sa.String(300), nullable=False),
        sa.Column("input_hash", sa.String(64), nullable=False),
        sa.Column("company", sa.String(200), nullable=False),
        sa.Column("contact_name", sa.String(200), nullable=False),
        sa.Column("contact_email", sa.String(254), nullable=False),
        sa.Column("use_case", sa.String(40), nullable=False),
        sa.Column("monthly_decisions", sa.Integer(), nullable=False),
        sa.Column("notes", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.Column("confirmed_at", sa.String(32), nullable=True),
        sa.PrimaryKeyConstraint("pilot_id", name="pk_pilot_intakes"),
        sa.UniqueConstraint("idempotency_key", name="uq_pilot_intakes_idempotency_key"),
    )
    op.create_index("ix_pilot_intakes_created", "pilot_intakes", ["created_at", "pilot_id"])


def downgrade() -> None:
    op.drop_index("ix_pilot_intakes_created", table_name="pilot_intakes")
    op.drop_table("pilot_intakes")
