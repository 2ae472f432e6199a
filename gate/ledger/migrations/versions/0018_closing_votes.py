"""A closed hold lists every approval it rests on, the closing vote included (issue 56): since
then the closing approval adds itself to `holds.approvals_json`; a hold approved before listed
only the votes before it, so the API, the CLI and the Inbox read "1 of 2" for a hold closed at
2 of 2. This revision adds the closing vote to each such row, read from the hold's own signed
resolution event (`hold_events` at `resolution_seq`: its actor, holder and event hash), exactly
as the vote would have added itself. Nothing signed changes (the row is the hold's state, not
its history); a row that lists the closing vote already is left as it is, so the upgrade is
idempotent. The downgrade leaves the rows as they are (the list is right under either code).

Revision ID: 0018_closing_votes
Revises: 0017_slack_messages
Create Date: 2026-11-26
"""

import json

import sqlalchemy as sa
from alembic import op

from gate.principals import holder_id

revision = "0018_closing_votes"
down_revision = "0017_slack_messages"
branch_labels = None
depends_on = None

holds = sa.table("holds", sa.column("decision_id", sa.String), sa.column("scope", sa.String),
                 sa.column("state", sa.String), sa.column("approvals_json", sa.Text),
                 sa.column("resolution_seq", sa.Integer))
hold_events = sa.table("hold_events", sa.column("scope", sa.String), sa.column("seq", sa.Integer),
                       sa.column("decision_id", sa.String), sa.column("event_hash", sa.String),
                       sa.column("event_json", sa.Text))


def closing_vote(event: dict, event_hash: str) -> dict | None:
    """The approval the closing event adds (as gate.services.holds._closing_move writes it), or
    None when it is not an approving vote."""
    if event.get("action") != "vote" or event.get("vote") != "approve" or event.get("outcome") != "approved":
        return None
    principal = event.get("principal") if isinstance(event.get("principal"), dict) else {}
    return {"actor": event["actor"], "holder": holder_id(event["actor"], principal.get("holder")),
            "event_hash": event_hash}


def upgrade() -> None:
    connection = op.get_bind()
    rows = connection.execute(sa.select(holds.c.decision_id, holds.c.scope, holds.c.approvals_json,
                                        holds.c.resolution_seq)
                              .where(holds.c.state == "approved", holds.c.resolution_seq.is_not(None))).all()
    for decision_id, scope, approvals_json, seq in rows:
        approvals = json.loads(approvals_json)
        found = connection.execute(sa.select(hold_events.c.event_hash, hold_events.c.event_json).where(
            hold_events.c.scope == scope, hold_events.c.seq == seq,
            hold_events.c.decision_id == decision_id)).first()
        if found is None:
            continue
        raw = found[1]
        vote = closing_vote(json.loads(raw.decode() if isinstance(raw, bytes) else raw), found[0])
        if vote is None or any(a.get("event_hash") == vote["event_hash"] for a in approvals):
            continue
        connection.execute(sa.update(holds).where(holds.c.decision_id == decision_id).values(
            approvals_json=json.dumps([*approvals, vote])))


def downgrade() -> None:
    pass
