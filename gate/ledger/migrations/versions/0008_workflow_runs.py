"""Workflow route results, kept for idempotent replays (one row per ticketing system and key).

Revision ID: 0008_workflow_runs
Revises: 0007_scope_benchmark_settings
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0008_workflow_runs"
down_revision = "0007_scope_benchmark_settings"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "workflow_runs",
        sa.Column("ticketing_system", sa.String(40), nullable=False),
        sa.Column("idempotency_key", sa.String(300), nullable=False),
        sa.Column("request_id", sa.String(64), nullable=False),
        sa.Column("workflow", sa.String(16), nullable=False),
        sa.Column("ticket_id", sa.String(200), nullable=False),
        sa.Column("input_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.Column("response_json", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("ticketing_system", "idempotency_key", name="pk_workflow_runs"),
        sa.UniqueConstraint("request_id", name="uq_workflow_runs_request_id"),
    )


def downgrade() -> None:
    op.drop_table("workflow_runs")
