"""Lifecycle receipts and their idempotency claims.

Revision ID: 0003_lifecycle
Revises: 0002_audit_chain
Create Date: 2026-11-21
"""

import sqlalchemy as sa
from alembic import op

revision = "0003_lifecycle"
down_revision = "0002_audit_chain"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lifecycle_receipts",
        sa.Column("receipt_id", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("decision_id", sa.String(64), nullable=False),
        sa.Column("scope", sa.String(120), nullable=False),
        sa.Column("idempotency_key", sa.String(300), nullable=True),
        sa.Column("input_hash", sa.String(64), nullable=False),
        sa.Column("receipt_hash", sa.String(64), nullable=False),
        sa.Column("reported_at", sa.String(32), nullable=False),
        sa.Column("receipt_json", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("receipt_id", name="pk_lifecycle_receipts"),
    )
    op.create_index("ix_lifecycle_receipts_decision", "lifecycle_receipts", ["decision_id", "kind", "reported_at"])
    op.create_table(
        "idempotency_claims",
        sa.Column("scope", sa.String(120), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("idempotency_key", sa.String(300), nullable=False),
        sa.Column("decision_id", sa.String(64), nullable=False),
        sa.Column("input_hash", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("claim_token", sa.String(64), nullable=False),
        sa.Column("claimed_at", sa.String(32), nullable=False),
        sa.Column("receipt_id", sa.String(64), nullable=True),
        sa.PrimaryKeyConstraint("scope", "kind", "idempotency_key", name="pk_idempotency_claims"),
    )


def downgrade() -> None:
    op.drop_table("idempotency_claims")
    op.drop_index("ix_lifecycle_receipts_decision", table_name="lifecycle_receipts")
    op.drop_table("lifecycle_receipts")
