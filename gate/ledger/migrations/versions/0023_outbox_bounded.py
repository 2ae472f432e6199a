"""The outbox bounded at any sustained rate (issue 68, item 3; docs/events.md "Retention").

`event_retention` gains, per scope, `counted_through` and `bytes` (the stored bytes of the kept
events, counted by the retention pass from `counted_through` on: 0 here, so the first pass counts
what is there) and `dropped_undelivered` (events a size bound, GATE_EVENTS_RETENTION_BYTES, removed
before an active subscription or held stream had them: 0).

PostgreSQL: `event_outbox` becomes partitioned by day (gate.ledger.outbox_partitions): the
table as it was is renamed `event_outbox_default` and attached as the DEFAULT partition (its rows
stay where they are: no copy; PostgreSQL builds its new key once), the key becomes (scope, seq,
created_at) and the unique event id (event_id, created_at), as a partitioned table's unique keys
must hold the partition column (a scope's seq stays unique: its sequence row hands each number out
once), and `created_at` compares in the "C" collation (text order is time order). The day
partitions from today on are made here and then by each retention pass; today's is left to the
default partition when that already holds rows of today.

SQLite keeps `event_outbox` a plain table; a new SQLite ledger is created with
`auto_vacuum=INCREMENTAL` (gate.ledger.engine) so pruning returns its pages to the file system.
An existing file keeps its mode until it is vacuumed once (docs/operating.md, "Outbox size").

Revision ID: 0023_outbox_bounded
Revises: 0022_hold_inbox_order
Create Date: 2026-11-28
"""

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from gate.ledger.outbox_partitions import ensure_partitions, partitioned

revision = "0023_outbox_bounded"
down_revision = "0022_hold_inbox_order"
branch_labels = None
depends_on = None

COLUMNS_SQL = ('scope VARCHAR(120) NOT NULL, seq INTEGER NOT NULL, event_id VARCHAR(64) NOT NULL, '
               'event_type VARCHAR(80) NOT NULL, created_at VARCHAR(32) COLLATE "C" NOT NULL, event_json BYTEA NOT NULL')
COLUMNS = (("counted_through", sa.Integer), ("bytes", sa.BigInteger), ("dropped_undelivered", sa.BigInteger))


def upgrade() -> None:
    """Idempotent, as 0019 and 0020 are: a column already there, or an outbox already
    partitioned, is left as it is."""
    present = {column["name"] for column in sa.inspect(op.get_bind()).get_columns("event_retention")}
    missing = [(name, kind) for name, kind in COLUMNS if name not in present]
    if missing:
        with op.batch_alter_table("event_retention") as batch:
            for name, kind in missing:
                batch.add_column(sa.Column(name, kind, nullable=False, server_default="0"))
    bind = op.get_bind()
    if bind.dialect.name == "postgresql" and not partitioned(bind):
        _partition()
        ensure_partitions(bind, datetime.now(UTC).date())


def _partition() -> None:
    op.execute("ALTER TABLE event_outbox RENAME TO event_outbox_default")
    op.execute("ALTER TABLE event_outbox_default DROP CONSTRAINT pk_event_outbox")
    op.execute("ALTER TABLE event_outbox_default DROP CONSTRAINT uq_event_outbox_event_id")
    op.execute('ALTER TABLE event_outbox_default ALTER COLUMN created_at TYPE VARCHAR(32) COLLATE "C"')
    op.execute(f"CREATE TABLE event_outbox ({COLUMNS_SQL}, "
               "CONSTRAINT pk_event_outbox PRIMARY KEY (scope, seq, created_at), "
               "CONSTRAINT uq_event_outbox_event_id UNIQUE (event_id, created_at)) PARTITION BY RANGE (created_at)")
    op.execute("ALTER TABLE event_outbox ATTACH PARTITION event_outbox_default DEFAULT")


def downgrade() -> None:
    """PostgreSQL: the outbox becomes one plain table again (its rows copied)."""
    if op.get_bind().dialect.name == "postgresql" and partitioned(op.get_bind()):
        op.execute("ALTER TABLE event_outbox RENAME TO event_outbox_partitioned")
        for name in ("pk_event_outbox", "uq_event_outbox_event_id"):  # the names go to the plain table
            op.execute(f"ALTER TABLE event_outbox_partitioned RENAME CONSTRAINT {name} TO {name}_partitioned")
        plain = COLUMNS_SQL.replace(' COLLATE "C"', "")
        op.execute(f"CREATE TABLE event_outbox ({plain}, "
                   "CONSTRAINT pk_event_outbox PRIMARY KEY (scope, seq), "
                   "CONSTRAINT uq_event_outbox_event_id UNIQUE (event_id))")
        op.execute("INSERT INTO event_outbox SELECT * FROM event_outbox_partitioned")
        op.execute("DROP TABLE event_outbox_partitioned")
    with op.batch_alter_table("event_retention") as batch:
        for name, _ in reversed(COLUMNS):
            batch.drop_column(name)
