"""An Outcome Record's link to the execution receipt it follows (issue 41, item 7).

Two nullable columns on `lifecycle_receipts`, set only on outcome rows written with
`execution_receipt_id` / `execution_hash` (copies of the stored receipt's link members, under the
row seal: gate/chain/rowseal.py). Existing rows keep null and hash exactly as before, so nothing
is rewritten.

Revision ID: 0012_outcome_execution_link
Revises: 0011_at_rest_encoding
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0012_outcome_execution_link"
down_revision = "0011_at_rest_encoding"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("lifecycle_receipts") as batch:
        batch.add_column(sa.Column("execution_receipt_id", sa.String(64), nullable=True))
        batch.add_column(sa.Column("execution_hash", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("lifecycle_receipts") as batch:
        batch.drop_column("execution_hash")
        batch.drop_column("execution_receipt_id")
