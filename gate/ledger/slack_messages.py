"""Ledger reads and writes of the Slack messages that told queues of holds (table
`slack_messages`, migration 0017): one row per hold shown with buttons, the rows of a digest
sharing one message (`channel`, `ts`) and its blocks as last sent."""

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
        """The message `ts` of `channel` shows these holds (a later message of a hold replaces it)."""
        text = json.dumps(list(blocks), separators=(",", ":"))
        with self.ledger.write() as connection:
            dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
            for decision_id in decision_ids:
                statement = dialect.insert(slack_messages).values(scope=scope, decision_id=decision_id,
                                                                  channel=channel, ts=ts, blocks_json=text)
                connection.execute(statement.on_conflict_do_update(
                    index_elements=["scope", "decision_id"], set_={"channel": channel, "ts": ts, "blocks_json": text}))

    def of(self, scope: str, decision_id: str) -> dict[str, Any] | None:
        """The message that shows the hold: channel, ts and blocks (as last sent), or None."""
        with self.ledger.read() as connection:
            row = connection.execute(select(slack_messages).where(
                slack_messages.c.scope == scope, slack_messages.c.decision_id == decision_id)).mappings().first()
        if row is None:
            return None
        return {"channel": row["channel"], "ts": row["ts"], "blocks": json.loads(row["blocks_json"])}

    def updated(self, channel: str, ts: str, blocks: Sequence[Any]) -> None:
        """The message's blocks as now sent, for every hold it shows."""
        with self.ledger.write() as connection:
            connection.execute(update(slack_messages).where(
                slack_messages.c.channel == channel, slack_messages.c.ts == ts).values(
                blocks_json=json.dumps(list(blocks), separators=(",", ":"))))
