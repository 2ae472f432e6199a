"""Every API key belongs to a holder (issue 52, docs/releases.md "Holders"): `api_keys.holder`,
and the holder of the key that asked for a held action, `holds.requested_holder`. Existing rows
keep null: a key created before holders is its own holder, `key:<key_id>`, so the rules count
them exactly as before.

Revision ID: 0016_key_holders
Revises: 0015_event_settings
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0016_key_holders"
down_revision = "0015_event_settings"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("holder", sa.String(600), nullable=True))
    with op.batch_alter_table("holds") as batch:
        batch.add_column(sa.Column("requested_holder", sa.String(600), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("holds") as batch:
        batch.drop_column("requested_holder")
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("holder")
