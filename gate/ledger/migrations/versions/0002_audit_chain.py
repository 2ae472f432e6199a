"""Audit chain: heads, links, Merkle nodes and signed checkpoints.

Revision ID: 0002_audit_chain
Revises: 0001_decisions
Create Date: 2026-11-21
"""

import sqlalchemy as sa
from alembic import op

revision = "0002_audit_chain"
down_revision = "0001_decisions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "chain_heads",
        sa.Column("chain_id", sa.String(80), nullable=False),
        sa.Column("scope", sa.String(120), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("head_link_hash", sa.String(64), nullable=True),
        sa.Column("merkle_root", sa.String(64), nullable=True),
        sa.Column("tree_peaks", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("chain_id", name="pk_chain_heads"),
        sa.UniqueConstraint("scope", name="uq_chain_heads_scope"),
    )
    op.create_table(
        "chain_links",
        sa.Column("chain_id", sa.String(80), nullable=False),
        sa.Column("chain_position", sa.Integer(), nullable=False),
        sa.Column("decision_id", sa.String(64), nullable=False),
        sa.Column("leaf_hash", sa.String(64), nullable=False),
        sa.Column("link_hash", sa.String(64), nullable=False),
        sa.Column("link_json", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("chain_id", "chain_position", name="pk_chain_links"),
        sa.UniqueConstraint("decision_id", name="uq_chain_links_decision_id"),
    )
    op.create_table(
        "merkle_nodes",
        sa.Column("chain_id", sa.String(80), nullable=False),
        sa.Column("level", sa.Integer(), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("chain_id", "level", "idx", name="pk_merkle_nodes"),
    )
    op.create_table(
        "chain_checkpoints",
        sa.Column("chain_id", sa.String(80), nullable=False),
        sa.Column("tree_size", sa.Integer(), nullable=False),
        sa.Column("checkpoint_json", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("chain_id", "tree_size", name="pk_chain_checkpoints"),
    )


def downgrade() -> None:
    op.drop_table("chain_checkpoints")
    op.drop_table("merkle_nodes")
    op.drop_table("chain_links")
    op.drop_table("chain_heads")
