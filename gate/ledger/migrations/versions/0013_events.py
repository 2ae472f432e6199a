"""Events out (docs/events.md): the transactional outbox with its per-scope sequence, webhook
subscriptions with their delivery attempts and manual replays, and stream cursors.

Revision ID: 0013_events
Revises: 0012_outcome_execution_link
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0013_events"
down_revision = "0012_outcome_execution_link"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "event_outbox",
        sa.Column("scope", sa.String(120), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("event_id", sa.String(64), nullable=False),
        sa.Column("event_type", sa.String(80), nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.Column("event_json", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("scope", "seq", name="pk_event_outbox"),
        sa.UniqueConstraint("event_id", name="uq_event_outbox_event_id"),
    )
    op.create_table(
        "event_sequences",
        sa.Column("scope", sa.String(120), nullable=False),
        sa.Column("last_seq", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("scope", name="pk_event_sequences"),
    )
    op.create_table(
        "webhook_subscriptions",
        sa.Column("subscription_id", sa.String(40), nullable=False),
        sa.Column("scope", sa.String(120), nullable=False),
        sa.Column("url", sa.String(2000), nullable=False),
        sa.Column("event_types", sa.Text, nullable=False),
        sa.Column("secret", sa.String(120), nullable=False),
        sa.Column("previous_secret", sa.String(120), nullable=True),
        sa.Column("previous_until", sa.String(32), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("disabled_reason", sa.String(400), nullable=True),
        sa.Column("cursor", sa.Integer, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("failing_since", sa.String(32), nullable=True),
        sa.Column("next_attempt_at", sa.String(32), nullable=True),
        sa.Column("lease_owner", sa.String(80), nullable=True),
        sa.Column("lease_until", sa.String(32), nullable=True),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.Column("created_by", sa.String(600), nullable=False),
        sa.Column("sign_ed25519", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("subscription_id", name="pk_webhook_subscriptions"),
    )
    op.create_index("ix_webhook_subscriptions_scope", "webhook_subscriptions", ["scope"])
    op.create_table(
        "webhook_attempts",
        sa.Column("attempt_id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("subscription_id", sa.String(40), nullable=False),
        sa.Column("scope", sa.String(120), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("event_id", sa.String(64), nullable=False),
        sa.Column("attempted_at", sa.String(32), nullable=False),
        sa.Column("ok", sa.Integer, nullable=False),
        sa.Column("status_code", sa.Integer, nullable=True),
        sa.Column("latency_ms", sa.Integer, nullable=False),
        sa.Column("excerpt", sa.String(600), nullable=False),
        sa.Column("replay", sa.Integer, nullable=False),
    )
    op.create_index("ix_webhook_attempts_subscription", "webhook_attempts", ["subscription_id", "attempt_id"])
    op.create_table(
        "webhook_replays",
        sa.Column("subscription_id", sa.String(40), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("requested_at", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("subscription_id", "seq", name="pk_webhook_replays"),
    )
    op.create_table(
        "event_stream_cursors",
        sa.Column("stream", sa.String(80), nullable=False),
        sa.Column("scope", sa.String(120), nullable=False),
        sa.Column("cursor", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("stream", "scope", name="pk_event_stream_cursors"),
    )


def downgrade() -> None:
    for table in ("event_stream_cursors", "webhook_replays", "webhook_attempts", "webhook_subscriptions",
                  "event_sequences", "event_outbox"):
        op.drop_table(table)
