"""Index for streaming lifecycle receipts per scope and kind in (reported_at, receipt_id) order
(the keyset of `gate.ledger.stream.iter_receipts`, used by the Parquet export).

Revision ID: 0004_receipt_stream_index
Revises: 0003_lifecycle
Create Date: 2026-11-22
"""

from alembic import op

revision = "0004_receipt_stream_index"
down_revision = "0003_lifecycle"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_lifecycle_receipts_scope_kind_reported", "lifecycle_receipts",
                    ["scope", "kind", "reported_at", "receipt_id"])


def downgrade() -> None:
    op.drop_index("ix_lifecycle_receipts_scope_kind_reported", table_name="lifecycle_receipts")
