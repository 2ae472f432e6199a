"""The outbox's event id loses its unique index (issue 68, items 1 and 2; docs/events.md "The outbox").

An event's id is a function of its scope and sequence number (`gate.events.cloudevent.event_id`:
`evt_` and 40 hex digits of a sha256 of both), and (scope, seq) is the outbox's key, so the key
already keeps each id once; nothing reads the outbox by id. The unique index on it was a second
B-tree keyed by a hash: every event's entry lands on a random page, which a large outbox no longer
holds in memory (at 200,000 kept events an event's write cost 183–188 µs of CPU with it against
147–151 without on SQLite, `benchmarks/bench_outbox_insert.py`; a bare INSERT at 400,000, 40–46
against 14), and it grew with the outbox.

PostgreSQL: the constraint is dropped from the partitioned table and with it from every partition
(an instant change). SQLite cannot drop a table's own unique constraint, so the table is written
again without it (Alembic's batch mode: a copy of the rows, once; 2.4 s per 100,000 kept events
on the development host), in the upgrade's one transaction.

Revision ID: 0026_outbox_event_id_unindexed
Revises: 0025_slack_messages_stale
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

from gate.ledger.outbox_partitions import partitioned

revision = "0026_outbox_event_id_unindexed"
down_revision = "0025_slack_messages_stale"
branch_labels = None
depends_on = None

NAME = "uq_event_outbox_event_id"


def _unique_names(bind: sa.engine.Connection) -> set[str]:
    return {constraint["name"] for constraint in sa.inspect(bind).get_unique_constraints("event_outbox")}


def upgrade() -> None:
    """Idempotent, as 0019 to 0025 are: an outbox without the constraint is left as it is."""
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute(f"ALTER TABLE event_outbox DROP CONSTRAINT IF EXISTS {NAME}")
    elif NAME in _unique_names(bind):
        with op.batch_alter_table("event_outbox", recreate="always") as batch:
            batch.drop_constraint(NAME, type_="unique")


def downgrade() -> None:
    """The unique id again: (event_id, created_at) on a partitioned PostgreSQL outbox (its unique keys
    must hold the partition column, as migration 0023 made it), (event_id) otherwise."""
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        columns = "event_id, created_at" if partitioned(bind) else "event_id"
        op.execute(f"ALTER TABLE event_outbox ADD CONSTRAINT {NAME} UNIQUE ({columns})")
    else:
        with op.batch_alter_table("event_outbox", recreate="always") as batch:
            batch.create_unique_constraint(NAME, ["event_id"])
