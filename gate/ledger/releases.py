"""Ledger reads and writes of policy releases (tables `release_events`, `release_decisions`,
`release_policies`; migration 0010). The release chain of one `(scope, rulebook_id)` is gap-free:
an event is inserted as `seq = head + 1` under the primary key, so of two racing transitions one
wins and the other is retried on the new head by the service. A scope's release-policy changes
are a chain of the same table under the reserved id `GOVERNANCE_ID` (issue 42), the grants of
keys that act on production under `KEY_GRANTS_ID` (issue 52); `release_policies`
holds only the policy a scope stored before its first change."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict, cast

from sqlalchemy import Select, String, Table, and_, bindparam, case, func, insert, select, update
from sqlalchemy.engine import Connection, RowMapping
from sqlalchemy.exc import IntegrityError

from gate.chain.event_witness import ChainWitness, governance_chain_id, key_chain_id, release_chain_id
from gate.chain.links import scope_hash
from gate.errors import Signal
from gate.ledger.outbox_write import append_event
from gate.ledger.store import ApiKeyRow, Ledger
from gate.ledger.tables import (
    api_keys,
    hold_events,
    outcome_latest,
    release_decisions,
    release_events,
    release_policies,
)
from gate.releases.events import ReleaseEvent
from gate.releases.governance import GOVERNANCE_ID
from gate.releases.key_grants import KEY_GRANTS_ID

_RESERVED = (GOVERNANCE_ID, KEY_GRANTS_ID)  # chains of the table that are no release


class EventRow(TypedDict):
    """A row of `release_events`: one event of a release chain, of the scope's governance chain
    (`GOVERNANCE_ID`) or of its key chain (`KEY_GRANTS_ID`), its canonical text in `event_json`."""

    scope: str
    rulebook_id: str
    seq: int
    action: str
    event_hash: str
    idempotency_key: str | None
    request_hash: str
    created_at: str
    event_json: str


class ReleaseDecisionRow(TypedDict):
    """A row of `release_decisions`: the arm and version a decide ran, and its shadow's verdict."""

    decision_id: str
    scope: str
    rulebook_id: str
    release_seq: int
    arm: str
    version: str
    verdict: str
    created_at: str
    shadow_version: str | None
    shadow_verdict: str | None
    shadow_reason_code: str | None
    shadow_matched_rule_id: str | None


class ShadowColumns(TypedDict, total=False):
    """The shadow's columns of a release decision row (no verdict: the shadow could not be evaluated)."""

    shadow_version: str | None
    shadow_verdict: str | None
    shadow_reason_code: str | None
    shadow_matched_rule_id: str | None


@dataclass(frozen=True, slots=True)
class ReleaseDecision:
    """A decide's release row, stored with its decision (gate.ledger.store.DecisionExtra)."""

    row: ReleaseDecisionRow

    def rows(self) -> tuple[tuple[Table, Mapping[str, object]], ...]:
        return ((release_decisions, self.row),)

    def after_seal(self, connection: Connection, record: object) -> None:
        """Nothing is announced of a release row."""


class ShadowRow(TypedDict):
    """A decision evaluated beside a shadow version, with its live outcome's effect (None: none yet)."""

    decision_id: str
    version: str
    verdict: str
    shadow_verdict: str | None
    created_at: str
    effect: str | None


def _event_row(row: RowMapping) -> EventRow:
    """A `release_events` row as read (the table's columns are EventRow's)."""
    return cast(EventRow, dict(row))


class ReleaseRace(Signal):
    """Internal: a concurrent transition took this sequence number; re-read the head and retry."""


class _NoSuchKey(Signal):
    """Internal: the key a grant enables is not there; its transaction is rolled back."""


@dataclass(frozen=True, slots=True)
class ArmTally:
    """One arm's decisions by verdict and its resolved outcomes."""

    verdicts: dict[str, int]
    failed: int
    succeeded: int


@dataclass(frozen=True, slots=True)
class Announcement:
    """The outbox event that announces a release event (its type and data)."""

    name: str
    data: Mapping[str, object]


def _hold_policy_version() -> Select[Any]:
    scope = bindparam("scope", type_=String)
    governance = and_(release_events.c.scope == scope, release_events.c.rulebook_id == GOVERNANCE_ID)
    newest = select(func.max(release_events.c.seq)).where(governance).scalar_subquery()
    return select(newest,
                  select(release_events.c.event_hash).where(governance, release_events.c.seq == newest)
                  .scalar_subquery(),
                  select(func.max(hold_events.c.seq)).where(hold_events.c.scope == scope,
                                                            hold_events.c.action == "policy_set").scalar_subquery())


_HOLD_POLICY_VERSION = _hold_policy_version()  # built once: a decide runs it, it never changes


class ReleaseLedger:
    """The release tables over one `Ledger`."""

    def __init__(self, ledger: Ledger, witness: ChainWitness | None = None) -> None:
        self.ledger = ledger
        self.witness = witness

    def head(self, scope: str, rulebook_id: str) -> EventRow | None:
        """The newest event row of a release (None before its first transition)."""
        with self.ledger.read() as connection:
            row = connection.execute(
                select(release_events).where(release_events.c.scope == scope,
                                             release_events.c.rulebook_id == rulebook_id)
                .order_by(release_events.c.seq.desc()).limit(1)).mappings().first()
        return _event_row(row) if row else None

    def hold_policy_version(self, scope: str) -> tuple[int | None, str | None, int | None]:
        """What the scope's hold policy in force depends on, in one statement of index reads
        (issue 68): its governance chain's head (seq, event_hash; None before its first change)
        and the seq of the hold chain's newest policy step made before issue 52 (None: none).
        Equal versions mean the same policy; any change committed anywhere changes the version."""
        with self.ledger.read() as connection:
            row = connection.execute(_HOLD_POLICY_VERSION, {"scope": scope}).one()
        return row[0], row[1], row[2]

    def events(self, scope: str, rulebook_id: str, limit: int = 1000) -> list[EventRow]:
        """A release's events, oldest first (at most `limit`, newest kept)."""
        with self.ledger.read() as connection:
            rows = connection.execute(
                select(release_events).where(release_events.c.scope == scope,
                                             release_events.c.rulebook_id == rulebook_id)
                .order_by(release_events.c.seq.desc()).limit(limit)).mappings().all()
        return [_event_row(r) for r in reversed(rows)]

    def by_idempotency(self, scope: str, rulebook_id: str, key: str) -> EventRow | None:
        with self.ledger.read() as connection:
            row = connection.execute(
                select(release_events).where(release_events.c.scope == scope,
                                             release_events.c.rulebook_id == rulebook_id,
                                             release_events.c.idempotency_key == key)).mappings().first()
        return _event_row(row) if row else None

    def event_hashes(self, scope: str, rulebook_id: str) -> list[str]:
        """The `event_hash` of every event of one chain (a release, or `GOVERNANCE_ID`), oldest
        first (what its witnessed checkpoints are made of, `gate.chain.event_witness`)."""
        with self.ledger.read() as connection:
            return _event_hashes(connection, scope, rulebook_id)

    def append(self, row: EventRow, announce: Announcement | None = None) -> None:
        """Insert an event row, and its announcement in the outbox in the same transaction
        (docs/events.md); `ReleaseRace` when its seq (or its idempotency key) was taken. With a
        witness, the chain is checked against its witnessed checkpoint first, in the same
        transaction (a refusal writes nothing), and so is the scope's governance chain for a
        release event (the policy it was allowed under); the new checkpoint is published after."""
        scope, rulebook_id = row["scope"], row["rulebook_id"]
        chain_id = witnessed_chain_id(scope, rulebook_id)
        hashes: list[str] = []
        try:
            with self.ledger.write() as connection:
                if self.witness is not None:
                    if rulebook_id != GOVERNANCE_ID:
                        self.witness.check(witnessed_chain_id(scope, GOVERNANCE_ID),
                                           lambda: _event_hashes(connection, scope, GOVERNANCE_ID))
                    hashes = self.witness.check(chain_id, lambda: _event_hashes(connection, scope, rulebook_id))
                connection.execute(insert(release_events).values(**row))
                if announce is not None:
                    append_event(connection, row["scope"], announce.name, row["rulebook_id"], row["created_at"],
                                 announce.data)
        except IntegrityError as exc:
            raise ReleaseRace(str(row["seq"])) from exc
        if self.witness is not None:
            self.witness.publish(chain_id, [*hashes, row["event_hash"]])

    def append_key_grant(self, row: EventRow, key_row: ApiKeyRow | None = None,
                         enable: tuple[str, dict[str, Any]] | None = None) -> bool:
        """A key grant's event row (gate.releases.key_grants) with what it records, in one
        transaction: the new key's row, or an existing key `(key_id, values)` set active with
        `values` (its permissions and holder; False, and nothing written, when that key is not
        there). `ReleaseRace` when the seq was taken. With a witness, the key chain is checked
        against its witnessed checkpoint first, in the same transaction (a refusal writes
        nothing), and its new checkpoint is published after (issue 64)."""
        scope = row["scope"]
        chain_id = witnessed_chain_id(scope, KEY_GRANTS_ID)
        hashes: list[str] = []
        try:
            with self.ledger.write() as connection:
                if self.witness is not None:
                    hashes = self.witness.check(chain_id, lambda: _event_hashes(connection, scope, KEY_GRANTS_ID))
                if key_row is not None:
                    connection.execute(insert(api_keys).values(**key_row))
                if enable is not None:
                    moved = connection.execute(update(api_keys).where(api_keys.c.key_id == enable[0])
                                               .values(status="active", disabled_at=None, **enable[1]))
                    if moved.rowcount != 1:
                        raise _NoSuchKey(enable[0])  # rolls the transaction back
                connection.execute(insert(release_events).values(**row))
        except IntegrityError as exc:
            raise ReleaseRace(str(row["seq"])) from exc
        except _NoSuchKey:
            return False
        if self.witness is not None:
            self.witness.publish(chain_id, [*hashes, row["event_hash"]])
        return True

    def halt_events(self, scope: str, rulebook_id: str) -> list[ReleaseEvent]:
        """Every halt event of a release, however long its history (a guardrail's halt binds for good)."""
        with self.ledger.read() as connection:
            rows = connection.execute(
                select(release_events.c.event_json).where(release_events.c.scope == scope,
                                                          release_events.c.rulebook_id == rulebook_id,
                                                          release_events.c.action == "halt")
                .order_by(release_events.c.seq)).all()
        return [json.loads(r[0]) for r in rows]

    def rulebook_ids(self, scope: str) -> list[str]:
        with self.ledger.read() as connection:
            rows = connection.execute(
                select(release_events.c.rulebook_id).where(release_events.c.scope == scope,
                                                           release_events.c.rulebook_id.notin_(_RESERVED))
                .group_by(release_events.c.rulebook_id).order_by(release_events.c.rulebook_id)).all()
        return [r[0] for r in rows]

    def policy(self, scope: str) -> str | None:
        with self.ledger.read() as connection:
            return connection.execute(select(release_policies.c.policy_json)
                                      .where(release_policies.c.scope == scope)).scalar()


    def arm_tallies(self, scope: str, rulebook_id: str, since_seq: int) -> dict[str, ArmTally]:
        """Per arm (active, canary) since event `since_seq`: decisions by verdict and their
        latest resolved outcomes (failure / success; open or excluded ones are not counted)."""
        rd, ol = release_decisions, outcome_latest
        query = (select(rd.c.arm, rd.c.verdict, func.count(), func.sum(_is(ol.c.effect, "failure")),
                        func.sum(_is(ol.c.effect, "success")))
                 .select_from(rd.outerjoin(ol, and_(ol.c.decision_id == rd.c.decision_id, ol.c.scope == rd.c.scope)))
                 .where(rd.c.scope == scope, rd.c.rulebook_id == rulebook_id, rd.c.release_seq >= since_seq,
                        rd.c.arm.in_(("active", "canary")))
                 .group_by(rd.c.arm, rd.c.verdict))
        with self.ledger.read() as connection:
            rows = connection.execute(query).all()
        tallies: dict[str, ArmTally] = {}
        for arm, verdict, count, failed, succeeded in rows:
            tally = tallies.setdefault(arm, ArmTally({}, 0, 0))
            tally.verdicts[verdict] = int(count)
            tallies[arm] = ArmTally(tally.verdicts, tally.failed + int(failed or 0),
                                    tally.succeeded + int(succeeded or 0))
        return tallies

    def shadow_rows(self, scope: str, rulebook_id: str, shadow_version: str, limit: int = 50_000) -> list[ShadowRow]:
        """Live and shadow verdicts of the decisions evaluated beside a shadow version, with the
        live decision's latest outcome effect (None while none is reported)."""
        rd, ol = release_decisions, outcome_latest
        query = (select(rd.c.decision_id, rd.c.version, rd.c.verdict, rd.c.shadow_verdict, rd.c.created_at,
                        ol.c.effect)
                 .select_from(rd.outerjoin(ol, and_(ol.c.decision_id == rd.c.decision_id, ol.c.scope == rd.c.scope)))
                 .where(rd.c.scope == scope, rd.c.rulebook_id == rulebook_id, rd.c.shadow_version == shadow_version)
                 .order_by(rd.c.created_at.desc()).limit(limit))
        with self.ledger.read() as connection:
            return [cast(ShadowRow, dict(r)) for r in connection.execute(query).mappings().all()]

    def release_row(self, scope: str, decision_id: str) -> ReleaseDecisionRow | None:
        with self.ledger.read() as connection:
            row = connection.execute(select(release_decisions).where(
                release_decisions.c.scope == scope, release_decisions.c.decision_id == decision_id)).mappings().first()
        return cast(ReleaseDecisionRow, dict(row)) if row else None


def _is(column: Any, value: str) -> Any:
    return case((column == value, 1), else_=0)


def halt_rows(release_ledger: ReleaseLedger, scope: str, limit: int = 50) -> list[dict[str, str]]:
    """The scope's newest halt events (guardrail halts among them), newest first."""
    with release_ledger.ledger.read() as connection:
        rows = connection.execute(
            select(release_events.c.event_json).where(release_events.c.scope == scope,
                                                      release_events.c.action == "halt")
            .order_by(release_events.c.created_at.desc()).limit(limit)).all()
    return [{"event_json": r[0]} for r in rows]


def witnessed_chain_id(scope: str, rulebook_id: str) -> str:
    """The checkpoint chain id of a release chain, of the scope's governance chain or of its key chain."""
    hashed = scope_hash(scope)
    if rulebook_id == KEY_GRANTS_ID:
        return key_chain_id(hashed)
    return governance_chain_id(hashed) if rulebook_id == GOVERNANCE_ID else release_chain_id(hashed, rulebook_id)


def _event_hashes(connection: Any, scope: str, rulebook_id: str) -> list[str]:
    rows = connection.execute(select(release_events.c.event_hash).where(
        release_events.c.scope == scope, release_events.c.rulebook_id == rulebook_id)
        .order_by(release_events.c.seq)).all()
    return [str(row[0]) for row in rows]
