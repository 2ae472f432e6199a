"""The at-rest encoding of the per-decision JSON documents (gate/ledger/codec.py, issue 23).

`decisions.record_json`, `decisions.request_json`, `chain_links.link_json` and
`lifecycle_receipts.receipt_json` hold either plain UTF-8 text or an encoded value (0xFF, a
dictionary id, a zstd frame). On PostgreSQL they become `bytea`: each existing text value is
converted to its UTF-8 bytes (`convert_to(value, 'UTF8')`), which the codec reads back as the same
text, so rows written before this revision keep their bytes and verify unchanged. The ALTER
rewrites each table under an ACCESS EXCLUSIVE lock: plan the upgrade of a large ledger as a
maintenance window. On SQLite the columns keep their declared TEXT type (a column of TEXT
affinity stores a BLOB value as a BLOB): nothing is rewritten, old rows stay as they are.

Revision ID: 0011_at_rest_encoding
Revises: 0010_releases
Create Date: 2026-11-24
"""

from alembic import op

revision = "0011_at_rest_encoding"
down_revision = "0010_releases"
branch_labels = None
depends_on = None

COLUMNS = (("decisions", "record_json"), ("decisions", "request_json"), ("chain_links", "link_json"),
           ("lifecycle_receipts", "receipt_json"))


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, column in COLUMNS:
        op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE bytea USING convert_to({column}, 'UTF8')")


def downgrade() -> None:
    """Back to text: only possible while every value is plain (GATE_LEDGER_AT_REST=plain wrote
    them, or they predate the encoding); an encoded value makes convert_from fail and the
    downgrade abort rather than store bytes as text."""
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, column in COLUMNS:
        op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE text USING convert_from({column}, 'UTF8')")
