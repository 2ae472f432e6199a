"""The outbox bounded at any sustained rate (issue 68, item 3; docs/events.md "Retention").

`event_retention` gains, per scope, `counted_through` and `bytes` (the stored bytes of the kept
events, counted by the retention pass from `counted_through` on: 0 here, so the first pass counts
what is there) and `dropped_undelivered` (events a size bound, GATE_EVENTS_RETENTION_BYTES, removed
before an active subscription or held stream had them: 0).

SQLite keeps `event_outbox` a plain table; a new SQLite ledger is created with
`auto_vacuum=INCREMENTAL` (gate.ledger.engine) so pruning returns its pages to the file system.
An existing file keeps its mode until it is vacuumed once (docs/operating.md, "Outbox size").

Revision ID: 0021_outbox_bounded
Revises: 0020_attempt_totals
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0021_outbox_bounded"
down_revision = "0020_attempt_totals"
branch_labels = None
depends_on = None

COLUMNS = (("counted_through", sa.Integer), ("bytes", sa.BigInteger), ("dropped_undelivered", sa.BigInteger))


def upgrade() -> None:
    """Idempotent, as 0019 and 0020 are: a column already there is left as it is."""
    present = {column["name"] for column in sa.inspect(op.get_bind()).get_columns("event_retention")}
    missing = [(name, kind) for name, kind in COLUMNS if name not in present]
    if missing:
        with op.batch_alter_table("event_retention") as batch:
            for name, kind in missing:
                batch.add_column(sa.Column(name, kind, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("event_retention") as batch:
        for name, _ in reversed(COLUMNS):
            batch.drop_column(name)
