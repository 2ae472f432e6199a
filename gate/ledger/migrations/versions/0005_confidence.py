"""Decision-confidence counters and each decision's latest outcome, backfilled from the ledger.

Revision ID: 0005_confidence
Revises: 0004_receipt_stream_index
Create Date: 2026-11-22
"""

import json

import sqlalchemy as sa
from alembic import op

revision = "0005_confidence"
down_revision = "0004_receipt_stream_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "confidence_counters",
        sa.Column("scope", sa.String(120), nullable=False),
        sa.Column("policy_id", sa.String(120), nullable=False),
        sa.Column("verdict", sa.String(16), nullable=False),
        sa.Column("action", sa.String(200), nullable=False),
        sa.Column("policy_version", sa.String(80), nullable=False),
        sa.Column("n_success", sa.Integer(), nullable=False),
        sa.Column("n_failure", sa.Integer(), nullable=False),
        sa.Column("n_excluded", sa.Integer(), nullable=False),
        sa.Column("n_open", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("scope", "policy_id", "verdict", "action", "policy_version",
                                name="pk_confidence_counters"),
    )
    op.create_table(
        "outcome_latest",
        sa.Column("decision_id", sa.String(64), nullable=False),
        sa.Column("scope", sa.String(120), nullable=False),
        sa.Column("reported_at", sa.String(32), nullable=False),
        sa.Column("receipt_id", sa.String(64), nullable=False),
        sa.Column("effect", sa.String(16), nullable=False),
        sa.PrimaryKeyConstraint("decision_id", name="pk_outcome_latest"),
    )
    _backfill(op.get_bind())


def _backfill(connection) -> None:
    """Counters for a ledger that already holds Outcome Records: each decision's latest outcome
    (by reported_at, then receipt_id), counted in its bucket and both roll-ups. Streams the
    outcomes in order; memory grows with the number of decisions that have outcomes."""
    from gate.receipts.values import OUTCOME_EFFECTIVENESS_CLASS

    latest: dict[str, tuple[str, str, str, str]] = {}
    rows = connection.execute(sa.text(
        "SELECT decision_id, scope, reported_at, receipt_id, receipt_json FROM lifecycle_receipts "
        "WHERE kind = 'outcome' ORDER BY decision_id, reported_at, receipt_id"))
    for decision_id, scope, reported_at, receipt_id, receipt_json in rows:
        status = json.loads(receipt_json).get("outcome_status")
        latest[decision_id] = (scope, reported_at, receipt_id, OUTCOME_EFFECTIVENESS_CLASS.get(status, "open"))
    if not latest:
        return
    columns = {"success": "n_success", "failure": "n_failure", "excluded": "n_excluded", "open": "n_open"}
    counters: dict[tuple[str, str, str, str, str], dict[str, int]] = {}
    ids = list(latest)
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        decisions = connection.execute(
            sa.text("SELECT decision_id, policy_id, policy_version, verdict, record_json FROM decisions "
                    "WHERE decision_id IN :ids").bindparams(sa.bindparam("ids", expanding=True)),
            {"ids": chunk})
        for decision_id, policy_id, policy_version, verdict, record_json in decisions:
            if policy_id is None:
                continue
            scope, reported_at, receipt_id, effect = latest[decision_id]
            action = str(json.loads(record_json).get("action"))
            connection.execute(sa.text(
                "INSERT INTO outcome_latest (decision_id, scope, reported_at, receipt_id, effect) "
                "VALUES (:d, :s, :r, :i, :e)"), {"d": decision_id, "s": scope, "r": reported_at,
                                                 "i": receipt_id, "e": effect})
            for key in ((verdict, action, policy_version or ""), (verdict, action, ""), ("", "", "")):
                row = counters.setdefault((scope, policy_id, *key), dict.fromkeys(columns.values(), 0))
                row[columns[effect]] += 1
    for (scope, policy_id, verdict, action, version), counts in counters.items():
        connection.execute(sa.text(
            "INSERT INTO confidence_counters (scope, policy_id, verdict, action, policy_version, "
            "n_success, n_failure, n_excluded, n_open) VALUES (:scope, :policy_id, :verdict, :action, "
            ":version, :n_success, :n_failure, :n_excluded, :n_open)"),
            {"scope": scope, "policy_id": policy_id, "verdict": verdict, "action": action,
             "version": version, **counts})


def downgrade() -> None:
    op.drop_table("outcome_latest")
    op.drop_table("confidence_counters")
