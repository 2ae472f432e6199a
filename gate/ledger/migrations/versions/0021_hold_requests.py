"""The request on every hold (issue 65, docs/holds.md "The request on a hold").

`holds` gains `request_json` (the summary of what the caller asked, read at open time from the
canonical request bound to the record's `input_hash`: `gate.holds.request`) and the plain columns
`target_object_id` and `source_record_id`, each indexed with the scope, which the Inbox searches.
Existing rows keep null: a hold opened before this revision reads its request from its
decision's stored request when shown (`gate.services.holds`), and is not found by those searches.

Revision ID: 0021_hold_requests
Revises: 0020_attempt_totals
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0021_hold_requests"
down_revision = "0020_attempt_totals"
branch_labels = None
depends_on = None

COLUMNS = (("request_json", sa.Text), ("target_object_id", sa.String(200)), ("source_record_id", sa.String(200)))
INDEXES = (("ix_holds_scope_target_object", "target_object_id"), ("ix_holds_scope_source_record", "source_record_id"))


def upgrade() -> None:
    """Idempotent, as 0019 and 0020 are: a column or index already there is left as it is."""
    inspector = sa.inspect(op.get_bind())
    present = {column["name"] for column in inspector.get_columns("holds")}
    indexed = {index["name"] for index in inspector.get_indexes("holds")}
    missing = [(name, kind) for name, kind in COLUMNS if name not in present]
    if missing:
        with op.batch_alter_table("holds") as batch:
            for name, kind in missing:
                batch.add_column(sa.Column(name, kind, nullable=True))
    for index, column in INDEXES:
        if index not in indexed:
            op.create_index(index, "holds", ["scope", column])


def downgrade() -> None:
    for index, _column in reversed(INDEXES):
        op.drop_index(index, table_name="holds")
    with op.batch_alter_table("holds") as batch:
        for name, _kind in reversed(COLUMNS):
            batch.drop_column(name)
