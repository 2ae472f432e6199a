"""Decision-confidence counters: maintained in each outcome's transaction, read by decide.

Each decision sits in one bucket (scope, policy_id, verdict, action, policy_version), fixed
when it was decided, and in one effectiveness class: that of its latest Outcome Record (by
`reported_at`, then receipt id), or none before its first outcome. `confidence_counters`
holds, per bucket and per roll-up (`policy_version = ''`: every version of that verdict and
action; verdict, action and version all `''`: the whole policy), how many decisions are in each
class. `outcome_latest` holds each decision's latest outcome and class.

`apply_outcome` runs inside the transaction that stores the Outcome Record:
1. it makes sure the decision's `outcome_latest` row exists, then locks it (FOR UPDATE on
   PostgreSQL; SQLite write transactions are already serialized by BEGIN IMMEDIATE), so two
   outcomes of one decision are applied one after the other;
2. when the new outcome is newer than the stored latest, it replaces it and, if the class
   changed, moves the decision: -1 in the old class and +1 in the new one, in each of the
   three counter rows, with one atomic upsert that adds deltas (never read-modify-write).
   Counter rows are always touched in the same order (bucket, version roll-up, policy
   roll-up), so concurrent outcomes of different decisions cannot deadlock.
An outcome that is older than the stored latest (two writers committing out of order) changes
nothing: the counters always describe each decision's latest outcome.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, Table, and_, bindparam, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from gate.errors import LedgerUnavailable
from gate.ledger.tables import confidence_counters, outcome_latest
from gate.protocol.confidence import ConfidenceCounts
from gate.receipts.values import (
    EFFECT_EXCLUDED,
    EFFECT_FAILURE,
    EFFECT_OPEN,
    EFFECT_SUCCESS,
)

ALL = ""  # the roll-up value of verdict, action and policy_version
_COLUMN_OF = {EFFECT_SUCCESS: "n_success", EFFECT_FAILURE: "n_failure",
              EFFECT_EXCLUDED: "n_excluded", EFFECT_OPEN: "n_open"}
_COUNT_COLUMNS = tuple(_COLUMN_OF.values())


@dataclass(frozen=True, slots=True)
class Bucket:
    """Where a decision counts: fixed by its record."""

    scope: str
    policy_id: str
    verdict: str
    action: str
    policy_version: str

    def rows(self) -> tuple[tuple[str, str, str], ...]:
        """(verdict, action, policy_version) of the three counter rows, in lock order."""
        return ((self.verdict, self.action, self.policy_version),
                (self.verdict, self.action, ALL),
                (ALL, ALL, ALL))


@dataclass(frozen=True, slots=True)
class OutcomeMove:
    """One stored Outcome Record, as the counters see it."""

    bucket: Bucket
    decision_id: str
    reported_at: str
    receipt_id: str
    effect: str  # gate.receipts.values.OUTCOME_EFFECTIVENESS_CLASS value


def _insert(dialect: str) -> Callable[[Table], postgresql.Insert] | Callable[[Table], sqlite.Insert]:
    return postgresql.insert if dialect == "postgresql" else sqlite.insert


_LOCK_LATEST = select(outcome_latest).where(
    outcome_latest.c.decision_id == bindparam("decision_id")).with_for_update()


def apply_outcome(connection: Connection, dialect: str, move: OutcomeMove) -> bool:
    """Apply one outcome inside the caller's write transaction; True when it became the
    decision's latest outcome."""
    if move.effect not in _COLUMN_OF:
        raise ValueError(f"unknown outcome effect {move.effect!r}")
    connection.execute(_insert(dialect)(outcome_latest).values(
        decision_id=move.decision_id, scope=move.bucket.scope, reported_at="", receipt_id="",
        effect="").on_conflict_do_nothing())
    current = connection.execute(_LOCK_LATEST, {"decision_id": move.decision_id}).mappings().first()
    if current is None:  # pragma: no cover - the row was inserted just above (or already there)
        raise LedgerUnavailable("the decision's latest outcome could not be read")
    if (move.reported_at, move.receipt_id) <= (current["reported_at"], current["receipt_id"]):
        return False  # an outcome at least as new is already counted
    connection.execute(update(outcome_latest).where(outcome_latest.c.decision_id == move.decision_id)
                       .values(reported_at=move.reported_at, receipt_id=move.receipt_id, effect=move.effect))
    old = current["effect"]
    if old == move.effect:
        return True
    deltas = dict.fromkeys(_COUNT_COLUMNS, 0)
    deltas[_COLUMN_OF[move.effect]] += 1
    if old:
        deltas[_COLUMN_OF[old]] -= 1
    bucket = move.bucket
    statement = _insert(dialect)(confidence_counters).values([
        {"scope": bucket.scope, "policy_id": bucket.policy_id, "verdict": verdict, "action": action,
         "policy_version": version, **deltas}
        for verdict, action, version in bucket.rows()
    ])
    statement = statement.on_conflict_do_update(
        index_elements=[confidence_counters.c.scope, confidence_counters.c.policy_id,
                        confidence_counters.c.verdict, confidence_counters.c.action,
                        confidence_counters.c.policy_version],
        set_={name: confidence_counters.c[name] + statement.excluded[name] for name in _COUNT_COLUMNS},
    )
    connection.execute(statement)
    return True


def _build_counts_query() -> Select[Any]:
    c = confidence_counters.c
    return select(c.verdict, c.action, c.policy_version, *[c[name] for name in _COUNT_COLUMNS]).where(and_(
        c.scope == bindparam("scope"), c.policy_id == bindparam("policy_id"),
        or_(and_(c.verdict == bindparam("verdict"), c.action == bindparam("action"),
                 or_(c.policy_version == bindparam("policy_version"), c.policy_version == ALL)),
            and_(c.verdict == ALL, c.action == ALL, c.policy_version == ALL))))


# The one query decide runs (built once: it is on the hot path): the bucket's row, its version
# roll-up and the policy roll-up, all by primary-key prefix.
COUNTS_QUERY = _build_counts_query()


def counts_params(bucket: Bucket) -> dict[str, str]:
    return {"scope": bucket.scope, "policy_id": bucket.policy_id, "verdict": bucket.verdict,
            "action": bucket.action, "policy_version": bucket.policy_version}


def counts_from_rows(bucket: Bucket, rows: Iterable[Mapping[Any, Any]]) -> ConfidenceCounts | None:
    """ConfidenceCounts from `COUNTS_QUERY` rows (mappings by column name); None when the scope
    has no Outcome Record for the policy (then the record carries no `decision_confidence`)."""
    by_key = {(row["verdict"], row["action"], row["policy_version"]): row for row in rows}
    policy = by_key.get((ALL, ALL, ALL))
    if policy is None or sum(policy[name] for name in _COUNT_COLUMNS) <= 0:
        return None
    current = by_key.get((bucket.verdict, bucket.action, bucket.policy_version))
    every = by_key.get((bucket.verdict, bucket.action, ALL))
    cur_s = current["n_success"] if current is not None else 0
    cur_f = current["n_failure"] if current is not None else 0
    all_s = every["n_success"] if every is not None else 0
    all_f = every["n_failure"] if every is not None else 0
    return ConfidenceCounts(cur_s, cur_f, all_s - cur_s, all_f - cur_f)

