"""The outbox published to NATS JetStream (docs/events.md, "Stream"), with `nats-py`.

Each scope's events go out in `seq` order to the subject `gate.events.<scope token>.<type>` (the
type's dots make it a subject hierarchy: `gate.events.acme.release.>` is every release event of
`acme`), each with its event id as `Nats-Msg-Id`, so the stream drops a message it already holds
within its duplicate window: a publisher killed after the broker's acknowledgement and before its
cursor was saved publishes those events again, and nothing is stored twice. A consumer that starts
late reads from any stream sequence (`deliver_policy`), or filters one scope's subject.

The scope token is the scope itself when it is a valid NATS token of letters, digits, `_` and
`-`; any other scope is `h` followed by 32 hex digits of its sha256 (a scope's text is the tenant's,
and a `.`, `*` or `>` in it would change what a subject matches).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
from collections.abc import Callable
from typing import Any, Protocol

from gate.events.cloudevent import OutboxRow

SUBJECT_PREFIX = "gate.events"
DEFAULT_STREAM = "GATE_EVENTS"
DUPLICATE_WINDOW_SECONDS = 600.0
_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,64}")


class OutboxReader(Protocol):
    """What the publisher reads of the outbox and writes back: the scopes, each scope's events
    after a cursor, and the stream's cursor per scope. `gate.ledger.outbox.Outbox` is one; the
    publisher names only these methods, so the events package stays below the ledger."""

    def scopes(self) -> list[str]: ...

    def events_after(self, scope: str, after: int, limit: int = 100) -> list[OutboxRow]: ...

    def stream_cursor(self, stream: str, scope: str) -> int: ...

    def set_stream_cursor(self, stream: str, scope: str, cursor: int) -> None: ...


def scope_token(scope: str) -> str:
    if _TOKEN.fullmatch(scope):
        return scope
    return "h" + hashlib.sha256(scope.encode("utf-8")).hexdigest()[:32]


def subject_of(scope: str, event_type: str, type_prefix: str) -> str:
    return f"{SUBJECT_PREFIX}.{scope_token(scope)}.{event_type.removeprefix(type_prefix)}"


class JetStreamPublisher:
    """Publishes what the outbox holds beyond each scope's stream cursor. Not thread-safe: one
    thread (the dispatcher's) drives it; its event loop lives as long as it does."""

    def __init__(self, outbox: OutboxReader, url: str, stream: str = DEFAULT_STREAM, name: str = "jetstream",
                 body_of: Callable[[OutboxRow], bytes] | None = None) -> None:
        self.outbox, self.url, self.stream, self.name = outbox, url, stream, name
        # What a row is published as: the stored text, or what the scope's privacy rule for events
        # lets out (gate.services.event_delivery.WebhookDelivery.body_of; docs/privacy.md).
        self.body_of = body_of or (lambda row: str(row["event_json"]).encode("utf-8"))
        self._loop = asyncio.new_event_loop()
        self._nc: Any = None
        self._js: Any = None

    def _run(self, coroutine: Any) -> Any:
        return self._loop.run_until_complete(coroutine)

    async def _connect(self) -> None:
        import nats  # the server extra carries nats-py; imported only where a stream is configured
        from nats.js.api import StreamConfig

        if self._nc is not None and self._nc.is_connected:
            return
        self._nc = await nats.connect(self.url, connect_timeout=5, max_reconnect_attempts=0,
                                      allow_reconnect=False)
        self._js = self._nc.jetstream()
        config = StreamConfig(name=self.stream, subjects=[SUBJECT_PREFIX + ".>"],
                              duplicate_window=DUPLICATE_WINDOW_SECONDS)
        try:
            await self._js.add_stream(config)
        except Exception as exc:
            if "already in use" not in str(exc):
                raise

    async def _publish_pending(self, batch: int) -> int:
        from gate.events.cloudevent import TYPE_PREFIX

        await self._connect()
        sent = 0
        for scope in self.outbox.scopes():
            cursor = self.outbox.stream_cursor(self.name, scope)
            rows = self.outbox.events_after(scope, cursor, limit=batch)
            for row in rows:
                await self._js.publish(subject_of(scope, row["event_type"], TYPE_PREFIX),
                                       self.body_of(row), stream=self.stream,
                                       headers={"Nats-Msg-Id": row["event_id"],
                                                "Content-Type": "application/cloudevents+json"})
                sent += 1
            if rows:
                self.outbox.set_stream_cursor(self.name, scope, rows[-1]["seq"])
        return sent

    def publish_pending(self, batch: int = 500) -> int:
        """Publish up to `batch` events of each scope; how many were sent (duplicates included)."""
        try:
            return int(self._run(self._publish_pending(batch)))
        except Exception:
            self._drop()
            raise

    def _drop(self) -> None:
        nc, self._nc, self._js = self._nc, None, None
        if nc is not None:
            with contextlib.suppress(Exception):  # closing a connection that already broke
                self._run(nc.close())

    def close(self) -> None:
        self._drop()
        self._loop.close()
