"""Per-scope event settings (the opt-in `decision.created`, the anomaly report's schedule) and the
anomalies announced and not yet cleared (docs/events.md, "Opt-in events").

Revision ID: 0015_event_settings
Revises: 0014_holds
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0015_event_settings"
down_revision = "0014_holds"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "event_settings",
        sa.Column("scope", sa.String(120), nullable=False),
        sa.Column("decision_created", sa.Integer, nullable=False),
        sa.Column("anomaly_every_seconds", sa.Integer, nullable=True),
        sa.Column("anomaly_next_at", sa.String(32), nullable=True),
        sa.Column("updated_at", sa.String(32), nullable=False),
        sa.Column("updated_by", sa.String(600), nullable=False),
        sa.PrimaryKeyConstraint("scope", name="pk_event_settings"),
    )
    op.create_table(
        "anomaly_alerts",
        sa.Column("scope", sa.String(120), nullable=False),
        sa.Column("anomaly_key", sa.String(64), nullable=False),
        sa.Column("first_seen", sa.String(32), nullable=False),
        sa.Column("last_seen", sa.String(32), nullable=False),
        sa.Column("summary_json", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("scope", "anomaly_key", name="pk_anomaly_alerts"),
    )


def downgrade() -> None:
    op.drop_table("anomaly_alerts")
    op.drop_table("event_settings")
