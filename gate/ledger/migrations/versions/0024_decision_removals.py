"""Decisions whose inputs were removed, and by what (issue 67, items 3 and 4; docs/privacy.md,
"Retention").

`decision_removals` has one row per decision whose request and record body were removed
(`gate.services.removal`): the cause (`retention`, later `erasure`), its reference (the
retention's days, an erasure event) and when. It is what replay, dry-runs, reports and verifiers
read to tell a removed decision from a changed one; the decisions row keeps every hash, and the
chain links, tree and checkpoints are untouched. Indexed by scope and decision time, the order
in which retention removes and reports count.

Revision ID: 0024_decision_removals
Revises: 0023_outbox_bounded
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0024_decision_removals"
down_revision = "0023_outbox_bounded"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Idempotent, as 0019 to 0023 are: a table already there is left as it is."""
    if "decision_removals" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "decision_removals",
        sa.Column("decision_id", sa.String(64), nullable=False),
        sa.Column("scope", sa.String(120), nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.Column("cause", sa.String(16), nullable=False),
        sa.Column("cause_ref", sa.String(200), nullable=False),
        sa.Column("removed_at", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("decision_id", name="pk_decision_removals"),
    )
    op.create_index("ix_decision_removals_scope_created", "decision_removals", ["scope", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_decision_removals_scope_created", table_name="decision_removals")
    op.drop_table("decision_removals")
