"""Ledger row seals: decisions row hash and signature, the per-decision receipt chain and head.

Rows written before this revision get no seal (the new columns are null); hosted verify
reports them as unsealed (`ledger_row_hash`, `receipt_chain`) rather than trusting them.

Revision ID: 0006_row_seals
Revises: 0005_confidence
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0006_row_seals"
down_revision = "0005_confidence"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("decisions") as batch:
        batch.add_column(sa.Column("row_hash", sa.String(64), nullable=True))
        batch.add_column(sa.Column("row_signature", sa.Text(), nullable=True))
    with op.batch_alter_table("lifecycle_receipts") as batch:
        batch.add_column(sa.Column("sequence", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("previous_row_hash", sa.String(64), nullable=True))
        batch.add_column(sa.Column("row_hash", sa.String(64), nullable=True))
        batch.create_unique_constraint("uq_lifecycle_receipts_decision_id_sequence", ["decision_id", "sequence"])
    op.create_table(
        "receipt_heads",
        sa.Column("decision_id", sa.String(64), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("head_row_hash", sa.String(64), nullable=True),
        sa.Column("key_id", sa.String(120), nullable=True),
        sa.Column("signature", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("decision_id", name="pk_receipt_heads"),
    )


def downgrade() -> None:
    op.drop_table("receipt_heads")
    with op.batch_alter_table("lifecycle_receipts") as batch:
        batch.drop_constraint("uq_lifecycle_receipts_decision_id_sequence", type_="unique")
        batch.drop_column("row_hash")
        batch.drop_column("previous_row_hash")
        batch.drop_column("sequence")
    with op.batch_alter_table("decisions") as batch:
        batch.drop_column("row_signature")
        batch.drop_column("row_hash")
