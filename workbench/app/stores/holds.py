"""The Inbox's held actions (docs/holds.md): a page of holds, one hold as a reviewer weighs it
(its signed events checked offline, the rule that held it, a fresh verification, the closed holds
most like it) and the steps on it, each a signed hold event written by `HoldService`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypedDict

from gate.errors import GateError
from gate.holds.events import HoldEvent, hold_events_problems, verify_resolution
from gate.principals import Permissions, Principal
from gate.services.hold_reads import HoldPage, HoldView, SimilarHold
from gate.services.hold_writes import HoldStep
from gate.services.lifecycle import KINDS
from gate.services.verification import StoredVerification, verify_stored_decision
from gate.strict_json import JsonValue
from workbench.app.ruletable import reads
from workbench.app.stores.shared import StoreShared


class HoldList(HoldPage):
    """A page of the scope's holds (`HoldService.list`) and the names of the scope's queues."""

    queues: list[str]


class HeldBy(TypedDict):
    """The rule that held a record, as the record and its bound rulebook state it (`policy_id` and
    `policy_version` as the rulebook states them)."""

    rule_id: str | None
    reason_code: str | None
    action: str | None
    verdict: str | None
    policy_id: Any
    policy_version: Any
    condition: str | None  # the rule's condition in words (`workbench.app.ruletable.reads`)


class HoldEventsCheck(TypedDict):
    """The offline check of a hold's signed events (`gate.holds.events.hold_events_problems`)."""

    verified: bool
    count: int
    problems: list[str]


class SimilarOutcome(SimilarHold):
    """A closed hold like the open one, with its decision's latest outcome status (None: none yet)."""

    latest_outcome: str | None


class HoldDetail(TypedDict):
    """One hold as a reviewer weighs it (`HoldDesk.hold_detail`)."""

    hold: HoldView
    events: list[HoldEvent]
    rule: HeldBy
    verification: StoredVerification
    hold_events: HoldEventsCheck
    resolution: dict[str, Any] | None  # gate.holds.events.ResolutionCheck.to_json(), once closed
    similar: list[SimilarOutcome] | None  # None until `similar_holds` read them


class HoldDesk:
    """The Inbox's reads and steps over the one `WorkbenchStore` (`StoreShared`)."""

    def __init__(self, store: StoreShared) -> None:
        self.store = store

    def hold_page(self, scope: str, *, state: str = "open", queue: str | None = None, offset: int = 0,
                  limit: int = 25, filters: Mapping[str, str | None] | None = None,
                  reader: str | None = None) -> HoldList:
        """One page of the scope's holds in `state`, the most urgent first, then the least time left
        (`HoldService.list`, the API's `GET /api/holds`: `filters` assignee, priority, policy and
        search, `reader` the principal `mine` means), with the count per state and the names of
        the scope's queues. GateError REQUEST_INVALID for an unknown state or filter value."""
        page = self.store.holds.list(scope, state=state, queue=queue or None, limit=limit, offset=offset,
                                     filters=filters, reader=reader)
        return {**page, "queues": [queue.name for queue in self.store.holds.policy(scope).queues]}

    def hold_version(self, scope: str) -> tuple[int, int]:
        """What moves whenever the scope's holds do (`HoldService.version`): the Inbox's poll."""
        return self.store.holds.version(scope)

    def hold_detail(self, scope: str, decision_id: str, *, similar: bool = True) -> HoldDetail | None:
        """One hold as a reviewer weighs it, or None when `scope` has no hold for the decision:
        the hold and its signed events, the rule that held it, a fresh verification of the stored
        record (the Decisions page's), the offline check of its hold events and, once closed, of
        its resolution (with this gate's trust anchors), and the closed holds most like it with
        their latest outcome (`HoldService.similar`; None without `similar`: `similar_holds` reads
        them, the slowest part, after). Reading never changes the hold."""
        stored = self.store.ledger.decision(scope, decision_id)
        if stored is None:
            return None
        holds = self.store.holds
        try:
            row = holds.reads.row(scope, decision_id)  # `HoldService.show`: the hold's view, then its events
        except GateError as exc:
            if exc.code == "HOLD_NOT_FOUND":
                return None
            raise
        shown, events = holds.view(row), holds.reads.holds.events_of(scope, decision_id)
        record = json.loads(stored.record_json)
        anchors = self.store.signing.trust_anchors()
        closing = next((event for event in reversed(events) if event.get("outcome") is not None), None)
        problems = hold_events_problems(record, events, anchors)
        return {
            "hold": shown,
            "events": events,
            "rule": self._held_by(scope, record),
            "verification": verify_stored_decision(self.store.ledger, self.store.lifecycle, self.store.signing, stored),
            "hold_events": {"verified": not problems, "count": len(events), "problems": problems},
            "resolution": verify_resolution(record, closing, anchors).to_json() if closing is not None else None,
            "similar": self.similar_holds(scope, decision_id) if similar else None,
        }

    def similar_holds(self, scope: str, decision_id: str) -> list[SimilarOutcome]:
        """The closed holds most like this one, with their latest outcome (`HoldService.similar`)."""
        return [{**hold, "latest_outcome": self._latest_outcome(hold["decision_id"])}
                for hold in self.store.holds.similar(scope, decision_id)]

    def _held_by(self, scope: str, record: dict[str, Any]) -> HeldBy:
        """The rule that held the record, as its bound rulebook states it (its condition in words)."""
        bound = record.get("rulebook") or {}
        rule_id = record.get("matched_rule_id")
        snapshot = (self.store.service.bound_snapshot(scope, str(bound.get("id")), str(bound.get("version")))
                    if bound.get("id") and bound.get("version") else None)
        rules = json.loads(snapshot["body_json"]).get("rules", []) if snapshot else []
        rule = next((r for r in rules if isinstance(r, dict) and r.get("rule_id") == rule_id), None)
        return {"rule_id": rule_id, "reason_code": record.get("reason_code"), "action": record.get("action"),
                "verdict": record.get("verdict"), "policy_id": record.get("policy_id"),
                "policy_version": record.get("policy_version"),
                "condition": reads(rule.get("condition")) if rule is not None else None}

    def _latest_outcome(self, decision_id: str) -> str | None:
        """The status of the decision's newest outcome record (None before one is reported)."""
        items, _total = self.store.lifecycle.all_for(KINDS["outcome"], decision_id, 1)
        return str(items[0].get("outcome_status")) if items else None

    def hold_act(self, scope: str, principal: Principal, permissions: Permissions, decision_id: str,
                 action: str, body: Mapping[str, JsonValue] | None = None) -> HoldStep:
        """One step on a hold by the session's `principal` with its `permissions` in `scope`:
        `resolve` (body: decision, reason_code, note), `claim`, `release`, `reassign` (body:
        queue, note) or `escalate`. Each is a signed hold event written by `HoldService`, which
        refuses what the permissions do not cover (HOLD_PERMISSION_DENIED without `resolve`),
        a requester under four eyes, another reviewer's claim, a closed hold; GateError."""
        if action == "resolve":
            return self.store.holds.resolve(scope, principal, permissions, decision_id, body)
        if action in ("claim", "release"):
            return self.store.holds.claim(scope, principal, permissions, decision_id, release=action == "release")
        if action == "reassign":
            return self.store.holds.reassign(scope, principal, permissions, decision_id, body)
        if action == "escalate":
            return self.store.holds.escalate(scope, principal, permissions, decision_id)
        raise GateError("REQUEST_INVALID", f"unknown hold action {action!r}")
