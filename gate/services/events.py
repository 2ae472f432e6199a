"""Events out, the use case (docs/events.md): webhook subscriptions per scope (made, governed,
approved, rotated, enabled and disabled), reading a scope's events, replays and what a
subscription's deliveries did; and the `Dispatcher`, which runs the delivery turns and the
retention in the background.

The service's parts, each built once by the composition root over one outbox and one clock
(`gate.services.root.compose_events`): the delivery turns (`gate.services.event_delivery`: the
ordered walk under a lease, at least once and in order) and the retention
(`gate.services.event_retention`: the pruning pass, and EVENTS_PRUNED for a read, a replay or a
resume that reaches a pruned range). This module checks and changes the subscriptions through them.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable, Mapping
from datetime import timedelta
from functools import partial
from typing import Any, TypedDict

from gate import bodies
from gate.clock import Clock, iso_ms
from gate.errors import GateError, SigningUnavailable
from gate.events import signatures
from gate.events.breaker import endpoint_of
from gate.events.cloudevent import EVENT_TYPES, TYPE_PREFIX, CloudEvent, OutboxRow
from gate.events.egress import EventSubscriptions
from gate.events.pool import FairPool
from gate.governance.table import EVENT_SUBSCRIPTIONS
from gate.ledger.outbox import NewSubscription, Outbox, SubscriptionChange, SubscriptionRow, event_types_of
from gate.principals import Permissions, Principal
from gate.protocol.canonical import canonical_text
from gate.releases.governance import GovernanceEvent, PolicyRequestJSON, refusal_code
from gate.services import event_retention
from gate.services.event_delivery import WILDCARD, WebhookDelivery, utc
from gate.services.event_retention import RETENTION_INTERVAL, EventRetention
from gate.services.governance import GovernanceService, SafeguardSettings
from gate.services.periodic import PeriodicWorker

log = logging.getLogger("gate.events")

MAX_SUBSCRIPTIONS_PER_SCOPE = 20
CONCURRENCY = 8  # subscriptions a dispatcher delivers at once (GATE_EVENTS_CONCURRENCY)
MAX_REPLAY_EVENTS = 10_000
ROTATION_OVERLAP_SECONDS = 24 * 3600
MAX_ROTATION_OVERLAP_SECONDS = 7 * 24 * 3600
PENDING = "pending"  # a subscription waiting for a second holder's approval: it delivers nothing (issue 64)
SUBSCRIPTION = "event-subscription"  # gate/bodies/event-subscription.schema.json


def _invalid(message: str) -> GateError:
    return GateError("EVENT_SUBSCRIPTION_INVALID", message)




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




class PendingSubscriptions(TypedDict):
    """The live subscription requests and the governance chain's seq (`pending_subscriptions`)."""

    pending: list[PolicyRequestJSON]
    governance_seq: int


def public_view(row: NewSubscription) -> SubscriptionView:
    """A subscription as its owners see it: never its secrets."""
    return {"subscription_id": row["subscription_id"], "url": row["url"], "event_types": event_types_of(row),
            "status": row["status"], "disabled_reason": row["disabled_reason"], "cursor": row["cursor"],
            "failing_since": row["failing_since"], "next_attempt_at": row["next_attempt_at"],
            "created_at": row["created_at"], "created_by": row["created_by"],
            "sign_ed25519": bool(row["sign_ed25519"]),
            "rotation_overlap_until": row["previous_until"]}




class EventService:
    """Subscriptions, reads, replays and delivery reports over one outbox; the delivery turns and
    the retention are its parts (`delivery`, `retention`)."""

    def __init__(self, outbox: Outbox, delivery: WebhookDelivery, retention: EventRetention, clock: Clock, *,
                 safeguards: SafeguardSettings, governance: GovernanceService | None = None) -> None:
        """Built by the composition root (`gate.services.root.compose_events`), its parts over the
        same `outbox` and `clock`: `delivery` checks a subscription's target and key as it will
        deliver; `retention` refuses what it has pruned. `safeguards` says whether a scope requires
        approvals (read fresh); `governance`, the serving process's governed-change service, makes a
        new subscription a request a second holder approves (None: subscriptions change directly)."""
        self.outbox = outbox
        self.delivery = delivery
        self.retention = retention
        self.clock = clock
        self.safeguards = safeguards
        self.governance = governance

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
                started.append(public_view(row | {"status": "active"}))
        return started, event

    def pending_subscriptions(self, scope: str) -> PendingSubscriptions:
        """The live subscription requests and the governance chain's seq."""
        if self.governance is None:
            raise SigningUnavailable()
        document = self.governance.document(scope, EVENT_SUBSCRIPTIONS)
        return {"pending": document["pending"], "governance_seq": document["governance_seq"]}

    def _prepared(self, scope: str, actor: str, body: object) -> tuple[NewSubscription, str]:
        """A new subscription's row, checked (its body, its target, the scope's limit), and its secret."""
        if isinstance(body, Mapping):
            unknown, _ = bodies.closed_members(SUBSCRIPTION, body)
            if unknown:
                raise _invalid(f"unknown member(s): {', '.join(unknown)[:200]}")
        stated = bodies.checked(SUBSCRIPTION, body, "EVENT_SUBSCRIPTION_INVALID")
        types = _checked_types(stated.get("event_types"))
        start = stated.get("from", "now")
        self.delivery.target(stated.get("url"))
        ed25519 = stated.get("sign_ed25519", False)
        if ed25519 and self.delivery.ed25519_key() is None:
            raise _invalid("this gate has no Ed25519 key to sign deliveries with (gate keys signing-init)")
        if len(self.outbox.subscriptions(scope)) >= MAX_SUBSCRIPTIONS_PER_SCOPE:
            raise GateError("EVENT_SUBSCRIPTION_LIMIT", f"a scope has at most {MAX_SUBSCRIPTIONS_PER_SCOPE} "
                            "subscriptions; delete one first")
        secret = signatures.new_secret()
        row: NewSubscription = {
            "subscription_id": "sub_" + secrets.token_hex(12), "scope": scope, "url": stated["url"],
            "event_types": canonical_text(types), "secret": secret, "previous_secret": None,
            "previous_until": None, "status": "active", "disabled_reason": None,
            "cursor": self.outbox.head(scope) if start == "now" else 0, "attempts": 0,
            "failing_since": None, "next_attempt_at": None, "lease_owner": None, "lease_until": None,
            "created_at": iso_ms(self.clock.now()), "created_by": actor, "sign_ed25519": int(ed25519),
        }
        return row, secret

    def _owned(self, scope: str, subscription_id: object) -> SubscriptionRow:
        row = self.outbox.subscription(scope, subscription_id) if isinstance(subscription_id, str) else None
        if row is None:  # SECURITY: another scope's subscription reads as absent
            raise GateError("EVENT_SUBSCRIPTION_NOT_FOUND", "no subscription with this id in this scope")
        return row

    def _approved(self, scope: str, subscription_id: object, what: str) -> SubscriptionRow:
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
        return public_view(row | {"previous_until": until}), secret

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
        values: SubscriptionChange = {"status": status, "disabled_reason": None if status == "active" else "by hand"}
        if status == "disabled":
            self.outbox.update_subscription(row["subscription_id"], values)
            return public_view(row | {"status": values["status"], "disabled_reason": values["disabled_reason"]})
        values.update({"attempts": 0, "failing_since": None, "next_attempt_at": None})
        refused = self.outbox.enable(row["subscription_id"], values, skip_pruned)
        if refused is not None:
            raise self.retention.refused(refused, f"resuming from this subscription's cursor ({row['cursor']})")
        return public_view(self._owned(scope, subscription_id))

    def read(self, scope: str, after: int, limit: int) -> list[OutboxRow]:
        """The scope's events after `after`, oldest first (`GET /api/events`); EVENTS_PRUNED when
        events after `after` were pruned (the reader would otherwise miss them without knowing)."""
        pruned, _ = self.retention.pruned(scope)
        if after < pruned:
            raise self.retention.refused(pruned, f"reading after {after}")
        return self.outbox.events_after(scope, after, limit)

    def replay(self, scope: str, subscription_id: str, body: object) -> int:
        """Queue events again: one (`{"seq": n}`) or a time range (`{"since": t, "until": t}`);
        EVENT_SUBSCRIPTION_PENDING to an endpoint whose approval has not been given."""
        row = self._approved(scope, subscription_id, "a replay")
        if not isinstance(body, Mapping) or set(body) - {"seq", "since", "until"}:
            raise _invalid("a replay names {\"seq\": n} or {\"since\": time, \"until\": time}")
        if "seq" in body:
            seq = body["seq"]
            pruned, _ = self.retention.pruned(scope)
            if isinstance(seq, int) and not isinstance(seq, bool) and 0 < seq <= pruned:
                raise self.retention.refused(pruned, f"a replay of {seq}")
            if not isinstance(seq, int) or isinstance(seq, bool) or self.outbox.event(scope, seq) is None:
                raise GateError("EVENT_NOT_FOUND", "no event with this seq in this scope")
            seqs = [seq]
        else:
            since, until = body.get("since"), body.get("until")
            try:
                first, last = iso_ms(utc(str(since))), iso_ms(utc(str(until)))
            except ValueError:
                raise _invalid("since and until must be ISO 8601 times") from None
            pruned, pruned_at = self.retention.pruned(scope)
            if pruned_at is not None and first <= pruned_at:
                raise self.retention.refused(pruned, f"a replay since {first}")
            seqs = self.outbox.seqs_between(scope, first, last)[:MAX_REPLAY_EVENTS + 1]
            if len(seqs) > MAX_REPLAY_EVENTS:
                raise _invalid(f"a replay covers at most {MAX_REPLAY_EVENTS} events; narrow the range")
        return self.outbox.add_replays(row["subscription_id"], seqs, iso_ms(self.clock.now()))

    def deliveries(self, scope: str, subscription_id: str, limit: int = 20) -> dict[str, Any]:
        """What a subscription's deliveries did: success rate over every attempt, latency of the
        recent ones, the last failures with the receiver's status and answer (text), the lag."""
        row = self._owned(scope, subscription_id)
        total, ok = self.outbox.attempt_totals(row["subscription_id"])
        recent = self.outbox.attempts(row["subscription_id"], limit=event_retention.ATTEMPTS_KEPT)
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
        self.pool: FairPool[SubscriptionRow] = FairPool(self._turn, concurrency, name="gate-deliveries")
        self.webhooks = PeriodicWorker("webhooks", self._offer_due, interval, log=log)
        self.workers = [self.webhooks]
        if stream is not None:
            self.workers.append(PeriodicWorker("event-stream", stream.publish_pending, interval, log=log))
        self.workers += [PeriodicWorker(name, task, interval, log=log) for name, task in (tasks or {}).items()]
        retention = service.retention
        if retention.retention_days > 0 or retention.retention_bytes > 0:
            held = (stream.name,) if stream is not None else ()
            self.workers.append(PeriodicWorker("event-retention", partial(retention.prune, held), RETENTION_INTERVAL,
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

    def _turn(self, row: SubscriptionRow) -> bool:
        """One subscription's turn on a delivery thread, counted by the `webhooks` worker (a
        ledger that is away fails the turn: logged with its traceback, tried again next pass)."""
        try:
            more = self.service.delivery.deliver_turn(self.owner, row)[1]
        except Exception as error:  # noqa: BLE001 - counted and logged by the worker; the others go on
            self.webhooks.report(error)
            return False
        self.webhooks.report(None)
        return more

    def _offer_due(self) -> None:
        for row in self.service.delivery.due():
            self.pool.offer(row["scope"], row["subscription_id"], row, endpoint_of(row["url"]))


def event_data(row: OutboxRow) -> CloudEvent:
    """The CloudEvent stored in an outbox row (its canonical text, as `cloud_event` made it)."""
    value: CloudEvent = json.loads(row["event_json"])
    return value

