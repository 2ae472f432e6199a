"""Ledger reads and writes of the Slack messages that told queues of holds (table
`slack_messages`, migration 0017): one row per hold shown with buttons, the rows of a digest
sharing one message (`channel`, `ts`) and its blocks as last sent; a hold moved to another queue
has a row for each queue's message. A removal of inputs rewrites the blocks and marks them `stale`
(migration 0025) until the notifier's Slack pass sends them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.dialects import postgresql, sqlite

from gate.ledger.store import Ledger
from gate.ledger.tables import slack_messages


class SlackMessages:
    """The `slack_messages` table over one `Ledger`."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def sent(self, scope: str, decision_ids: Sequence[str], channel: str, ts: str,
             blocks: Sequence[Any]) -> None:
        """The message `ts` of `channel` shows these holds."""
        text = json.dumps(list(blocks), separators=(",", ":"))
        with self.ledger.write() as connection:
            dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
            for decision_id in decision_ids:
                statement = dialect.insert(slack_messages).values(scope=scope, decision_id=decision_id,
                                                                  channel=channel, ts=ts, blocks_json=text)
                connection.execute(statement.on_conflict_do_update(
                    index_elements=["scope", "decision_id", "channel", "ts"], set_={"blocks_json": text}))

    def of(self, scope: str, decision_id: str) -> list[dict[str, Any]]:
        """The messages that show the hold (one per queue it was told to): channel, ts and
        blocks as last sent, oldest first."""
        with self.ledger.read() as connection:
            rows = connection.execute(select(slack_messages).where(
                slack_messages.c.scope == scope, slack_messages.c.decision_id == decision_id)
                .order_by(slack_messages.c.ts)).mappings().all()
        return [{"channel": row["channel"], "ts": row["ts"], "blocks": json.loads(row["blocks_json"])} for row in rows]

    def updated(self, channel: str, ts: str, blocks: Sequence[Any], before: Sequence[Any]) -> None:
        """The message's blocks as now sent, for every hold it shows, if they are still `before`
        (what the update was made from): blocks a removal of inputs rewrote meanwhile are kept,
        never written back over (the Slack pass sends them)."""
        with self.ledger.write() as connection:
            connection.execute(update(slack_messages).where(
                slack_messages.c.channel == channel, slack_messages.c.ts == ts,
                slack_messages.c.blocks_json == json.dumps(list(before), separators=(",", ":"))).values(
                blocks_json=json.dumps(list(blocks), separators=(",", ":"))))

    def stale(self, scope: str) -> list[dict[str, Any]]:
        """The scope's messages whose stored blocks a removal of inputs rewrote and Slack has not
        been sent yet (gate.ledger.removals): channel, ts, blocks and their stored text."""
        with self.ledger.read() as connection:
            rows = connection.execute(select(slack_messages.c.channel, slack_messages.c.ts,
                                             slack_messages.c.blocks_json).distinct().where(
                slack_messages.c.scope == scope, slack_messages.c.stale == 1)
                .order_by(slack_messages.c.ts)).mappings().all()
        return [{"channel": row["channel"], "ts": row["ts"], "blocks": json.loads(row["blocks_json"]),
                 "text": row["blocks_json"]} for row in rows]

    def sent_again(self, channel: str, ts: str, text: str) -> None:
        """The message's blocks `text` are what Slack shows (or it is gone): not stale any more,
        unless a later removal rewrote them since."""
        with self.ledger.write() as connection:
            connection.execute(update(slack_messages).where(
                slack_messages.c.channel == channel, slack_messages.c.ts == ts,
                slack_messages.c.blocks_json == text).values(stale=0))
