"""Decisions, API keys, usage counters and rulebook snapshots.

Revision ID: 0001_decisions
Revises:
Create Date: 2026-11-21
"""

import sqlalchemy as sa
from alembic import op

revision = "0001_decisions"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("key_id", sa.String(40), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("scope", sa.String(120), nullable=False),
        sa.Column("plan", sa.String(40), nullable=False),
        sa.Column("rate_limit", sa.Integer(), nullable=True),
        sa.Column("monthly_cap", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("label", sa.String(200), nullable=True),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.Column("disabled_at", sa.String(32), nullable=True),
        sa.PrimaryKeyConstraint("key_id", name="pk_api_keys"),
        sa.UniqueConstraint("key_hash", name="uq_api_keys_key_hash"),
    )
    op.create_index("ix_api_keys_scope", "api_keys", ["scope"])
    op.create_table(
        "usage_counters",
        sa.Column("key_id", sa.String(40), nullable=False),
        sa.Column("period", sa.String(7), nullable=False),
        sa.Column("used", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("key_id", "period", name="pk_usage_counters"),
    )
    op.create_table(
        "rulebook_snapshots",
        sa.Column("snapshot_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("scope", sa.String(120), nullable=False),
        sa.Column("rulebook_id", sa.String(120), nullable=False),
        sa.Column("version", sa.String(80), nullable=False),
        sa.Column("rulebook_hash", sa.String(64), nullable=False),
        sa.Column("evaluator_version", sa.String(40), nullable=False),
        sa.Column("schema_hash", sa.String(64), nullable=False),
        sa.Column("registered_at", sa.String(32), nullable=False),
        sa.Column("body_json", sa.Text(), nullable=False),
        sa.Column("registry_json", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("snapshot_id", name="pk_rulebook_snapshots"),
        sa.UniqueConstraint(
            "scope", "rulebook_id", "version", name="uq_rulebook_snapshots_scope_rulebook_id_version"
        ),
    )
    op.create_index(
        "ix_rulebook_snapshots_scope_hash", "rulebook_snapshots", ["scope", "rulebook_hash"]
    )
    op.create_table(
        "decisions",
        sa.Column("decision_id", sa.String(64), nullable=False),
        sa.Column("scope", sa.String(120), nullable=False),
        sa.Column("key_id", sa.String(40), nullable=False),
        sa.Column("idempotency_key", sa.String(300), nullable=True),
        sa.Column("input_hash", sa.String(64), nullable=False),
        sa.Column("record_hash", sa.String(64), nullable=False),
        sa.Column("receipt_hash", sa.String(64), nullable=False),
        sa.Column("policy_bundle_hash", sa.String(64), nullable=True),
        sa.Column("rulebook_hash", sa.String(64), nullable=True),
        sa.Column("policy_id", sa.String(120), nullable=True),
        sa.Column("policy_version", sa.String(80), nullable=True),
        sa.Column("verdict", sa.String(16), nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.Column("record_json", sa.Text(), nullable=False),
        sa.Column("request_json", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("decision_id", name="pk_decisions"),
        sa.UniqueConstraint("scope", "idempotency_key", name="uq_decisions_scope_idempotency_key"),
    )
    op.create_index("ix_decisions_scope_created", "decisions", ["scope", "created_at"])
    op.create_index("ix_decisions_policy_bundle_hash", "decisions", ["policy_bundle_hash"])


def downgrade() -> None:
    op.drop_table("decisions")
    op.drop_table("rulebook_snapshots")
    op.drop_table("usage_counters")
    op.drop_table("api_keys")
