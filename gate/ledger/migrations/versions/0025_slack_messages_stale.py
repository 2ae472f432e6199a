"""A Slack message to send again (issue 67; docs/privacy.md, "Retention" and "Erasure").

`slack_messages` gains `stale` (0 or 1): a removal of decisions' inputs (gate.ledger.removals)
rewrites the stored blocks of every message that shows one of them (the hold's facts become one
line saying its inputs were removed) and sets it; the notifier's Slack pass sends those blocks
(`chat.update`) and clears it. Existing rows: 0.

Revision ID: 0025_slack_messages_stale
Revises: 0024_decision_removals
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0025_slack_messages_stale"
down_revision = "0024_decision_removals"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Idempotent, as 0019 to 0024 are: a column already there is left as it is."""
    present = {column["name"] for column in sa.inspect(op.get_bind()).get_columns("slack_messages")}
    if "stale" not in present:
        with op.batch_alter_table("slack_messages") as batch:
            batch.add_column(sa.Column("stale", sa.Integer, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("slack_messages") as batch:
        batch.drop_column("stale")
