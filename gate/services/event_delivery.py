"""Webhook delivery, the dispatcher's turn (docs/events.md): the ordered walk of one subscription
from its cursor under its lease, with its retries, breakers, signatures and replays.

A subscription walks its scope's outbox in `seq` order from its cursor. Each event it wants is
posted (Standard Webhooks signature over the CloudEvent's canonical bytes) until a 2xx; a failure
is retried with backoff (`gate.events.backoff`) and holds the events behind it, so a receiver sees
one scope's events in order; events it does not want move the cursor without a post. A
subscription whose oldest undelivered event has failed for `DISABLE_AFTER_SECONDS` is disabled,
which is itself an event. At least once: the cursor moves after the 2xx (written with the
attempts, one transaction per `FLUSH_EVERY` deliveries), so a dispatcher killed in between posts
those events again (receivers deduplicate by `webhook-id`).

Who delivers: any number of dispatchers (threads of `gate serve` workers, on any number of hosts
sharing one ledger, or `gate events dispatch`) claim a subscription by a lease in its row (compare
and set in one UPDATE), so one at a time delivers it and none is left unclaimed once a lease expires.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from gate.clock import Clock, iso_ms
from gate.errors import GateError
from gate.events import backoff, signatures
from gate.events.breaker import GONE, THROTTLE_STATUSES, Breakers
from gate.events.cloudevent import CONTENT_TYPE, TYPE_PREFIX, OutboxRow
from gate.events.targets import Target, check
from gate.events.webhook import Connections, Delivery, post
from gate.ledger.outbox import DeliveryAttempt, Outbox, SubscriptionChange, SubscriptionRow, event_types_of
from gate.services.privacy import PrivacyService

log = logging.getLogger("gate.events")

BUDGET = 200  # events one subscription's turn delivers at most before the others get theirs
TURN_SHARE_OF_LEASE = 0.25  # and a turn ends after this share of its lease, so no turn outlasts it
FLUSH_EVERY = 50  # successful deliveries whose attempts and cursor one ledger transaction writes
LEASE_SECONDS = 60
WILDCARD = "*"
Poster = Callable[[Target, Mapping[str, str], bytes], Delivery]


def utc(text: str) -> datetime:
    """A stored ISO 8601 time (`iso_ms`'s, or one a caller gave) as an aware UTC datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


class WebhookDelivery:
    """Delivery turns over one outbox: the subscriptions due, one subscription's turn under its
    lease, and what it posts (the body as it leaves, its signatures, its checked target)."""

    def __init__(self, outbox: Outbox, clock: Clock, *, allow_hosts: Collection[str] = (),
                 poster: Poster | None = None, resolve: Callable[[str, int], list[str]] | None = None,
                 signing: Any = None, lease_seconds: int = LEASE_SECONDS,
                 on_attempt: Callable[[bool, bool], None] | None = None,
                 privacy: PrivacyService | None = None) -> None:
        """Built by the composition root (`gate.services.root.compose_events`) over the event
        service's outbox and clock: `privacy` masks every delivery by the scope's `events` rule
        (docs/privacy.md; None: the rows leave as stored); `resolve` stands in for DNS in tests."""
        self.outbox = outbox
        # A pass holds each subscription it delivers for this long (GATE_EVENTS_LEASE_SECONDS); a
        # dispatcher that dies leaves its lease to expire, and a pass that outlasts it may see
        # another dispatcher post the same events again (at least once still holds).
        self.lease_seconds = lease_seconds
        self.signing = signing  # its attestation_key() (Ed25519) signs deliveries that ask for it
        self.clock = clock
        self.allow_hosts = frozenset(allow_hosts)
        self.connections = Connections()  # kept-alive connections, per delivery thread and endpoint
        self.poster: Poster = poster or partial(post, connections=self.connections)
        self._resolve = resolve
        self.on_attempt = on_attempt  # (ok, replay): the shell's metrics
        self.breakers = Breakers(lambda: self.clock.now().timestamp())  # per scope and endpoint, this process's
        self.privacy = privacy

    def body_of(self, row: OutboxRow) -> bytes:
        """The bytes one outbox row leaves as (a webhook's body, a stream message)."""
        if self.privacy is None:
            return str(row["event_json"]).encode("utf-8")
        return self.privacy.event_body(row)


    def target(self, url: object) -> Target:
        """The checked target, or TargetRefused (EVENT_TARGET_REFUSED)."""
        if self._resolve is not None:
            return check(url, self.allow_hosts, self._resolve)
        return check(url, self.allow_hosts)


    def due(self) -> list[SubscriptionRow]:
        """The active subscriptions with work now: replays queued, or events after their cursor
        and past their retry time. One with neither is not offered a turn: a turn claims and
        releases the subscription's lease, two write transactions, and an idle subscription paid
        them every pass (each second), beside the decides' writes on the same ledger."""
        rows = self.outbox.subscriptions(active_only=True)
        if not rows:
            return []
        now, replaying = self.clock.now(), self.outbox.replaying()
        heads = self.outbox.heads(row["scope"] for row in rows)
        return [row for row in rows if row["subscription_id"] in replaying
                or (heads.get(row["scope"], 0) > row["cursor"]
                    and not (row["next_attempt_at"] and utc(row["next_attempt_at"]) > now))]

    def dispatch_once(self, owner: str, budget: int = BUDGET) -> int:
        """One pass over every due subscription, one after another (`gate events dispatch --once`
        and the tests; the `Dispatcher` runs them concurrently): deliver up to `budget` events
        each. Returns how many posts were made."""
        return sum(self.deliver_turn(owner, row, budget)[0] for row in self.due())

    def deliver_turn(self, owner: str, row: SubscriptionRow, budget: int = BUDGET) -> tuple[int, bool]:
        """One subscription's turn: under its lease, up to `budget` events (replays first).
        Returns (posts made, whether it has more to deliver at once). An endpoint whose breaker
        is open (`gate.events.breaker`) is not tried: its events wait in the ledger."""
        if not self.breakers.allows(row["url"], row["scope"]):
            return 0, False
        now = self.clock.now()
        until = iso_ms(now + timedelta(seconds=self.lease_seconds))
        if not self.outbox.claim(row["subscription_id"], owner, iso_ms(now), until):
            return 0, False
        try:
            # Read it again under the lease: the listing above may predate another
            # dispatcher's progress, and its cursor would post those events twice.
            held = self.outbox.subscription(row["scope"], row["subscription_id"])
            return self._deliver(owner, held, budget) if held is not None else (0, False)
        finally:
            self.outbox.release(row["subscription_id"], owner)

    def _deliver(self, owner: str, row: SubscriptionRow, budget: int) -> tuple[int, bool]:
        """The ordered walk from the cursor. Attempts and the cursor are written together, one
        ledger transaction per `FLUSH_EVERY` successes (and at the end of the turn or before a
        failure): a dispatcher killed in between posts those events again (at least once)."""
        posts, gone = self._replays(row, budget)
        wanted = set(event_types_of(row))
        cursor, attempts = row["cursor"], row["attempts"]
        if gone or (row["next_attempt_at"] and utc(row["next_attempt_at"]) > self.clock.now()):
            return posts, False
        events = self.outbox.events_after(row["scope"], cursor, limit=budget)
        if events and events[0]["seq"] != cursor + 1:  # a scope's seqs have no gaps: these were pruned
            self._disable(row, f"events {cursor + 1} to {events[0]['seq'] - 1} were pruned before their delivery",
                          cursor, row["failing_since"] or iso_ms(self.clock.now()))
            return posts, False
        done: list[DeliveryAttempt] = []  # attempts not yet written
        ends = time.monotonic() + self.lease_seconds * TURN_SHARE_OF_LEASE
        target = self._turn_target(row) if events else None
        for event in events:
            if time.monotonic() > ends:  # a slow receiver: the rest in the next turn, under a new lease
                return posts, self._flush(owner, row, done, cursor)
            name = event["event_type"][len(TYPE_PREFIX):]
            if WILDCARD in wanted or name in wanted:
                posts += 1
                result, attempt = self._post(row, event, replay=False, target=target)
                done.append(attempt)
                if not result.ok:
                    self._flush(owner, row, done, cursor)
                    # a cursor that moved forgot the earlier failures (attempts, failing_since)
                    moved = cursor != row["cursor"]
                    self._failed(owner, {**row, "failing_since": None} if moved else row,
                                 1 if moved else attempts + 1, cursor, result)
                    return posts, False
            cursor = event["seq"]
            if len(done) >= FLUSH_EVERY:
                if not self._flush(owner, row, done, cursor):
                    return posts, False  # the lease was lost: whoever holds it now carries on from the stored cursor
                done = []
        if not self._flush(owner, row, done, cursor):
            return posts, False
        return posts, len(events) >= budget

    def _flush(self, owner: str, row: SubscriptionRow, done: list[DeliveryAttempt], cursor: int) -> bool:
        """Write the attempts made and (when it moved past the stored one) the cursor with the
        failures forgotten, in one transaction; False when the lease was lost meanwhile."""
        moved = cursor != row["cursor"]
        if not done and not moved:
            return True
        values: SubscriptionChange | None = ({"cursor": cursor, "attempts": 0, "failing_since": None,
                                              "next_attempt_at": None} if moved else None)
        return self.outbox.delivered(row["subscription_id"], owner, done, values)

    def _replays(self, row: SubscriptionRow, budget: int) -> tuple[int, bool]:
        """Queued replays, in seq order: (posts made, whether the receiver said 410 Gone; the
        subscription is then disabled and nothing more is tried)."""
        posts = 0
        for seq in self.outbox.replays(row["subscription_id"], limit=budget):
            event = self.outbox.event(row["scope"], seq)
            if event is not None:
                posts += 1
                result, attempt = self._post(row, event, replay=True)
                self.outbox.record_attempt(attempt)
                if result.status_code == GONE:
                    self._gone(row, row["cursor"])
                    return posts, True
                if not result.ok:
                    break  # kept: tried again on the next pass
            self.outbox.replay_done(row["subscription_id"], seq)
        return posts, False

    def _secrets(self, row: SubscriptionRow) -> list[str]:
        keys = [row["secret"]]
        if row["previous_secret"] and row["previous_until"] and utc(row["previous_until"]) > self.clock.now():
            keys.append(row["previous_secret"])
        return keys

    def ed25519_key(self) -> Any:
        return self.signing.attestation_key() if self.signing is not None else None

    def _headers(self, row: SubscriptionRow, event: Mapping[str, Any], stamp: int, body: bytes) -> dict[str, str]:
        """Standard Webhooks headers; with `sign_ed25519`, a `v1a` signature by the gate's Ed25519
        key beside the HMAC ones, and `webhook-key-id` naming it in the published key registry.
        SECURITY: no key, no delivery (GateError): a receiver that asked for it never gets less."""
        signature = signatures.signature_header(self._secrets(row), event["event_id"], stamp, body)
        headers = {"content-type": CONTENT_TYPE, "webhook-id": event["event_id"], "webhook-timestamp": str(stamp),
                   "webhook-signature": signature, "user-agent": "decision-gate-webhooks/1"}
        if row["sign_ed25519"]:
            key = self.ed25519_key()
            if key is None:
                raise GateError("SIGNING_KEY_MISSING", "no Ed25519 key to sign this delivery with")
            headers["webhook-signature"] += " " + signatures.sign_ed25519(key, event["event_id"], stamp, body)
            headers["webhook-key-id"] = key.key_id
        return headers

    def _turn_target(self, row: SubscriptionRow) -> Target | None:
        """The subscription's target checked once for a turn's ordered walk (a turn lasts at most
        a share of its lease), or None when it is refused: each post then checks it and fails as
        it says. The delivery still connects to the address this check approved."""
        try:
            return self.target(row["url"])
        except GateError:
            return None

    def _post(self, row: SubscriptionRow, event: OutboxRow, *, replay: bool,
              target: Target | None = None) -> tuple[Delivery, DeliveryAttempt]:
        """Sign and post one event to `target` (checked now when not given): (the result, its
        attempt row, for the caller to write)."""
        body = self.body_of(event)
        now = self.clock.now()
        try:
            checked = target if target is not None else self.target(row["url"])
            result = self.poster(checked, self._headers(row, event, int(now.timestamp()), body), body)
        except GateError as refused:  # the host moved inside since it was checked, or no key: never posted
            result = Delivery(False, None, 0, refused.message[:300])
        self.breakers.record(row["url"], result.ok, result.status_code, result.retry_after, row["scope"])
        if self.on_attempt is not None:
            self.on_attempt(result.ok, replay)
        return result, {
            "subscription_id": row["subscription_id"], "scope": row["scope"], "seq": event["seq"],
            "event_id": event["event_id"], "attempted_at": iso_ms(now), "ok": int(result.ok),
            "status_code": result.status_code, "latency_ms": result.latency_ms, "excerpt": result.excerpt,
            "replay": int(replay)}

    def _failed(self, owner: str, row: SubscriptionRow, attempts: int, cursor: int, result: Delivery) -> None:
        """After a failed ordered delivery: 410 Gone disables the subscription (Standard Webhooks);
        a failure that has lasted `DISABLE_AFTER_SECONDS` does too; otherwise the next try waits
        for the backoff, and no less than a throttling answer's `Retry-After`."""
        if result.status_code == GONE:
            self._gone(row, cursor)
            return
        now = self.clock.now()
        since = row["failing_since"] or iso_ms(now)
        if (now - utc(since)).total_seconds() >= backoff.DISABLE_AFTER_SECONDS:
            reason = f"deliveries failed for {backoff.DISABLE_AFTER_SECONDS / 3600:.0f} hours ({attempts} attempts)"
            self._disable(row, reason, cursor, since)
            return
        wait = backoff.delay(attempts)
        if result.status_code in THROTTLE_STATUSES and result.retry_after is not None:
            wait = max(wait, result.retry_after)
        self.outbox.update_subscription(row["subscription_id"], {
            "attempts": attempts, "failing_since": since,
            "next_attempt_at": iso_ms(now + timedelta(seconds=wait))}, owner)

    def _gone(self, row: SubscriptionRow, cursor: int) -> None:
        self._disable(row, "the receiver answered 410 Gone", cursor, row["failing_since"] or iso_ms(self.clock.now()))

    def _disable(self, row: SubscriptionRow, reason: str, cursor: int, since: str) -> None:
        self.outbox.disable(row, reason, iso_ms(self.clock.now()), ("subscription.disabled", {
            "subscription_id": row["subscription_id"], "url": row["url"], "reason": reason,
            "undelivered_after_seq": cursor, "failing_since": since}))
        log.warning("webhook subscription %s disabled: %s", row["subscription_id"], reason)

