"""Policy releases: release events, per-decision release rows, scope release policies, and API key
permissions (publish, release, approve).

Revision ID: 0010_releases
Revises: 0009_pilot_intakes
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0010_releases"
down_revision = "0009_pilot_intakes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "release_events",
        sa.Column("scope", sa.String(120), nullable=False),
        sa.Column("rulebook_id", sa.String(120), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("event_hash", sa.String(64), nullable=False),
        sa.Column("idempotency_key", sa.String(300), nullable=True),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.Column("event_json", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("scope", "rulebook_id", "seq", name="pk_release_events"),
        sa.UniqueConstraint("scope", "rulebook_id", "idempotency_key",
                            name="uq_release_events_scope_rulebook_id_idempotency_key"),
    )
    op.create_table(
        "release_decisions",
        sa.Column("decision_id", sa.String(64), nullable=False),
        sa.Column("scope", sa.String(120), nullable=False),
        sa.Column("rulebook_id", sa.String(120), nullable=False),
        sa.Column("release_seq", sa.Integer, nullable=False),
        sa.Column("arm", sa.String(16), nullable=False),
        sa.Column("version", sa.String(80), nullable=False),
        sa.Column("verdict", sa.String(16), nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.Column("shadow_version", sa.String(80), nullable=True),
        sa.Column("shadow_verdict", sa.String(16), nullable=True),
        sa.Column("shadow_reason_code", sa.String(200), nullable=True),
        sa.Column("shadow_matched_rule_id", sa.String(200), nullable=True),
        sa.PrimaryKeyConstraint("decision_id", name="pk_release_decisions"),
    )
    op.create_index("ix_release_decisions_rulebook", "release_decisions",
                    ["scope", "rulebook_id", "release_seq", "arm"])
    op.create_table(
        "release_policies",
        sa.Column("scope", sa.String(120), nullable=False),
        sa.Column("policy_json", sa.Text, nullable=False),
        sa.Column("updated_at", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("scope", name="pk_release_policies"),
    )
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("permissions", sa.String(200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("permissions")
    op.drop_table("release_policies")
    op.drop_index("ix_release_decisions_rulebook", table_name="release_decisions")
    op.drop_table("release_decisions")
    op.drop_table("release_events")
