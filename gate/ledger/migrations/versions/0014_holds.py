"""Held actions (docs/holds.md): one row per held decision and the scope's signed hold chain.

Revision ID: 0014_holds
Revises: 0013_events
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0014_holds"
down_revision = "0013_events"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "holds",
        sa.Column("decision_id", sa.String(64), nullable=False),
        sa.Column("scope", sa.String(120), nullable=False),
        sa.Column("record_hash", sa.String(64), nullable=False),
        sa.Column("policy_id", sa.String(200), nullable=True),
        sa.Column("policy_version", sa.String(200), nullable=True),
        sa.Column("rule_id", sa.String(200), nullable=True),
        sa.Column("reason_code", sa.String(200), nullable=True),
        sa.Column("requested_by", sa.String(600), nullable=False),
        sa.Column("queue", sa.String(64), nullable=False),
        sa.Column("priority", sa.String(16), nullable=False),
        sa.Column("priority_rank", sa.Integer, nullable=False),
        sa.Column("opened_at", sa.String(32), nullable=False),
        sa.Column("deadline_at", sa.String(32), nullable=False),
        sa.Column("escalate_at", sa.String(32), nullable=True),
        sa.Column("approvals_needed", sa.Integer, nullable=False),
        sa.Column("require_justification", sa.Integer, nullable=False),
        sa.Column("four_eyes", sa.Integer, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("claimed_by", sa.String(600), nullable=True),
        sa.Column("claimed_at", sa.String(32), nullable=True),
        sa.Column("approvals_json", sa.Text, nullable=False),
        sa.Column("resolved_at", sa.String(32), nullable=True),
        sa.Column("resolved_by", sa.String(600), nullable=True),
        sa.Column("resolution_seq", sa.Integer, nullable=True),
        sa.Column("row_version", sa.Integer, nullable=False),
        sa.Column("facts_json", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("decision_id", name="pk_holds"),
    )
    op.create_index("ix_holds_scope_state_deadline", "holds", ["scope", "state", "deadline_at"])
    op.create_index("ix_holds_state_deadline", "holds", ["state", "deadline_at"])
    op.create_index("ix_holds_state_escalate", "holds", ["state", "escalate_at"])
    op.create_table(
        "hold_events",
        sa.Column("scope", sa.String(120), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("decision_id", sa.String(64), nullable=True),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("event_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.Column("event_json", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("scope", "seq", name="pk_hold_events"),
    )
    op.create_index("ix_hold_events_decision", "hold_events", ["decision_id", "seq"])
    op.create_index("ix_hold_events_scope_action", "hold_events", ["scope", "action", "seq"])


def downgrade() -> None:
    op.drop_table("hold_events")
    op.drop_table("holds")
