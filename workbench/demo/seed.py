"""`gate demo seed`: the demo scenario written into a ledger through the real services.

Every decision goes through `DecisionService.decide` (validated, evaluated, signed, chained,
charged) and every receipt through `LifecycleService.record`, with an injected clock that
walks the scenario's six months, so the ledger is indistinguishable from one an API filled:
`gate verify`, packets, chain proofs and the export all work on it.

Holds: every deadline of the scenario is in the past of a live gate, whose sweeper (the same
ledger, the real clock) would expire a backdated hold left open until its review. So each held
decision's hold is written whole when it closes, in one transaction (`HoldService.write_whole`:
the same signed, chained events as a review or an expiry one step at a time): at its review,
at its deadline when nobody reviews it, or open at the scenario's end when its deadline is later.

Determinism: the same `decisions` and `seed` give the same decision ids, facts, verdicts and
receipt statuses in the same order (receipt ids are random, as the service makes them).
Before writing, each decision's verdict is computed with the scalar evaluator, because the
receipts to write depend on it; the stored record is checked to agree.

Speed: on an SQLite ledger the seed connection runs with `PRAGMA synchronous=OFF` (a crash
while seeding loses the seed, never a real decision: seeding refuses a ledger that has any).
"""

from __future__ import annotations

import hashlib
import heapq
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from gate.clock import FixedClock, iso_ms
from gate.errors import CodedError
from gate.keys.config import SigningSetup
from gate.ledger import Ledger, stream
from gate.ledger.engine import make_engine
from gate.ledger.reports import set_benchmark_opt_in
from gate.principals import Principal
from gate.protocol.canonical import sha256_hex
from gate.rulebook import RulebookDocument, get_evaluator
from gate.services.decide import Caller
from gate.services.holds import DeferredOpener
from gate.services.lifecycle import KINDS
from gate.services.root import decision_services
from workbench.demo import DEFAULT_DECISIONS, DEFAULT_SEED
from workbench.demo import scenario as S

MAX_DECISIONS = 1_000_000

Progress = Callable[[int, int], None]

__all__ = ["DEFAULT_DECISIONS", "DEFAULT_SEED", "SeedError", "SeedResult", "plan_verdicts", "seed_ledger",
           "seed_ledger_at"]


class SeedError(CodedError):
    """The ledger cannot be seeded as asked (the message says why); nothing was written."""

    CODE = "DEMO_SEED_REFUSED"


@dataclass(frozen=True)
class SeedResult:
    decisions: int
    receipts: int
    scopes: tuple[str, ...]
    seconds: float


class _Clock(FixedClock):
    def set_ms(self, at_ms: int) -> None:
        self._current = datetime.fromtimestamp(at_ms / 1000, tz=UTC)


class _SeedIds:
    """Deterministic decision and request ids for one seed."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.index = 0

    def decision_id(self) -> str:
        self.index += 1
        return "dec_" + hashlib.sha256(f"demo-seed:{self.seed}:{self.index}".encode()).hexdigest()[:24]

    def request_id(self) -> str:
        return "req_" + hashlib.sha256(f"demo-request:{self.seed}:{self.index}".encode()).hexdigest()[:16]


def plan_verdicts(plan: S.DecisionPlan) -> tuple[np.ndarray, np.ndarray]:
    """Verdict and matched rule id ("" for the default outcome) of every planned decision,
    with the scalar evaluator the service uses."""
    verdict = np.empty(len(plan), dtype=object)
    rule = np.empty(len(plan), dtype=object)
    for (policy, version) in S.RULEBOOK_FILES:
        rulebook = S.load_rulebook(policy, version)
        evaluator = get_evaluator(rulebook, sha256_hex(rulebook))
        for index in np.flatnonzero((plan.policy == S.POLICIES.index(policy)) & (plan.version == version)):
            result = evaluator.evaluate(plan.facts_of(int(index)))
            verdict[index], rule[index] = result.decision, result.matched_rule_id or ""
    return verdict.astype(str), rule.astype(str)


_CONTEXT = {
    "pricing_exception": ("billing_discount_gate", "apply_discount", "billing", "discount.create", "sub_"),
    "refund_approval": ("support_refund_gate", "issue_refund", "payments", "refund.create", "ord_"),
    "agent_action_gate": ("ai_agent_action_gate", "run_agent_action", "agent_runtime", "tool.invoke", "task_"),
}
_QUESTION = {
    "pricing_exception": "Approve this discount exception before the billing update?",
    "refund_approval": "Issue this refund automatically?",
    "agent_action_gate": "May the agent run this action?",
}


def _request(policy: str, rulebook: RulebookDocument, facts: dict[str, Any], index: int) -> dict[str, Any]:
    workflow, action, system, mutation, prefix = _CONTEXT[policy]
    target = f"{prefix}{100000 + index}"
    return {
        "question": _QUESTION[policy], "mode": "rulebook", "binding_mode": "direct_declarative_rulebook",
        "rulebook": rulebook,
        "context": {"workflow": workflow, "source_record_id": target, "requested_action": action,
                    "actor": f"user_ops_{index % 37}", "target_system": system, "target_object_id": target,
                    "mutation": mutation, "inputs": facts},
    }


def _receipt_body(kind: str, status: str, record: dict[str, Any], policy: str) -> dict[str, Any]:
    _, _, system, mutation, _ = _CONTEXT[policy]
    target = record.get("action_binding", {}).get("target_object_id") or record["decision_id"]
    if kind == "execution":
        return {"execution_status": status, "action_taken": record["action"],
                "decision_record_hash": record["record_hash"], "decision_receipt_hash": record["receipt_hash"],
                "target_system": system, "target_object_id": target, "mutation": mutation,
                "executor": {"type": "worker", "id": f"{system}-worker"}}
    if kind == "outcome":
        return {"outcome_status": status, "action_executed": status != "cancelled",
                "decision_record_hash": record["record_hash"]}
    return {"sync_status": status, "sync_direction": "writeback", "crm_provider": "hubspot",
            "crm_object_type": "deal", "crm_object_id": f"deal_{target}",
            "field_mapping": {"verdict": "gate_verdict__c", "reason_code": "gate_reason__c"}}


def seed_ledger_at(url: str, signing: SigningSetup, **kwargs: Any) -> SeedResult:
    """`seed_ledger` on the ledger at `url`, through a seed-only engine (see module doc)."""
    engine = make_engine(url, pool_size=1, durable=False)
    ledger = Ledger(url, engine=engine)
    try:
        ledger.upgrade()
        return seed_ledger(ledger, signing, **kwargs)
    finally:
        ledger.dispose()


def seed_ledger(ledger: Ledger, signing: SigningSetup, *, decisions: int = DEFAULT_DECISIONS,
                seed: int = DEFAULT_SEED, progress: Progress | None = None) -> SeedResult:
    """Write the scenario's `decisions` decisions and their receipts into an empty ledger."""
    _refuse_unseedable(ledger, signing, decisions, seed)
    started = time.monotonic()
    plan = S.draw_decisions(decisions, seed)
    verdict, rule = plan_verdicts(plan)
    events = S.draw_events(plan, verdict, rule, seed)
    clock = _Clock(S.START)
    writer = _Writer(ledger, signing, clock, seed, plan, verdict, events)
    for scope in S.SCOPES:  # the operator who set the demo up declared who owns held actions
        writer.holds.set_policy(scope, Principal.operator("demo-seed"), frozenset({"admin"}), DEMO_HOLD_POLICY)
    total = len(plan) + len(events)
    if progress is not None:
        progress(0, total)
    for done, (at_ms, is_receipt, row) in enumerate(_timeline(plan, events), start=1):
        writer.expire_due(min(at_ms, S.END_MS))
        clock.set_ms(at_ms)
        if is_receipt:
            writer.receipt(row)
        else:
            writer.decision(row)
        if progress is not None and (done % 50 == 0 or done == total):
            progress(done, total)
    writer.expire_due(S.END_MS)  # the reviews nobody made expired at their deadlines
    clock.set_ms(S.END_MS)
    writer.leave_open()  # those whose deadline is after the scenario's end
    _opt_in_to_benchmarks(ledger, clock)
    return SeedResult(len(plan), len(events), S.SCOPES, time.monotonic() - started)


def _refuse_unseedable(ledger: Ledger, signing: SigningSetup, decisions: int, seed: int) -> None:
    """SeedError unless the request is in range, the ledger empty and a signing key set."""
    if not isinstance(decisions, int) or not 1 <= decisions <= MAX_DECISIONS:
        raise SeedError(f"decisions must be an integer from 1 to {MAX_DECISIONS:,}")
    if not isinstance(seed, int) or seed < 0:
        raise SeedError("seed must be a non-negative integer")
    existing = stream.scopes(ledger)
    if existing:
        # SECURITY: never mix invented history into a ledger that holds real decisions.
        raise SeedError(f"the ledger already holds decisions (scopes: {', '.join(existing[:5])}); "
                        "seed an empty ledger")
    if signing.receipt_signer() is None:
        raise SeedError("no signing key is configured; the demo ledger is signed like any other")


def _timeline(plan: S.DecisionPlan, events: S.Events) -> Iterator[tuple[int, bool, int]]:
    """Decisions and receipts in time order, as (at ms, is a receipt, row of the plan or of the
    events); a decision sorts before a receipt at the same ms."""
    times = np.concatenate([plan.at_ms, events.at_ms])
    tags = np.concatenate([np.zeros(len(plan), np.int8), np.ones(len(events), np.int8)])
    rows = np.concatenate([np.arange(len(plan)), np.arange(len(events))])
    order = np.lexsort((tags, times))
    for position in order:
        yield int(times[position]), bool(tags[position]), int(rows[position])


class _Writer:
    """Writes the plan's decisions and the events' receipts through the real services, keeping
    each decision's record until its last receipt is written."""

    def __init__(self, ledger: Ledger, signing: SigningSetup, clock: _Clock, seed: int, plan: S.DecisionPlan,
                 verdict: np.ndarray, events: S.Events) -> None:
        self.plan, self.verdict, self.events = plan, verdict, events
        # The core's composition root, with the scenario's clock and ids; no releases (every
        # decision is inline, as the scenario's callers send them), so no guardrail reads outcomes.
        # Each held decision's hold is written whole when it closes (issue 53): a live gate on the
        # same ledger sweeps with the real clock, past every deadline of the scenario, and would
        # expire a backdated hold left open until its review.
        # The receipts and the holds are the root's too, on the same clock (nothing set after).
        core = decision_services(ledger, signing, clock=clock, ids=_SeedIds(seed), releases=False,
                                 deferred_holds=True)
        if not isinstance(core.opener, DeferredOpener):  # what deferred_holds builds
            raise TypeError("the demo seed needs the root's deferring hold opener")
        self.opener = core.opener
        self.service, self.lifecycle, self.holds = core.decisions, core.lifecycle, core.holds
        self.clock = clock
        # A held decision a person approved runs afterwards (an execution other than `reviewed`).
        ran = (events.kind == "execution") & (events.status != "reviewed") & (events.status != "blocked")
        self.approved = set(events.decision[ran].tolist())
        self.reviewed = set(events.decision[(events.kind == "execution") & (events.status == "reviewed")].tolist())
        self.unreviewed: list[tuple[int, str]] = []  # (deadline ms, decision id), a heap
        self.rulebooks = {key: S.load_rulebook(*key) for key in S.RULEBOOK_FILES}
        self.callers = {scope: Caller(f"key_seed_{index}", scope, "enterprise", 1_000_000, 10**9)
                        for index, scope in enumerate(S.SCOPES)}
        self.remaining = np.bincount(events.decision, minlength=len(plan))  # receipts still to write
        self.records: dict[int, dict[str, Any]] = {}

    def decision(self, row: int) -> None:
        plan = self.plan
        policy = S.POLICIES[plan.policy[row]]
        body = _request(policy, self.rulebooks[(policy, int(plan.version[row]))], plan.facts_of(row), row)
        record = self.service.decide(self.callers[S.SCOPES[plan.scope[row]]], body).record.as_dict()
        if record["verdict"] != self.verdict[row]:  # pragma: no cover - the evaluator is deterministic
            raise SeedError(f"decision {row}: stored verdict {record['verdict']} != planned {self.verdict[row]}")
        if self.remaining[row]:
            self.records[row] = record
        deferred = self.opener.deferred.get(record["decision_id"])
        if deferred is not None and row not in self.reviewed:
            heapq.heappush(self.unreviewed, (_ms(deferred["deadline_at"]), record["decision_id"]))

    def expire_due(self, until_ms: int) -> None:
        """The holds nobody reviews, each written expired at its deadline up to `until_ms`."""
        while self.unreviewed and self.unreviewed[0][0] <= until_ms:
            deadline_ms, decision_id = heapq.heappop(self.unreviewed)
            self.clock.set_ms(deadline_ms)
            self.holds.write_whole(self.opener.deferred.pop(decision_id), expire=True)

    def leave_open(self) -> None:
        """The holds still open at the scenario's end (their deadline after it), written open."""
        for _, decision_id in sorted(self.unreviewed):
            self.holds.write_whole(self.opener.deferred.pop(decision_id))
        self.unreviewed.clear()

    def receipt(self, row: int) -> None:
        events, plan = self.events, self.plan
        decision = int(events.decision[row])
        record = self.records[decision]
        kind = str(events.kind[row])
        if kind == "execution" and str(events.status[row]) == "reviewed":
            self._review(decision, record)
        self.lifecycle.record(KINDS[kind], scope=S.SCOPES[plan.scope[decision]], decision_id=record["decision_id"],
                              record=record, body=_receipt_body(kind, str(events.status[row]), record,
                                                                S.POLICIES[plan.policy[decision]]),
                              idempotency_key=None)
        self.remaining[decision] -= 1
        if not self.remaining[decision]:
            del self.records[decision]


    def _review(self, decision: int, record: dict[str, Any]) -> None:
        """The scenario's reviewer resolves the decision's hold (one of three people per scope)."""
        scope = S.SCOPES[self.plan.scope[decision]]
        reviewer = Principal.person(DEMO_ISSUER, f"{scope}-reviewer-{decision % 3 + 1}",
                                    f"Reviewer {decision % 3 + 1} ({scope})")
        approve = decision in self.approved
        self.holds.write_whole(self.opener.deferred.pop(record["decision_id"]), [(reviewer, frozenset({"resolve"}), {
            "decision": "approve" if approve else "deny",
            "reason_code": "CHECKED_WITH_CUSTOMER" if approve else "RISK_NOT_ACCEPTED"})])


DEMO_ISSUER = "https://demo.decision-gate.invalid"  # the demo's invented reviewers (never a real issuer)
_THREE_DAYS = 3 * 86_400
DEMO_HOLD_POLICY = {  # reviewers answer within two days (workbench.demo.scenario); refunds go to their own queue
    "default_queue": "default", "four_eyes": True,
    "queues": {name: {"deadline_seconds": _THREE_DAYS, "quorum": "any", "members": [], "require_justification": False,
                      "escalate_after_seconds": None, "escalate_to": None} for name in ("default", "refunds")},
    "routes": [{"policy_id": "refund_approval", "rule_id": None, "queue": "refunds", "priority": "high"}],
}


def _ms(at: str) -> int:
    return int(datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp() * 1000)


def _opt_in_to_benchmarks(ledger: Ledger, clock: _Clock) -> None:
    """The demo scopes opt in to anonymized benchmarks (an operator setting, revocable with
    `gate scopes benchmarks --scope S --opt-out`), so a newcomer's benchmark report has a cohort."""
    for scope in S.SCOPES:
        set_benchmark_opt_in(ledger, scope, True, iso_ms(clock.now()))
