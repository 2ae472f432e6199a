"""The Slack message that told a queue of a hold (docs/integrations.md, "Reviewers' channels"):
`slack_messages`, so a hold resolved in the Inbox, the CLI or the API updates it too.

Revision ID: 0017_slack_messages
Revises: 0016_key_holders
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0017_slack_messages"
down_revision = "0016_key_holders"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "slack_messages",
        sa.Column("scope", sa.String(120), primary_key=True),
        sa.Column("decision_id", sa.String(64), primary_key=True),
        sa.Column("channel", sa.String(40), primary_key=True),
        sa.Column("ts", sa.String(40), primary_key=True),
        sa.Column("blocks_json", sa.Text, nullable=False),
    )
    op.create_index("ix_slack_messages_message", "slack_messages", ["channel", "ts"])


def downgrade() -> None:
    op.drop_index("ix_slack_messages_message", table_name="slack_messages")
    op.drop_table("slack_messages")
