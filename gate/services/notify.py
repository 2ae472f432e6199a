"""Reviewers' channels, the use case (docs/integrations.md, "Reviewers' channels: e-mail and Slack").

A queue of the hold policy may name channels (`queues.<name>.notify`, gate.holds.policy): e-mail
addresses and a Slack channel. The events dispatcher (gate.services.events.Dispatcher) runs one
pass per channel kind as one of its tasks, so there is no loop of its own and a slow SMTP server
never holds up Slack (nor webhooks): each kind walks each scope's events outbox from a cursor of
its own and tells the queue's channels of every `hold.opened` event, never on the decide's path.

* A hold closed anywhere (`hold.resolved`, `hold.expired`): its Slack message, kept in
  `slack_messages` when posted, has the hold's buttons replaced by the resolution (`chat.update`;
  a digest keeps the other holds' buttons), in the same pass, never on the resolving path.
* A hold whose inputs were removed (retention or erasure, gate.ledger.removals): its message's
  stored blocks were rewritten in the removal's transaction (the hold's facts and buttons become
  one line saying so; a digest keeps the other holds') and marked stale; the next pass sends them
  (`chat.update`) and clears the mark; a message Slack says is gone (`GONE`) is not tried again.
* A hold escalated or reassigned to another queue: that queue's channels are told of it at once
  (whatever its digest), as of a hold opened there.
* At once: a hold of a queue with `every_seconds` 0, or of priority `high` or `urgent`, is sent
  by itself (cursor `notify.<kind>`).
* Digest: the other holds of a queue with `every_seconds` N wait on that queue's own cursor
  (`notify-d.<kind>.<queue>`) until the first of them is N seconds old; then one message names
  every one still open.
* A hold that closed or passed its deadline before its notice went out is not announced.
* Retried like any delivery: the cursor moves past an event only after its message was accepted;
  a failure leaves it there, counts against the channel's endpoint breaker
  (gate.events.breaker: three failures in a row leave the server alone for 30 s, doubling up to
  5 minutes) and is tried again on a later pass. At least once: a dispatcher killed between the
  server's acceptance and the cursor's write sends that notice again.
* One dispatcher at a time per kind and scope: a lease row (`notify-lease.<kind>`) taken by a
  compare-and-set in the ledger, so two serving processes never send the same notice twice. A
  scope with no event past its cursor and no digest waiting is passed by reads alone (no lease).
* A scope none of whose queues names the channel keeps its cursor at its events' head, so
  channels added later tell only of holds opened after (and of earlier ones a digest still holds).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any

from gate.clock import Clock, SystemClock
from gate.events.breaker import Breakers
from gate.events.cloudevent import TYPE_PREFIX
from gate.events.notices import (
    MAX_SLACK_HOLDS,
    Notice,
    email_message,
    post_slack,
    resolved_blocks,
    send_email,
    slack_client,
)
from gate.events.outbound import Outbound, for_settings
from gate.holds.events import OPEN
from gate.holds.links import inbox_url
from gate.holds.policy import Notify, Queue
from gate.ledger import Ledger
from gate.ledger.holds import HoldLedger
from gate.ledger.outbox import Outbox
from gate.ledger.slack_messages import SlackMessages
from gate.privacy.datamap import NOTICES
from gate.services.governance import SafeguardSettings
from gate.services.hold_reads import hold_requests
from gate.services.privacy import PrivacyService

log = logging.getLogger("gate.notify")

BATCH = 200  # events one pass reads per scope and cursor
LEASE_SECONDS = 60
_EPOCH = datetime(2020, 1, 1, tzinfo=UTC)  # lease times are whole seconds after it (fit the cursor column)
OPENED = TYPE_PREFIX + "hold.opened"
MOVED = (TYPE_PREFIX + "hold.escalated", TYPE_PREFIX + "hold.reassigned")
CLOSED = (TYPE_PREFIX + "hold.resolved", TYPE_PREFIX + "hold.expired")
GONE = ("message_not_found", "cant_update_message", "channel_not_found", "is_archived", "not_in_channel",
        "edit_window_closed")  # Slack's answers that no retry changes: the message stays as it was
REMOVED_TEXT = "A hold's inputs were removed."  # the notification text of such an update (no values)
Sender = Callable[[Queue, Sequence[Notice]], None]


def _names(value: object) -> list[str]:
    return [str(name) for name in value] if isinstance(value, list) else []


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


class Channel:
    """One kind of channel: its name, its server's address (the breaker's key), which queues
    name it, how it sends a message (one hold or a digest) and, for Slack, how it updates the
    message of a hold that closed."""

    def __init__(self, name: str, endpoint: str, wants: Callable[[Notify], bool], send: Sender,
                 closed: Callable[[str, str], bool] | None = None,
                 stale: Callable[[str], list[dict[str, Any]]] | None = None,
                 resend: Callable[[dict[str, Any]], bool] | None = None) -> None:
        self.name, self.endpoint, self.wants, self.send = name, endpoint, wants, send
        self.closed = closed  # (scope, decision_id) → whether a message was updated to say it closed
        # scope → its messages whose inputs were removed since sent; one such → whether it was sent
        self.stale, self.resend = stale, resend


def email_channel(url: str, sender: str, outbound: Outbound | None = None) -> Channel:
    def send(queue: Queue, notices: Sequence[Notice]) -> None:
        assert queue.notify is not None  # noqa: S101 - only queues that name the channel are sent
        send_email(url, email_message(sender, queue.notify.email, notices), outbound=outbound)

    return Channel("email", url, lambda notify: bool(notify.email), send)


def slack_channel(token: str, api_url: str, ledger: Ledger, outbound: Outbound | None = None) -> Channel:
    """Posts each notice and keeps where (`slack_messages`); a closed hold's message then has its
    buttons replaced by the resolution (`chat.update`), a digest keeping the other holds' buttons."""
    client = slack_client(token, api_url, outbound)
    messages, holds = SlackMessages(ledger), HoldLedger(ledger)

    def send(queue: Queue, notices: Sequence[Notice]) -> None:
        assert queue.notify is not None and queue.notify.slack_channel  # noqa: S101 - as above
        where, ts, blocks = post_slack(client, queue.notify.slack_channel, notices)
        if where and ts:
            shown = notices[:MAX_SLACK_HOLDS]  # the holds with buttons
            messages.sent(notices[0].scope, [n.decision_id for n in shown], where, ts, blocks)

    def closed(scope: str, decision_id: str) -> bool:
        row = holds.hold(scope, decision_id)
        if row is None or row["state"] == OPEN:
            return False
        told = False
        for message in messages.of(scope, decision_id):
            told = _update(client, messages, message, decision_id, row["state"], row["resolved_by"] or "?") or told
        return told

    def resend(message: dict[str, Any]) -> bool:
        """`chat.update` of a message whose stored blocks a removal of inputs rewrote."""
        try:
            client.chat_update(channel=message["channel"], ts=message["ts"], text=REMOVED_TEXT,
                               blocks=message["blocks"])
        except Exception as error:
            code = getattr(getattr(error, "response", None), "get", lambda _: None)("error")
            if code not in GONE:
                raise  # the server failed: retried on a later pass
            log.warning("a Slack message whose holds' inputs were removed cannot be updated (%s)", code)
            messages.sent_again(message["channel"], message["ts"], message["text"])
            return False
        messages.sent_again(message["channel"], message["ts"], message["text"])
        return True

    return Channel("slack", api_url, lambda notify: notify.slack_channel is not None, send, closed,
                   messages.stale, resend)


def _update(client: Any, messages: SlackMessages, message: dict[str, Any], decision_id: str, state: str,
            by: str) -> bool:
    """`chat.update` of one message: the hold's buttons replaced by how it closed (once: a
    message whose blocks no longer hold them was told already)."""
    if not any(b.get("block_id") == f"hold:{decision_id}"[:255] for b in message["blocks"] if isinstance(b, dict)):
        return False
    blocks = resolved_blocks(decision_id, state, by, message["blocks"])
    try:
        client.chat_update(channel=message["channel"], ts=message["ts"], text=f"Decision {decision_id}: {state}",
                           blocks=blocks)
    except Exception as error:
        code = getattr(getattr(error, "response", None), "get", lambda _: None)("error")
        if code not in GONE:
            raise  # the server failed: retried on a later pass
        log.warning("the Slack message of %s cannot be updated (%s); left as it is", decision_id, code)
        return False
    messages.updated(message["channel"], message["ts"], blocks, message["blocks"])
    return True


class Notifier:
    """The configured channels over one ledger; `tasks()` are the dispatcher's passes."""

    def __init__(self, ledger: Ledger, channels: Sequence[Channel], safeguards: SafeguardSettings,
                 clock: Clock | None = None, inbox_base: str | None = None,
                 privacy: PrivacyService | None = None) -> None:
        """`safeguards`: the composition root's one reader of the hold policy in force (each
        queue's recipients and `show`)."""
        self.ledger = ledger
        # The scope's data map and `notices` rule (issue 67): what `show` names still leaves only
        # as that rule lets it (gate.holds.disclosure.disclose; docs/privacy.md).
        self.privacy = privacy
        self.outbox = Outbox(ledger)
        self.holds = HoldLedger(ledger)
        self.safeguards = safeguards
        self.channels = tuple(channels)
        self.clock = clock or SystemClock()
        self.inbox_base = inbox_base
        self.breakers = Breakers(lambda: self.clock.now().timestamp())

    def tasks(self) -> dict[str, Callable[[], int]]:
        """One dispatcher task per channel kind: `notify-email`, `notify-slack`."""
        return {f"notify-{channel.name}": partial(self.run, channel) for channel in self.channels}

    def run(self, channel: Channel) -> int:
        """One pass of a channel over every scope; how many messages it sent. A scope whose send
        failed is logged and left for a later pass; the others go on."""
        sent = 0
        for scope in self.outbox.scopes():
            if not self.breakers.allows(channel.endpoint):
                break  # the server failed again and again: its notices wait in the outbox
            queues = self._due(channel, scope)
            stale = channel.stale(scope) if channel.stale is not None else []
            if not queues and not stale:
                continue
            now = int((self.clock.now() - _EPOCH).total_seconds())
            lease = f"notify-lease.{channel.name}"
            if not self.outbox.claim_stream(lease, scope, now, now + LEASE_SECONDS):
                continue
            try:
                sent += self._resend(channel, stale)
                sent += self._scope(channel, scope, queues) if queues else 0
            except Exception as error:  # noqa: BLE001 - any failure of the server: retried on a later pass
                self.breakers.record(channel.endpoint, False, None, None)
                log.warning("%s notice for scope %r not sent (%s: %s); it is tried again", channel.name, scope,
                            type(error).__name__, str(error)[:200])
            finally:
                self.outbox.release_stream(lease, scope, now + LEASE_SECONDS)
        return sent

    def _resend(self, channel: Channel, stale: Sequence[dict[str, Any]]) -> int:
        """Under the lease: each message whose holds' inputs were removed is sent as now stored."""
        sent = 0
        for message in stale:
            if channel.resend is not None and channel.resend(message):
                self.breakers.record(channel.endpoint, True, None, None)
                sent += 1
        return sent

    def _due(self, channel: Channel, scope: str) -> dict[str, Queue]:
        """The scope's queues that name the channel when it has work (reads only, no lease): an
        event past its cursor, or a digest waiting. A scope none of whose queues names it has its
        cursor moved to its head (the head read before the policy: a hold opened after it is
        never skipped)."""
        name = f"notify.{channel.name}"
        head = self.outbox.head(scope)
        queues = {q.name: q for q in self.safeguards.hold_policy(scope).queues
                  if q.notify is not None and channel.wants(q.notify)}
        cursor = self.outbox.stream_cursor(name, scope)
        if not queues:
            if cursor < head:
                self.outbox.set_stream_cursor(name, scope, head)
            return {}
        digests = any(q.notify is not None and q.notify.every_seconds for q in queues.values())
        return queues if cursor < head or digests else {}

    def _scope(self, channel: Channel, scope: str, queues: dict[str, Queue]) -> int:
        """Under the lease: each digest that is due, then every hold to tell at once."""
        name = f"notify.{channel.name}"
        cursor = self.outbox.stream_cursor(name, scope)
        sent = 0
        for queue in queues.values():  # each digest cursor starts where the immediate one stands
            if queue.notify is not None and queue.notify.every_seconds:
                digest = f"notify-d.{channel.name}.{queue.name}"
                at = self.outbox.stream_cursor(digest, scope, missing=-1)
                if at < 0:
                    at = cursor
                    self.outbox.set_stream_cursor(digest, scope, at)
                sent += self._digest(channel, scope, queue, at)
        for event in self.outbox.events_after(scope, cursor, limit=BATCH):
            kind = event["event_type"]
            data = json.loads(event["event_json"])["data"] if kind in (OPENED, *MOVED, *CLOSED) else None
            if data and kind in CLOSED and channel.closed is not None and channel.closed(scope, data["decision_id"]):
                self.breakers.record(channel.endpoint, True, None, None)
                sent += 1
            owner = queues.get(data["queue"]) if data and kind in (OPENED, *MOVED) else None
            if data and owner is not None and owner.notify is not None and (
                    owner.notify.at_once(data["priority"]) if kind == OPENED else self._moved_into(scope, data)):
                notice = self._notice(scope, data, owner)
                if notice is not None and notice.queue == owner.name:
                    channel.send(owner, [notice])
                    self.breakers.record(channel.endpoint, True, None, None)
                    sent += 1
            self.outbox.set_stream_cursor(name, scope, event["seq"])
        return sent

    def _moved_into(self, scope: str, data: dict[str, Any]) -> bool:
        """Whether the hold was moved into `data["queue"]` (escalated or reassigned to it), not an
        escalation that found no queue to go to (its hold event keeps the queue and says why)."""
        return any(e["action"] == "reassign" or (e["action"] == "escalate" and e["note"] is None)
                   for e in self.holds.events_of(scope, data["decision_id"]) if e["queue"] == data["queue"])

    def _digest(self, channel: Channel, scope: str, queue: Queue, cursor: int) -> int:
        """The queue's held-back holds in one message once the first is `every_seconds` old."""
        assert queue.notify is not None  # noqa: S101 - only queues with a digest come here
        name = f"notify-d.{channel.name}.{queue.name}"
        events = self.outbox.events_after(scope, cursor, limit=BATCH)
        waiting = []
        for event in events:
            data = json.loads(event["event_json"])["data"] if event["event_type"] == OPENED else None
            if data and data["queue"] == queue.name and not queue.notify.at_once(data["priority"]):
                waiting.append((event, data))
        if waiting and (self.clock.now() - _utc(waiting[0][0]["created_at"])).total_seconds() \
                < queue.notify.every_seconds:
            return 0  # the digest's time has not come: nothing moves
        notices = [n for n in (self._notice(scope, data, queue) for _, data in waiting) if n is not None]
        if notices:
            channel.send(queue, notices)
            self.breakers.record(channel.endpoint, True, None, None)
        if events:
            self.outbox.set_stream_cursor(name, scope, events[-1]["seq"])
        return 1 if notices else 0

    def _notice(self, scope: str, data: dict[str, Any], to: Queue) -> Notice | None:
        """The hold as the channels of the queue `to` are told of it (its request first, what
        the queue's `show` lets out), or None when it closed or its deadline passed."""
        row = self.holds.hold(scope, data["decision_id"])
        if row is None or row["state"] != OPEN or _utc(row["deadline_at"]) <= self.clock.now():
            return None
        facts = json.loads(row["facts_json"])
        missing, invalid = self._lacking(scope, row["decision_id"])
        masker = self.privacy.decision_masker(scope, row["decision_id"], NOTICES) if self.privacy else None
        return Notice(scope, row["decision_id"], row["queue"], row["priority"], row["deadline_at"], row["policy_id"],
                      row["rule_id"], row["reason_code"], facts if isinstance(facts, dict) else {},
                      inbox_url(self.inbox_base, scope, row["decision_id"]), missing, invalid,
                      hold_requests(self.holds, scope, [row])[row["decision_id"]], to.show, masker)

    def _lacking(self, scope: str, decision_id: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """A needs-input record's missing and invalid facts, as its record states them."""
        stored = self.ledger.decision(scope, decision_id)
        record = json.loads(stored.record_json) if stored is not None else {}
        if not isinstance(record, dict) or record.get("status") != "needs_input":
            return (), ()
        return tuple(_names(record.get("missing_fields"))), tuple(_names(record.get("invalid_fields")))


def notifier_from_settings(ledger: Ledger, settings: Any, safeguards: SafeguardSettings, clock: Clock | None = None,
                           privacy: PrivacyService | None = None) -> Notifier | None:
    """The channels `settings` configure (gate.settings: GATE_SMTP_URL and GATE_SMTP_FROM,
    GATE_SLACK_BOT_TOKEN), or None when neither is; `privacy`: the data map they ask (issue 67)."""
    channels = []
    outbound = for_settings(settings)
    if settings.smtp_url and settings.smtp_from:
        channels.append(email_channel(settings.smtp_url, settings.smtp_from, outbound))
    if settings.slack_bot_token:
        channels.append(slack_channel(settings.slack_bot_token, settings.slack_api_url, ledger, outbound))
    return Notifier(ledger, channels, safeguards, clock, settings.workbench_url, privacy) if channels else None
