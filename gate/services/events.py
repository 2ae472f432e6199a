"""Events out, the use case (docs/events.md): webhook subscriptions per scope, the dispatcher that
delivers the outbox to them at least once and in order, and replays.

Delivery: a subscription walks its scope's outbox in `seq` order from its cursor. Each event it
wants is posted (Standard Webhooks signature over the CloudEvent's canonical bytes) until a 2xx;
a failure is retried with backoff (`gate.events.backoff`) and holds the events behind it, so a
receiver sees one scope's events in order; events it does not want move the cursor without a
post. A subscription whose oldest undelivered event has failed for `DISABLE_AFTER_SECONDS` is
disabled, which is itself an event. At least once: the cursor moves after the 2xx (written with
the attempts, one transaction per `FLUSH_EVERY` deliveries), so a dispatcher killed in between posts
those events again (receivers deduplicate by `webhook-id`).

Retention: events older than `retention_days` (GATE_EVENTS_RETENTION_DAYS) that every active
subscription has settled are pruned by the `event-retention` worker, by sequence ranges in one
statement per pass (and beyond a size bound, GATE_EVENTS_RETENTION_BYTES, the oldest: settled first); reading,
replaying or resuming from a pruned range is refused with EVENTS_PRUNED, never answered with the
events silently missing (docs/events.md, "Retention"). The same worker prunes delivery attempts
older than the retention, keeping each subscription's newest `ATTEMPTS_KEPT` and counting the
pruned ones in its totals, so what `deliveries` reports does not change.

Who delivers: any number of dispatchers (threads of `gate serve` workers, on any number of hosts
sharing one ledger, or `gate events dispatch`) claim a subscription by a lease in its row (compare
and set in one UPDATE), so one at a time delivers it and none is left unclaimed once a lease expires.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, TypedDict

from gate import bodies
from gate.clock import Clock, SystemClock, iso_ms
from gate.errors import GateError, SigningUnavailable
from gate.events import backoff, signatures
from gate.events.breaker import GONE, THROTTLE_STATUSES, Breakers, endpoint_of
from gate.events.cloudevent import CONTENT_TYPE, EVENT_TYPES, TYPE_PREFIX
from gate.events.egress import EventSubscriptions
from gate.events.pool import FairPool
from gate.events.targets import Target, check
from gate.events.webhook import Connections, Delivery, post
from gate.governance.table import EVENT_SUBSCRIPTIONS
from gate.ledger import Ledger
from gate.ledger.outbox import Outbox, event_types_of
from gate.ledger.outbox_retention import OutboxRetention
from gate.principals import Permissions, Principal
from gate.protocol.canonical import canonical_text
from gate.releases.governance import GovernanceEvent, refusal_code
from gate.services.governance import GovernanceService, SafeguardSettings
from gate.services.periodic import PeriodicWorker
from gate.services.privacy import PrivacyService

log = logging.getLogger("gate.events")

MAX_SUBSCRIPTIONS_PER_SCOPE = 20
BUDGET = 200  # events one subscription's turn delivers at most before the others get theirs
TURN_SHARE_OF_LEASE = 0.25  # and a turn ends after this share of its lease, so no turn outlasts it
CONCURRENCY = 8  # subscriptions a dispatcher delivers at once (GATE_EVENTS_CONCURRENCY)
FLUSH_EVERY = 50  # successful deliveries whose attempts and cursor one ledger transaction writes
LEASE_SECONDS = 60
MAX_REPLAY_EVENTS = 10_000
RETENTION_DAYS = 30  # GATE_EVENTS_RETENTION_DAYS; 0 keeps every event
RETENTION_INTERVAL = 60.0  # seconds between the `event-retention` worker's passes
PRUNE_BATCH = 500  # delivery attempts one pruning transaction deletes at most
PRUNE_BATCHES_PER_PASS = 20  # per subscription: an attempts pass never runs unbounded
# Each subscription's newest delivery attempts, kept however old: the window `deliveries` reads its
# latency and last failures from, so a prune never changes what it shows (docs/events.md, "Retention").
ATTEMPTS_KEPT = 200
ROTATION_OVERLAP_SECONDS = 24 * 3600
MAX_ROTATION_OVERLAP_SECONDS = 7 * 24 * 3600
WILDCARD = "*"
PENDING = "pending"  # a subscription waiting for a second holder's approval: it delivers nothing (issue 64)
Poster = Callable[[Target, Mapping[str, str], bytes], Delivery]


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


SUBSCRIPTION = "event-subscription"  # gate/bodies/event-subscription.schema.json


def _invalid(message: str) -> GateError:
    return GateError("EVENT_SUBSCRIPTION_INVALID", message)


def _pruned(scope_pruned: int, what: str, retention_days: int) -> GateError:
    """EVENTS_PRUNED (410): `what` reaches events the retention has removed."""
    return GateError("EVENTS_PRUNED", f"{what} reaches events that were pruned: events 1 to {scope_pruned} of this "
                     f"scope were older than the retention ({retention_days} days) and delivered; the oldest kept "
                     f"is {scope_pruned + 1}", pruned_through=scope_pruned, oldest_kept=scope_pruned + 1)


def _checked_types(value: list[Any] | None) -> list[str]:
    """The named types of a list the schema has passed (each one of EVENT_TYPES, or `*`)."""
    if value is None:
        return [WILDCARD]
    names: list[str] = []
    for item in value:
        name = item[len(TYPE_PREFIX):] if isinstance(item, str) and item.startswith(TYPE_PREFIX) else item
        if name != WILDCARD and name not in EVENT_TYPES:
            raise _invalid(f"unknown event type {str(item)[:80]!r}; see docs/events.md")
        if name not in names:
            names.append(name)
    return sorted(names)


class SubscriptionView(TypedDict):
    """A subscription as its owners see it (`public_view`)."""

    subscription_id: str
    url: str
    event_types: list[str]
    status: str
    disabled_reason: str | None
    cursor: int
    failing_since: str | None
    next_attempt_at: str | None
    created_at: str
    created_by: str
    sign_ed25519: bool
    rotation_overlap_until: str | None


class DeliveryAttempt(TypedDict):
    """One post of one event to a subscription, as the ledger keeps it (`ok`, `replay`: 0 or 1)."""

    subscription_id: str
    scope: str
    seq: int
    event_id: str
    attempted_at: str
    ok: int
    status_code: int | None
    latency_ms: int
    excerpt: str
    replay: int


def public_view(row: Mapping[str, Any]) -> SubscriptionView:
    """A subscription as its owners see it: never its secrets."""
    return {"subscription_id": row["subscription_id"], "url": row["url"], "event_types": event_types_of(row),
            "status": row["status"], "disabled_reason": row["disabled_reason"], "cursor": row["cursor"],
            "failing_since": row["failing_since"], "next_attempt_at": row["next_attempt_at"],
            "created_at": row["created_at"], "created_by": row["created_by"],
            "sign_ed25519": bool(row["sign_ed25519"]),
            "rotation_overlap_until": row["previous_until"]}


class EventService:
    """Subscriptions, deliveries and replays over one ledger."""

    def __init__(self, ledger: Ledger, clock: Clock | None = None, *, allow_hosts: Collection[str] = (),
                 poster: Poster | None = None, resolve: Callable[[str, int], list[str]] | None = None,
                 signing: Any = None, lease_seconds: int = LEASE_SECONDS,
                 on_attempt: Callable[[bool, bool], None] | None = None,
                 retention_days: int = RETENTION_DAYS, retention_bytes: int = 0,
                 safeguards: SafeguardSettings, governance: GovernanceService | None = None,
                 privacy: PrivacyService | None = None) -> None:
        """Built by the composition root (`gate.services.root.event_service`): `safeguards` says
        whether a scope requires approvals (read fresh); `governance`, the serving process's
        governed-change service, makes a new subscription a request a second holder approves
        (None: subscriptions change directly); `privacy` masks every delivery by the scope's
        `events` rule (docs/privacy.md; None: the rows leave as stored)."""
        self.outbox = Outbox(ledger)
        self.outbox_retention = OutboxRetention(ledger)
        self.retention_days = retention_days  # 0: events are kept for ever
        self.retention_bytes = retention_bytes  # GATE_EVENTS_RETENTION_BYTES; 0: no size bound
        # A pass holds each subscription it delivers for this long (GATE_EVENTS_LEASE_SECONDS); a
        # dispatcher that dies leaves its lease to expire, and a pass that outlasts it may see
        # another dispatcher post the same events again (at least once still holds).
        self.lease_seconds = lease_seconds
        self.signing = signing  # its attestation_key() (Ed25519) signs deliveries that ask for it
        self.clock = clock or SystemClock()
        self.allow_hosts = frozenset(allow_hosts)
        self.connections = Connections()  # kept-alive connections, per delivery thread and endpoint
        self.poster: Poster = poster or partial(post, connections=self.connections)
        self._resolve = resolve
        self.on_attempt = on_attempt  # (ok, replay): the shell's metrics
        self.breakers = Breakers(lambda: self.clock.now().timestamp())  # per scope and endpoint, this process's
        self.safeguards = safeguards
        self.governance = governance
        self.privacy = privacy

    def body_of(self, row: Mapping[str, Any]) -> bytes:
        """The bytes one outbox row leaves as (a webhook's body, a stream message)."""
        if self.privacy is None:
            return str(row["event_json"]).encode("utf-8")
        return self.privacy.event_body(row)

    def _target(self, url: object) -> Target:
        """The checked target, or TargetRefused (EVENT_TARGET_REFUSED)."""
        if self._resolve is not None:
            return check(url, self.allow_hosts, self._resolve)
        return check(url, self.allow_hosts)

    # ------------------------------------------------------------------ subscriptions

    def subscribe(self, scope: str, actor: str, body: object) -> tuple[SubscriptionView, str]:
        """A new subscription: (its public view, its secret, shown this once). Without a principal
        (the operator's `gate events subscribe`) refused while the scope requires approvals: a new
        endpoint is then asked for through the API (`subscribe_governed`)."""
        row, secret = self._prepared(scope, actor, body)
        if self.safeguards.approvals_required(scope):
            raise GateError(refusal_code(EVENT_SUBSCRIPTIONS, "required"), "the scope requires approvals: a new "
                            "subscription is a request a second holder approves (POST /api/events/subscriptions)")
        row["cursor"] = self.outbox.add_subscription(row)
        return public_view(row), secret

    def subscribe_governed(self, scope: str, principal: Principal, permissions: Permissions,
                           body: object) -> tuple[SubscriptionView, str, GovernanceEvent | None]:
        """A new subscription by `principal` (`admin`): in force at once, or, while the scope
        requires approvals and it lets a URL receive event types it did not (gate.governance.table,
        `event_subscriptions`), stored `pending`, delivering nothing, until a second, distinct holder
        approves the request (`approve_subscriptions`). (view, secret shown this once, the signed
        governance event: None while the scope requires no approvals.)"""
        row, secret = self._prepared(scope, principal.actor, body)
        event = None
        if self.safeguards.approvals_required(scope):
            if self.governance is None:
                raise SigningUnavailable()  # SECURITY: no ungoverned endpoint where approvals are required
            event, _state = self.governance.change(
                scope, EVENT_SUBSCRIPTIONS, principal, permissions,
                lambda subs: subs.with_subscription(row["subscription_id"], row["url"], event_types_of(row)))
            if event is not None and event["action"] == "policy_request":
                row["status"] = PENDING
        row["cursor"] = self.outbox.add_subscription(row)
        return public_view(row), secret, event

    def approve_subscriptions(self, scope: str, principal: Principal, permissions: Permissions,
                              request_seq: Any, reason: str | None = None) -> tuple[list[SubscriptionView],
                                                                                    GovernanceEvent]:
        """A second, distinct holder (`approve`) applies a pending subscription request: the
        subscriptions it names deliver from then on (from their cursor: `from: beginning` too)."""
        if self.governance is None:
            raise SigningUnavailable()
        event, _state = self.governance.approve(scope, EVENT_SUBSCRIPTIONS, principal, permissions, request_seq,
                                                reason)
        before, after = (EventSubscriptions.from_json(event[name]) for name in ("policy_before", "policy_after"))
        started = []
        for subscription_id in sorted(set(after.subscriptions) - set(before.subscriptions)):
            row = self.outbox.subscription(scope, subscription_id)
            if row is not None and row["status"] == PENDING:
                self.outbox.update_subscription(subscription_id, {"status": "active"})
                started.append(public_view({**row, "status": "active"}))
        return started, event

    def pending_subscriptions(self, scope: str) -> dict[str, Any]:
        """The live subscription requests and the governance chain's seq."""
        if self.governance is None:
            raise SigningUnavailable()
        document = self.governance.document(scope, EVENT_SUBSCRIPTIONS)
        return {"pending": document["pending"], "governance_seq": document["governance_seq"]}

    def _prepared(self, scope: str, actor: str, body: object) -> tuple[dict[str, Any], str]:
        """A new subscription's row, checked (its body, its target, the scope's limit), and its secret."""
        if isinstance(body, Mapping):
            unknown, _ = bodies.closed_members(SUBSCRIPTION, body)
            if unknown:
                raise _invalid(f"unknown member(s): {', '.join(unknown)[:200]}")
        stated = bodies.checked(SUBSCRIPTION, body, "EVENT_SUBSCRIPTION_INVALID")
        types = _checked_types(stated.get("event_types"))
        start = stated.get("from", "now")
        self._target(stated.get("url"))
        ed25519 = stated.get("sign_ed25519", False)
        if ed25519 and self._ed25519_key() is None:
            raise _invalid("this gate has no Ed25519 key to sign deliveries with (gate keys signing-init)")
        if len(self.outbox.subscriptions(scope)) >= MAX_SUBSCRIPTIONS_PER_SCOPE:
            raise GateError("EVENT_SUBSCRIPTION_LIMIT", f"a scope has at most {MAX_SUBSCRIPTIONS_PER_SCOPE} "
                            "subscriptions; delete one first")
        secret = signatures.new_secret()
        row = {"subscription_id": "sub_" + secrets.token_hex(12), "scope": scope, "url": stated["url"],
               "event_types": canonical_text(types), "secret": secret, "previous_secret": None,
               "previous_until": None, "status": "active", "disabled_reason": None,
               "cursor": self.outbox.head(scope) if start == "now" else 0, "attempts": 0,
               "failing_since": None, "next_attempt_at": None, "lease_owner": None, "lease_until": None,
               "created_at": iso_ms(self.clock.now()), "created_by": actor, "sign_ed25519": int(ed25519)}
        return row, secret

    def _owned(self, scope: str, subscription_id: object) -> dict[str, Any]:
        row = self.outbox.subscription(scope, subscription_id) if isinstance(subscription_id, str) else None
        if row is None:  # SECURITY: another scope's subscription reads as absent
            raise GateError("EVENT_SUBSCRIPTION_NOT_FOUND", "no subscription with this id in this scope")
        return row

    def _approved(self, scope: str, subscription_id: object, what: str) -> dict[str, Any]:
        """The scope's subscription, refused with EVENT_SUBSCRIPTION_PENDING while its endpoint
        waits for a second holder's approval: nothing is sent to it, nor is it enabled, before."""
        row = self._owned(scope, subscription_id)
        if row["status"] == PENDING:
            raise GateError("EVENT_SUBSCRIPTION_PENDING", f"{what} waits for the approval of this subscription "
                            "(a second holder approves its request: POST /api/events/subscriptions/approvals)")
        return row

    def listed(self, scope: str) -> list[SubscriptionView]:
        return [public_view(r) for r in self.outbox.subscriptions(scope)]

    def show(self, scope: str, subscription_id: str) -> SubscriptionView:
        return public_view(self._owned(scope, subscription_id))

    def rotate(self, scope: str, subscription_id: str, overlap_seconds: object = None) -> tuple[SubscriptionView, str]:
        """A new secret; the old one keeps signing beside it for the overlap (deliveries carry
        both signatures until then), so receivers can switch without losing a delivery."""
        overlap = ROTATION_OVERLAP_SECONDS if overlap_seconds is None else overlap_seconds
        if not isinstance(overlap, int) or isinstance(overlap, bool) or not 0 <= overlap <= MAX_ROTATION_OVERLAP_SECONDS:
            raise _invalid(f"overlap_seconds must be a whole number from 0 to {MAX_ROTATION_OVERLAP_SECONDS}")
        row = self._owned(scope, subscription_id)
        secret = signatures.new_secret()
        until = iso_ms(self.clock.now() + timedelta(seconds=overlap))
        self.outbox.update_subscription(row["subscription_id"], {"secret": secret, "previous_secret": row["secret"],
                                                                 "previous_until": until})
        return public_view({**row, "previous_until": until}), secret

    def set_status(self, scope: str, subscription_id: str, status: object,
                   skip_pruned: object = False) -> SubscriptionView:
        """Enable (from the cursor where it stopped, failures forgotten) or disable by hand. A
        subscription whose undelivered events were pruned while it was disabled is not enabled
        (EVENTS_PRUNED) unless `skip_pruned`: it then resumes from the oldest kept event."""
        if status not in ("active", "disabled"):
            raise _invalid("status must be \"active\" or \"disabled\"")
        if not isinstance(skip_pruned, bool):
            raise _invalid("skip_pruned is true or false")
        row = self._approved(scope, subscription_id, "a change of its status")
        values: dict[str, object] = {"status": status, "disabled_reason": None if status == "active" else "by hand"}
        if status == "disabled":
            self.outbox.update_subscription(row["subscription_id"], values)
            return public_view({**row, **values})
        values.update(attempts=0, failing_since=None, next_attempt_at=None)
        refused = self.outbox.enable(row["subscription_id"], values, skip_pruned)
        if refused is not None:
            raise _pruned(refused, f"resuming from this subscription's cursor ({row['cursor']})", self.retention_days)
        return public_view(self._owned(scope, subscription_id))

    def read(self, scope: str, after: int, limit: int) -> list[dict[str, Any]]:
        """The scope's events after `after`, oldest first (`GET /api/events`); EVENTS_PRUNED when
        events after `after` were pruned (the reader would otherwise miss them without knowing)."""
        pruned, _ = self.outbox_retention.pruned(scope)
        if after < pruned:
            raise _pruned(pruned, f"reading after {after}", self.retention_days)
        return self.outbox.events_after(scope, after, limit)

    def replay(self, scope: str, subscription_id: str, body: object) -> int:
        """Queue events again: one (`{"seq": n}`) or a time range (`{"since": t, "until": t}`);
        EVENT_SUBSCRIPTION_PENDING to an endpoint whose approval has not been given."""
        row = self._approved(scope, subscription_id, "a replay")
        if not isinstance(body, Mapping) or set(body) - {"seq", "since", "until"}:
            raise _invalid("a replay names {\"seq\": n} or {\"since\": time, \"until\": time}")
        if "seq" in body:
            seq = body["seq"]
            pruned, _ = self.outbox_retention.pruned(scope)
            if isinstance(seq, int) and not isinstance(seq, bool) and 0 < seq <= pruned:
                raise _pruned(pruned, f"a replay of {seq}", self.retention_days)
            if not isinstance(seq, int) or isinstance(seq, bool) or self.outbox.event(scope, seq) is None:
                raise GateError("EVENT_NOT_FOUND", "no event with this seq in this scope")
            seqs = [seq]
        else:
            since, until = body.get("since"), body.get("until")
            try:
                first, last = iso_ms(_utc(str(since))), iso_ms(_utc(str(until)))
            except ValueError:
                raise _invalid("since and until must be ISO 8601 times") from None
            pruned, pruned_at = self.outbox_retention.pruned(scope)
            if pruned_at is not None and first <= pruned_at:
                raise _pruned(pruned, f"a replay since {first}", self.retention_days)
            seqs = self.outbox.seqs_between(scope, first, last)[:MAX_REPLAY_EVENTS + 1]
            if len(seqs) > MAX_REPLAY_EVENTS:
                raise _invalid(f"a replay covers at most {MAX_REPLAY_EVENTS} events; narrow the range")
        return self.outbox.add_replays(row["subscription_id"], seqs, iso_ms(self.clock.now()))

    def deliveries(self, scope: str, subscription_id: str, limit: int = 20) -> dict[str, Any]:
        """What a subscription's deliveries did: success rate over every attempt, latency of the
        recent ones, the last failures with the receiver's status and answer (text), the lag."""
        row = self._owned(scope, subscription_id)
        total, ok = self.outbox.attempt_totals(row["subscription_id"])
        recent = self.outbox.attempts(row["subscription_id"], limit=ATTEMPTS_KEPT)
        latencies = sorted(a["latency_ms"] for a in recent if a["ok"])
        failures = [{"seq": a["seq"], "event_id": a["event_id"], "attempted_at": a["attempted_at"],
                     "status_code": a["status_code"], "excerpt": a["excerpt"], "replay": bool(a["replay"])}
                    for a in recent if not a["ok"]][:limit]
        return {"subscription": public_view(row), "attempts": total, "succeeded": ok,
                "success_rate": (ok / total) if total else None,
                "latency_ms_p50": latencies[len(latencies) // 2] if latencies else None,
                "latency_ms_max": latencies[-1] if latencies else None,
                "latency_window": len(latencies),
                "lag": max(0, self.outbox.head(scope) - row["cursor"]),
                "pending_replays": len(self.outbox.replays(row["subscription_id"], limit=MAX_REPLAY_EVENTS)),
                "last_failures": failures}

    # ------------------------------------------------------------------ retention

    def prune(self, held_streams: Sequence[str] = ()) -> int:
        """One pass of the retention (the `event-retention` worker), in one transaction over every
        scope (`OutboxRetention.prune_pass`): the events older than `retention_days` that every active
        subscription (and each of `held_streams`, the stream cursors this gate publishes from) has
        settled, and, with `retention_bytes`, the oldest beyond the size bound (settled first;
        undelivered ones counted and logged), deleted by sequence ranges in one statement
        (PostgreSQL: whole day partitions dropped; SQLite: the freed pages returned to the file
        system); then the delivery attempts older than the retention (`prune_attempts`). Returns
        how many events were deleted."""
        if self.retention_days <= 0 and self.retention_bytes <= 0:
            return 0
        now = self.clock.now()
        cutoff = iso_ms(now - timedelta(days=self.retention_days)) if self.retention_days > 0 else ""
        done = self.outbox_retention.prune_pass(cutoff, held_streams, self.retention_bytes, now.date())
        if done.events:
            self.outbox_retention.return_space()
            log.info("event retention: %d event(s), %d bytes pruned (%d partition(s) dropped whole)", done.events,
                     done.bytes, done.partitions)
        for scope, (first, last) in done.dropped.items():
            log.warning("event retention: the outbox was over GATE_EVENTS_RETENTION_BYTES (%d): events %d to %d of "
                        "scope %s were dropped before every active subscription had them", self.retention_bytes,
                        first + 1, last, scope)
        if cutoff:
            self.prune_attempts(cutoff)
        return done.events

    def prune_attempts(self, cutoff: str) -> int:
        """Delete every subscription's delivery attempts made before `cutoff` (disabled ones' too),
        except its newest `ATTEMPTS_KEPT`, in transactions of at most `PRUNE_BATCH` attempts,
        `PRUNE_BATCHES_PER_PASS` per subscription; their counts stay in the subscription's totals,
        so `deliveries` reads the same after. Returns how many were deleted."""
        deleted = _in_batches(
            (row["subscription_id"] for row in self.outbox.subscriptions()),
            lambda sub: self.outbox_retention.attempts_prunable(sub, cutoff, ATTEMPTS_KEPT),
            lambda sub, batch: self.outbox_retention.prune_attempts_batch(sub, cutoff, ATTEMPTS_KEPT, batch))
        if deleted:
            log.info("event retention: %d delivery attempt(s) made before %s pruned", deleted, cutoff)
        return deleted

    # ------------------------------------------------------------------ delivery

    def due(self) -> list[dict[str, Any]]:
        """The active subscriptions with work now: past their retry time, or with replays queued."""
        now = self.clock.now()
        return [row for row in self.outbox.subscriptions(active_only=True)
                if not (row["next_attempt_at"] and _utc(row["next_attempt_at"]) > now)
                or self.outbox.replays(row["subscription_id"], limit=1)]

    def dispatch_once(self, owner: str, budget: int = BUDGET) -> int:
        """One pass over every due subscription, one after another (`gate events dispatch --once`
        and the tests; the `Dispatcher` runs them concurrently): deliver up to `budget` events
        each. Returns how many posts were made."""
        return sum(self.deliver_turn(owner, row, budget)[0] for row in self.due())

    def deliver_turn(self, owner: str, row: Mapping[str, Any], budget: int = BUDGET) -> tuple[int, bool]:
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

    def _deliver(self, owner: str, row: dict[str, Any], budget: int) -> tuple[int, bool]:
        """The ordered walk from the cursor. Attempts and the cursor are written together, one
        ledger transaction per `FLUSH_EVERY` successes (and at the end of the turn or before a
        failure): a dispatcher killed in between posts those events again (at least once)."""
        posts, gone = self._replays(row, budget)
        wanted = set(event_types_of(row))
        cursor, attempts = row["cursor"], row["attempts"]
        if gone or (row["next_attempt_at"] and _utc(row["next_attempt_at"]) > self.clock.now()):
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

    def _flush(self, owner: str, row: Mapping[str, Any], done: list[DeliveryAttempt], cursor: int) -> bool:
        """Write the attempts made and (when it moved past the stored one) the cursor with the
        failures forgotten, in one transaction; False when the lease was lost meanwhile."""
        moved = cursor != row["cursor"]
        if not done and not moved:
            return True
        values = {"cursor": cursor, "attempts": 0, "failing_since": None, "next_attempt_at": None} if moved else None
        return self.outbox.delivered(row["subscription_id"], owner, done, values)

    def _replays(self, row: Mapping[str, Any], budget: int) -> tuple[int, bool]:
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

    def _secrets(self, row: Mapping[str, Any]) -> list[str]:
        keys = [row["secret"]]
        if row["previous_secret"] and row["previous_until"] and _utc(row["previous_until"]) > self.clock.now():
            keys.append(row["previous_secret"])
        return keys

    def _ed25519_key(self) -> Any:
        return self.signing.attestation_key() if self.signing is not None else None

    def _headers(self, row: Mapping[str, Any], event: Mapping[str, Any], stamp: int, body: bytes) -> dict[str, str]:
        """Standard Webhooks headers; with `sign_ed25519`, a `v1a` signature by the gate's Ed25519
        key beside the HMAC ones, and `webhook-key-id` naming it in the published key registry.
        SECURITY: no key, no delivery (GateError): a receiver that asked for it never gets less."""
        signature = signatures.signature_header(self._secrets(row), event["event_id"], stamp, body)
        headers = {"content-type": CONTENT_TYPE, "webhook-id": event["event_id"], "webhook-timestamp": str(stamp),
                   "webhook-signature": signature, "user-agent": "decision-gate-webhooks/1"}
        if row["sign_ed25519"]:
            key = self._ed25519_key()
            if key is None:
                raise GateError("SIGNING_KEY_MISSING", "no Ed25519 key to sign this delivery with")
            headers["webhook-signature"] += " " + signatures.sign_ed25519(key, event["event_id"], stamp, body)
            headers["webhook-key-id"] = key.key_id
        return headers

    def _turn_target(self, row: Mapping[str, Any]) -> Target | None:
        """The subscription's target checked once for a turn's ordered walk (a turn lasts at most
        a share of its lease), or None when it is refused: each post then checks it and fails as
        it says. The delivery still connects to the address this check approved."""
        try:
            return self._target(row["url"])
        except GateError:
            return None

    def _post(self, row: Mapping[str, Any], event: Mapping[str, Any], *, replay: bool,
              target: Target | None = None) -> tuple[Delivery, DeliveryAttempt]:
        """Sign and post one event to `target` (checked now when not given): (the result, its
        attempt row, for the caller to write)."""
        body = self.body_of(event)
        now = self.clock.now()
        try:
            checked = target if target is not None else self._target(row["url"])
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

    def _failed(self, owner: str, row: Mapping[str, Any], attempts: int, cursor: int, result: Delivery) -> None:
        """After a failed ordered delivery: 410 Gone disables the subscription (Standard Webhooks);
        a failure that has lasted `DISABLE_AFTER_SECONDS` does too; otherwise the next try waits
        for the backoff, and no less than a throttling answer's `Retry-After`."""
        if result.status_code == GONE:
            self._gone(row, cursor)
            return
        now = self.clock.now()
        since = row["failing_since"] or iso_ms(now)
        if (now - _utc(since)).total_seconds() >= backoff.DISABLE_AFTER_SECONDS:
            reason = f"deliveries failed for {backoff.DISABLE_AFTER_SECONDS / 3600:.0f} hours ({attempts} attempts)"
            self._disable(row, reason, cursor, since)
            return
        wait = backoff.delay(attempts)
        if result.status_code in THROTTLE_STATUSES and result.retry_after is not None:
            wait = max(wait, result.retry_after)
        self.outbox.update_subscription(row["subscription_id"], {
            "attempts": attempts, "failing_since": since,
            "next_attempt_at": iso_ms(now + timedelta(seconds=wait))}, owner)

    def _gone(self, row: Mapping[str, Any], cursor: int) -> None:
        self._disable(row, "the receiver answered 410 Gone", cursor, row["failing_since"] or iso_ms(self.clock.now()))

    def _disable(self, row: Mapping[str, Any], reason: str, cursor: int, since: str) -> None:
        self.outbox.disable(row, reason, iso_ms(self.clock.now()), ("subscription.disabled", {
            "subscription_id": row["subscription_id"], "url": row["url"], "reason": reason,
            "undelivered_after_seq": cursor, "failing_since": since}))
        log.warning("webhook subscription %s disabled: %s", row["subscription_id"], reason)


class Dispatcher:
    """Events out in the background, on `PeriodicWorker`s (`gate.services.periodic`): `webhooks`
    every `interval` seconds (and at once when woken) hands each due subscription to a `FairPool`
    of `concurrency` delivery threads: subscriptions are delivered concurrently, at most half the
    threads on one scope, scopes in turn, and one subscription by one thread at a time (its order
    kept); at one endpoint at most `concurrency` at once, shared fairly by the scopes posting to it
    (one scope at most half, or its share when more post there). A receiver that hangs holds one
    thread for the post's time limit, and the breaker of its scope and endpoint then keeps that
    scope's threads off it (another scope's deliveries to the same host go on). `event-stream` publishes to JetStream when configured,
    and each of `tasks` (name: step, the scopes' scheduled reports) is a worker of its own, so one
    failing never skips the others. `event-retention` prunes the outbox every `RETENTION_INTERVAL`
    seconds (unless the service keeps every event), holding what the stream has not published; each
    of `slow_tasks` (the facts' retention, gate.services.removal) is a worker at that interval too."""

    def __init__(self, service: EventService, interval: float = 1.0, owner: str | None = None,
                 stream: Any = None, tasks: Mapping[str, Callable[[], Any]] | None = None,
                 concurrency: int = CONCURRENCY, slow_tasks: Mapping[str, Callable[[], Any]] | None = None) -> None:
        self.service = service
        self.stream = stream  # a gate.events.stream.JetStreamPublisher, or None
        self.interval = interval
        self.owner = owner or f"dispatcher-{secrets.token_hex(6)}"
        self.pool: FairPool[Mapping[str, Any]] = FairPool(self._turn, concurrency, name="gate-deliveries")
        self.webhooks = PeriodicWorker("webhooks", self._offer_due, interval, log=log)
        self.workers = [self.webhooks]
        if stream is not None:
            self.workers.append(PeriodicWorker("event-stream", stream.publish_pending, interval, log=log))
        self.workers += [PeriodicWorker(name, task, interval, log=log) for name, task in (tasks or {}).items()]
        if service.retention_days > 0 or service.retention_bytes > 0:
            held = (stream.name,) if stream is not None else ()
            self.workers.append(PeriodicWorker("event-retention", partial(service.prune, held), RETENTION_INTERVAL,
                                               log=log))
        self.workers += [PeriodicWorker(name, task, RETENTION_INTERVAL, log=log)
                         for name, task in (slow_tasks or {}).items()]

    def start(self) -> None:
        for worker in self.workers:
            worker.start()

    def wake(self) -> None:
        for worker in self.workers:
            worker.wake()

    def stop(self, timeout: float = 5.0) -> None:
        for worker in self.workers:
            worker.stop(timeout)
        self.pool.stop(timeout)

    def _turn(self, row: Mapping[str, Any]) -> bool:
        """One subscription's turn on a delivery thread, counted by the `webhooks` worker (a
        ledger that is away fails the turn: logged with its traceback, tried again next pass)."""
        try:
            more = self.service.deliver_turn(self.owner, row)[1]
        except Exception as error:  # noqa: BLE001 - counted and logged by the worker; the others go on
            self.webhooks.report(error)
            return False
        self.webhooks.report(None)
        return more

    def _offer_due(self) -> None:
        for row in self.service.due():
            self.pool.offer(row["scope"], row["subscription_id"], row, endpoint_of(row["url"]))


def event_data(row: Mapping[str, Any]) -> dict[str, object]:
    """The CloudEvent stored in an outbox row."""
    value: dict[str, object] = json.loads(row["event_json"])
    return value


def _in_batches(keys: Iterable[str], prunable: Callable[[str], bool], prune: Callable[[str, int], int]) -> int:
    """One retention pass over `keys` (scopes, subscriptions): each that is `prunable` is pruned
    in transactions of at most `PRUNE_BATCH` rows (`prune(key, PRUNE_BATCH)` deletes them and says
    how many), at most `PRUNE_BATCHES_PER_PASS` per key, so a pass never runs unbounded; the rest
    waits for the next pass. Returns how many rows were deleted."""
    deleted = 0
    for key in keys:
        if not prunable(key):
            continue
        for _ in range(PRUNE_BATCHES_PER_PASS):
            done = prune(key, PRUNE_BATCH)
            deleted += done
            if done < PRUNE_BATCH:
                break
    return deleted
