"""The demo scenario: who decides what, when, on which facts, and what happens afterwards.

One set of distributions, drawn with NumPy from one seed, feeds both the demo ledger
(`workbench.demo.seed`, every decision through the real services) and the benchmark-sized
synthetic datasets (`workbench.dataset.synth`, straight into the export schema), so both look alike.

Scenario (all times UTC, 2026-05-01 to 2026-10-31):

* Five scopes (`demo` is the newcomer's own scope) deciding with three rulebooks from
  gate/data/rulebooks: `pricing_exception`, `refund_approval` and `agent_action_gate`, in a
  per-scope mix.
* Facts follow per-policy distributions (discounts, margins, refund amounts, order ages,
  fraud and risk scores, …); decisions fall on business hours more than nights.
* Lifecycle: approved decisions are executed (a few fail to execute or queue first), then get
  outcome records days later (some first `pending`); reviewed decisions are approved by a
  person about half the time; blocked ones get a `blocked` execution receipt now and then; a
  third of the executions are synced to a CRM.
* Injected anomalies, all in scope `demo`:
  - failure spike: in the week of 2026-07-06, approvals of `pricing_exception` by rule
    `approve_owner_backed` fail with probability 0.45 instead of 0.06;
  - fact drift: from 2026-09-15, `agent_action_gate`'s `risk_score` is drawn from Beta(5, 4)
    (mean 0.56) instead of Beta(2, 4) (mean 0.33);
* Degrading policy (every scope): `refund_approval` moves to version 2026-08-01 on
  2026-08-01; v2 auto-approves refunds up to 400 and 60 days old (v1: 150 and 30 days), and
  the approvals v1 would not have given fail with probability 0.30 instead of 0.04.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypedDict

import numpy as np

from gate.resources import data_path
from gate.rulebook import RulebookDocument, checked_rulebook
from gate.strict_json import JsonValue

RULEBOOK_DIR = data_path("rulebooks")

SCOPES = ("demo", "acme-retail", "globex-saas", "initech-finance", "umbrella-health")
SCOPE_WEIGHTS = (0.32, 0.20, 0.18, 0.16, 0.14)
# Outcome failure multiplier per scope (benchmarks compare scopes that differ).
SCOPE_FAILURE = (1.0, 0.8, 1.1, 0.7, 1.35)

POLICIES = ("pricing_exception", "refund_approval", "agent_action_gate")
# Share of each policy per scope (rows: SCOPES).
POLICY_MIX = (
    (0.40, 0.35, 0.25),
    (0.55, 0.45, 0.00),
    (0.45, 0.00, 0.55),
    (0.30, 0.40, 0.30),
    (0.20, 0.50, 0.30),
)
RULEBOOK_FILES = {
    ("pricing_exception", 1): "pricing-exception.json",
    ("refund_approval", 1): "refund-approval.json",
    ("refund_approval", 2): "refund-approval-2026-08-01.json",
    ("agent_action_gate", 1): "agent-action-gate.json",
}

MS_PER_DAY = 86_400_000
START = datetime(2026, 5, 1, tzinfo=UTC)
START_MS = int(START.timestamp() * 1000)
DAYS = 184
END_MS = START_MS + DAYS * MS_PER_DAY


def _ms(year: int, month: int, day: int) -> int:
    return int(datetime(year, month, day, tzinfo=UTC).timestamp() * 1000)


class Spike(TypedDict):
    """A week in which one rule's approvals in one scope fail far more often."""

    scope: str
    policy: str
    rule: str
    start_ms: int
    end_ms: int
    failure: float


class Drift(TypedDict):
    """From `from_ms` on, one fact of one policy in one scope is drawn higher."""

    scope: str
    policy: str
    field: str
    from_ms: int


VERSION_CHANGE_MS = _ms(2026, 8, 1)  # refund_approval v2 from here on
SPIKE: Spike = {"scope": "demo", "policy": "pricing_exception", "rule": "approve_owner_backed",
         "start_ms": _ms(2026, 7, 6), "end_ms": _ms(2026, 7, 13), "failure": 0.45}
DRIFT: Drift = {"scope": "demo", "policy": "agent_action_gate", "field": "risk_score", "from_ms": _ms(2026, 9, 15)}

# Probability that an executed approval's final outcome is a failure, by rule.
RULE_FAILURE = {
    "approve_owner_backed": 0.06,
    "approve_small_recent": 0.04,
    "approve_loyal_customer": 0.05,
    "approve_within_auto_limit": 0.04,  # 0.30 for the approvals v1 would not have given
    "allow_low_risk": 0.07,
}
DEGRADED_FAILURE = 0.30
REVIEWED_FAILURE = 0.09  # approved by a person after review
HOUR_WEIGHTS = np.array([1, 1, 1, 1, 1, 2, 3, 5, 8, 10, 10, 10, 9, 10, 10, 10, 9, 7, 5, 4, 3, 2, 2, 1], float)


def load_rulebook(policy: str, version: int) -> RulebookDocument:
    """The demo rulebook of `policy` at `version`, validated (RulebookInvalid if the file is not)."""
    return checked_rulebook(json.loads((RULEBOOK_DIR / RULEBOOK_FILES[(policy, version)]).read_text()))


@dataclass(frozen=True)
class DecisionPlan:
    """`n` decisions in time order: when, where, which rulebook version and on which facts."""

    at_ms: np.ndarray       # int64 epoch milliseconds, non-decreasing
    scope: np.ndarray       # int8 index into SCOPES
    policy: np.ndarray      # int8 index into POLICIES
    version: np.ndarray     # int8 rulebook version number (1 or 2)
    facts: dict[str, dict[str, np.ndarray]]  # policy → field → values (meaningful where policy matches)

    def __len__(self) -> int:
        return len(self.at_ms)

    def facts_of(self, index: int) -> dict[str, JsonValue]:
        """The facts of decision `index` as JSON values (ints, floats, strings, booleans)."""
        fields = self.facts[POLICIES[self.policy[index]]]
        return {name: values[index].item() for name, values in fields.items()}


def draw_decisions(n: int, seed: int, *, first_day: int = 0, last_day: int = DAYS, stream: int = 0) -> DecisionPlan:
    """Draw `n` decisions on days `first_day <= day < last_day` of the scenario (vectorized;
    the same for the same arguments). `stream` separates the chunks of a large synthesis."""
    rng = np.random.default_rng([seed, 1, stream])
    days = rng.integers(first_day, last_day, n)
    hours = rng.choice(24, n, p=HOUR_WEIGHTS / HOUR_WEIGHTS.sum())
    at_ms = START_MS + days * MS_PER_DAY + hours * 3_600_000 + rng.integers(0, 3_600_000, n)
    at_ms = np.sort(at_ms).astype(np.int64)
    scope = rng.choice(len(SCOPES), n, p=SCOPE_WEIGHTS).astype(np.int8)
    mix = np.array(POLICY_MIX)[scope]
    policy = (rng.random(n)[:, None] > np.cumsum(mix, axis=1)).sum(axis=1).astype(np.int8)
    policy = np.minimum(policy, len(POLICIES) - 1).astype(np.int8)
    version = np.where((policy == POLICIES.index("refund_approval")) & (at_ms >= VERSION_CHANGE_MS), 2, 1)
    facts: dict[str, dict[str, np.ndarray]] = {
        "pricing_exception": {
            "discount_percent": np.clip(np.rint(rng.normal(15, 7, n)), 1, 45).astype(np.int64),
            "margin_percent": np.round(rng.normal(32, 9, n), 1),
            "owner_approved": rng.random(n) < 0.85,
            "account_tier": np.array(["monthly", "annual", "enterprise"])[rng.choice(3, n, p=[0.2, 0.55, 0.25])],
        },
        "refund_approval": {
            "amount": np.round(np.exp(rng.normal(4.7, 0.8, n)), 2),
            "order_age_days": np.clip(np.rint(rng.exponential(28, n)), 0, 365).astype(np.int64),
            "customer_tier": np.array(["standard", "gold", "platinum"])[rng.choice(3, n, p=[0.65, 0.25, 0.10])],
            "prior_refunds_90d": rng.poisson(0.6, n).astype(np.int64),
            "fraud_score": np.round(np.where(rng.random(n) < 0.03, rng.beta(8, 2, n), rng.beta(2, 9, n)), 3),
        },
        "agent_action_gate": {
            "action_type": np.array(["read", "update", "send_email", "delete", "payment"])[
                rng.choice(5, n, p=[0.35, 0.30, 0.15, 0.10, 0.10])],
            "environment": np.array(["production", "staging"])[rng.choice(2, n, p=[0.7, 0.3])],
            "risk_score": np.round(np.where(
                (scope == SCOPES.index(DRIFT["scope"])) & (at_ms >= DRIFT["from_ms"]),
                rng.beta(5, 4, n), rng.beta(2, 4, n)), 3),
            "records_affected": np.clip(np.rint(np.exp(rng.normal(2.5, 1.7, n))), 1, 50_000).astype(np.int64),
            "human_in_loop": rng.random(n) < 0.35,
        },
    }
    return DecisionPlan(at_ms, scope, policy, version.astype(np.int8), facts)


@dataclass(frozen=True)
class Events:
    """Lifecycle receipts to write: one row per receipt, sorted by time."""

    decision: np.ndarray  # int64 index into the DecisionPlan
    kind: np.ndarray      # str: execution | outcome | crm_sync
    status: np.ndarray    # str: the receipt's status
    at_ms: np.ndarray     # int64 epoch milliseconds

    def __len__(self) -> int:
        return len(self.at_ms)


def failure_probability(plan: DecisionPlan, rule: np.ndarray) -> np.ndarray:
    """Probability that an executed automatic approval fails, per decision (0 where no rule)."""
    base = np.zeros(len(plan))
    for rule_id, probability in RULE_FAILURE.items():
        base = np.where(rule == rule_id, probability, base)
    refunds = plan.facts["refund_approval"]
    small_recent = (refunds["amount"] <= 150) & (refunds["order_age_days"] <= 30) & (refunds["fraud_score"] < 0.5)
    loyal = (np.isin(refunds["customer_tier"], ["gold", "platinum"]) & (refunds["prior_refunds_90d"] < 3)
             & (refunds["fraud_score"] < 0.4))
    beyond_v1 = ~small_recent & ~loyal  # v1 would have routed these to review or refused them
    base = np.where((rule == "approve_within_auto_limit") & beyond_v1, DEGRADED_FAILURE, base)
    spike = ((plan.scope == SCOPES.index(SPIKE["scope"])) & (rule == SPIKE["rule"])
             & (plan.at_ms >= SPIKE["start_ms"]) & (plan.at_ms < SPIKE["end_ms"]))
    base = np.where(spike, SPIKE["failure"], base * np.array(SCOPE_FAILURE)[plan.scope])
    return np.minimum(base, 0.95)


def draw_events(plan: DecisionPlan, verdict: np.ndarray, rule: np.ndarray, seed: int, *, stream: int = 0) -> Events:
    """The lifecycle receipts of the decided plan (verdict: yes|no|review; rule: matched rule
    id or "" for the default outcome), vectorized and deterministic."""
    n = len(plan)
    rng = np.random.default_rng([seed, 2, stream])
    u = rng.random((8, n))
    hour, day = 3_600_000, MS_PER_DAY
    parts: list[tuple[np.ndarray, str, np.ndarray, np.ndarray]] = []

    def add(mask: np.ndarray, kind: str, status: str | np.ndarray, at: np.ndarray) -> None:
        index = np.flatnonzero(mask)
        parts.append((index, kind, np.broadcast_to(np.asarray(status), (n,))[index], at[index]))

    yes, no, review = verdict == "yes", verdict == "no", verdict == "review"
    exec_at = plan.at_ms + (u[0] * 6 * hour).astype(np.int64) + 60_000
    # Reviews: a person decides within two days; about half are approved and then executed.
    reviewed = review & (u[1] < 0.75)
    add(reviewed, "execution", "reviewed", plan.at_ms + (u[0] * 2 * day).astype(np.int64) + 60_000)
    human_ok = reviewed & (u[2] < 0.55)
    run = yes | human_ok
    exec_at = np.where(human_ok, exec_at + 2 * day + hour, exec_at)
    queued = run & (u[3] < 0.04)
    add(queued, "execution", "queued", exec_at - 30_000)
    exec_failed = run & (u[3] >= 0.04) & (u[3] < 0.07)
    executed = run & ~exec_failed
    add(exec_failed, "execution", "failed", exec_at)
    add(executed, "execution", "executed", exec_at)
    add(no & (u[1] < 0.4), "execution", "blocked", plan.at_ms + 30_000 + (u[0] * 600_000).astype(np.int64))
    # Outcomes of executed actions, days later; some are first reported as pending.
    p_fail = np.where(human_ok, REVIEWED_FAILURE * np.array(SCOPE_FAILURE)[plan.scope], failure_probability(plan, rule))
    final_at = exec_at + day + (u[4] * 9 * day).astype(np.int64)
    first_pending = executed & (u[5] < 0.2)
    add(first_pending, "outcome", "pending", exec_at + (u[4] * day).astype(np.int64) + hour)
    still_open = final_at > END_MS + 7 * day  # too recent to be known
    x = u[6]
    status = np.where(x < p_fail * 0.75, "failed",
                      np.where(x < p_fail, "reverted",
                               np.where(x < p_fail + 0.02, "cancelled", "succeeded")))
    add(executed & ~still_open, "outcome", status, final_at)
    add(executed & still_open & ~first_pending, "outcome", "pending", exec_at + 2 * hour)
    # A third of the executions are synced to the CRM.
    sync = executed & (u[7] < 0.35)
    sync_status = np.where(u[7] < 0.33, "written", np.where(u[7] < 0.342, "failed", "conflict"))
    add(sync, "crm_sync", sync_status, exec_at + 5 * 60_000)

    decision = np.concatenate([p[0] for p in parts]).astype(np.int64)
    kind = np.concatenate([np.full(len(p[0]), p[1]) for p in parts])
    status = np.concatenate([p[2] for p in parts])
    at_ms = np.concatenate([p[3] for p in parts]).astype(np.int64)
    order = np.lexsort((kind, decision, at_ms))
    return Events(decision[order], kind[order], status[order], at_ms[order])
