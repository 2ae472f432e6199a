"""Delivery attempts pruned past the retention, their counts kept (issue 53, docs/events.md
"Retention").

`webhook_subscriptions` gains `pruned_attempts` and `pruned_succeeded` (0 for every existing
subscription): when the `event-retention` worker deletes a subscription's old `webhook_attempts`
rows it adds their number, and how many succeeded, to these in the same transaction, so the
attempts and success rate over the subscription's life (`GET …/deliveries`, `gate events
deliveries`) read the same before and after a prune.

Revision ID: 0020_attempt_totals
Revises: 0019_outbox_at_rest_retention
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0020_attempt_totals"
down_revision = "0019_outbox_at_rest_retention"
branch_labels = None
depends_on = None

COLUMNS = ("pruned_attempts", "pruned_succeeded")


def upgrade() -> None:
    """Idempotent, as 0019 is: a ledger whose recorded revision was set back upgrades again
    without error (a column already there is left as it is)."""
    present = {column["name"] for column in sa.inspect(op.get_bind()).get_columns("webhook_subscriptions")}
    missing = [name for name in COLUMNS if name not in present]
    if missing:
        with op.batch_alter_table("webhook_subscriptions") as batch:
            for name in missing:
                batch.add_column(sa.Column(name, sa.Integer, nullable=False, server_default="0"))


def downgrade() -> None:
    """The counts of pruned attempts are dropped; the attempts themselves stay pruned."""
    with op.batch_alter_table("webhook_subscriptions") as batch:
        for name in reversed(COLUMNS):
            batch.drop_column(name)
