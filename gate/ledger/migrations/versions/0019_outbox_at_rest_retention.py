"""The outbox stored like the records, and pruned past a retention (issue 53, docs/events.md).

`event_outbox.event_json` holds plain UTF-8 text or the at-rest encoding of gate/ledger/codec.py
(0xFF, a dictionary id, a zstd frame), as revision 0011 made the per-decision documents: on
PostgreSQL the column becomes `bytea`, each existing text converted to its UTF-8 bytes
(`convert_to(value, 'UTF8')`), which the codec reads back as the same text, so every event written
before keeps its exact bytes (a replay delivers what the first delivery did). The ALTER rewrites
the table under an ACCESS EXCLUSIVE lock: plan the upgrade of a large outbox as a maintenance
window. On SQLite the column keeps its declared TEXT type and old rows stay as they are.

`event_retention` (one row per scope, written by the pruner) records how far the scope's outbox
was pruned, so a read or replay of a pruned range is refused (EVENTS_PRUNED) rather than
answered with events silently missing.

Revision ID: 0019_outbox_at_rest_retention
Revises: 0018_closing_votes
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0019_outbox_at_rest_retention"
down_revision = "0018_closing_votes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Idempotent, as 0018 is: a ledger whose recorded revision was set back (a restore of the
    version table, or a test that replays an older revision) upgrades again without error."""
    inspector = sa.inspect(op.get_bind())
    if not inspector.has_table("event_retention"):
        op.create_table(
            "event_retention",
            sa.Column("scope", sa.String(120), nullable=False),
            sa.Column("pruned_through", sa.Integer, nullable=False),
            sa.Column("pruned_through_at", sa.String(32), nullable=True),
            sa.PrimaryKeyConstraint("scope", name="pk_event_retention"),
        )
    if op.get_bind().dialect.name == "postgresql":
        types = {column["name"]: column["type"] for column in inspector.get_columns("event_outbox")}
        if not isinstance(types["event_json"], sa.LargeBinary):
            op.execute("ALTER TABLE event_outbox ALTER COLUMN event_json TYPE bytea "
                       "USING convert_to(event_json, 'UTF8')")


def downgrade() -> None:
    """Back to text: only possible while every event is plain (GATE_LEDGER_AT_REST=plain wrote it,
    or it predates this revision); an encoded value makes convert_from fail and the downgrade abort
    rather than store bytes as text. What was pruned stays pruned."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE event_outbox ALTER COLUMN event_json TYPE text USING convert_from(event_json, 'UTF8')")
    op.drop_table("event_retention")
