"""The decide's write: a decision stored with everything that lives or dies with it.

Guarantees:
- A decision, its first-use rulebook snapshot, its chain link and its monthly-usage charge (and
  each `DecisionExtra`'s rows and outbox event) are written in one transaction: either all exist
  afterwards or none does.
- Idempotency holds across processes and hosts because `(scope, idempotency_key)` is a unique
  constraint: a concurrent duplicate fails in the database, never in process memory.
- The monthly cap is charged in that same transaction (`gate.ledger.api_keys`), so concurrent
  requests can never overshoot it and refused requests charge nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from sqlalchemy import Table, TextClause, bindparam, insert, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from gate.chain.rowseal import SealedDecisionRow
from gate.errors import DuplicateIdempotencyKey, LedgerUnavailable
from gate.ledger.api_keys import ApiKeyLedger, CapCharge
from gate.ledger.chains import ChainAppend, ChainLedger, SealedDecision, carry_head
from gate.ledger.codec import AtRestText
from gate.ledger.confidence import Bucket, counts_from_rows
from gate.ledger.connection import LedgerConnection
from gate.ledger.groupcommit import BATCH_MEMO
from gate.ledger.records import RecordLedger
from gate.ledger.snapshots import SnapshotLedger, SnapshotRow
from gate.ledger.tables import decisions
from gate.protocol.confidence import ConfidenceCounts
from gate.protocol.decision_record import DecisionRecord

_INSERT_DECISION = insert(decisions)
AT_REST_DECISION_COLUMNS = ("record_json", "request_json")


@dataclass(frozen=True, slots=True)
class Written:
    """What `store_decision` answers: the key's monthly usage after the charge (None without a
    charge) and the sealed record (None without a chain)."""

    used: int | None
    record: DecisionRecord | None = None

    @property
    def sealed(self) -> DecisionRecord:
        """The sealed record of a decision stored with its chain (every decide's)."""
        if self.record is None:  # pragma: no cover - the decide pipeline always stores the chain
            raise LedgerUnavailable("the decision was stored without its chain")
        return self.record


class DecisionExtra(Protocol):
    """What lives or dies with a decision (its release row, its hold, an announcement), made by
    the ledger module of its table (`gate.ledger.holds.HoldOpening`,
    `gate.ledger.releases.ReleaseDecision`, `gate.ledger.outbox_write.DecisionCreated`): the
    rows inserted with the decision, then the step run in its transaction once the record is
    sealed (an outbox event), given the sealed record (None: stored without a chain)."""

    def rows(self) -> Sequence[tuple[Table, Mapping[str, object]]]: ...

    def after_seal(self, connection: Connection, record: DecisionRecord | None) -> None: ...


class DecisionWriter:
    """`store_decision` over one `LedgerConnection` and the parts whose rows a decision writes."""

    def __init__(self, ledger: LedgerConnection, *, records: RecordLedger, chains: ChainLedger,
                 snapshots: SnapshotLedger, keys: ApiKeyLedger) -> None:
        self.ledger = ledger
        self.records = records
        self.chains = chains
        self.snapshots = snapshots
        self.keys = keys

    def store_decision(
        self,
        row: SealedDecisionRow,
        *,
        snapshot: SnapshotRow | None,
        charge: CapCharge | None,
        chain: ChainAppend | None = None,
        extra: Sequence[DecisionExtra] = (),
    ) -> Written:
        """Store one decision atomically with its snapshot and usage charge (and, with a chain
        whose `confidence` names a bucket, read its confidence counts first in the same
        transaction). Each `extra`'s rows are inserted (in a batch, with the batch's other rows of
        their table in one INSERT), and its `after_seal` step runs on the connection with the
        sealed record (an outbox event, `gate.ledger.outbox_write`), in the same transaction: they
        are stored exactly when the decision is (`DecisionExtra`).

        Returns the monthly usage after the charge and the sealed record (`Written`). Raises
        DuplicateIdempotencyKey, SnapshotRace, RulebookVersionConflict, MonthlyCapExceeded or
        LedgerUnavailable; in every case nothing was written.
        """
        def store(connection: Connection) -> Written:
            return self._store_one(connection, row, snapshot, charge, chain, extra)

        def refusal(exc: IntegrityError) -> Exception:
            if row.get("idempotency_key") is not None and _is_idempotency_violation(exc):
                return DuplicateIdempotencyKey(row["idempotency_key"])
            return LedgerUnavailable("ledger write failed: integrity error")

        if self.ledger.group is not None:  # one writer thread, many decisions per transaction
            return self.ledger.group.submit(store, refusal)
        try:
            with self.ledger.write() as connection:
                return store(connection)
        except IntegrityError as exc:
            raise refusal(exc) from exc

    def _store_one(self, connection: Connection, row: SealedDecisionRow, snapshot: SnapshotRow | None,
                   charge: CapCharge | None, chain: ChainAppend | None, extra: Sequence[DecisionExtra]) -> Written:
        """One decision's statements inside a write transaction (see `store_decision`)."""
        prepared = chain.prepare(self._batch_counts(connection, chain.confidence)) if chain else None
        # The chain head lock comes first: every writer of a scope takes the same lock
        # in the same order, so snapshot and usage rows can never deadlock.
        head = self.chains.lock_head(connection, chain) if chain else None
        if snapshot is not None:
            self.snapshots.bind(connection, snapshot)
        for item in extra:  # rows that live or die with the decision (its release row, its hold)
            for table, values in item.rows():
                columns = tuple(values)
                self.ledger.insert_row(connection, ("extra", table.name, columns), insert(table), values, columns)
        if (chain is not None and head is not None and charge is not None and self.ledger.dialect == "postgresql"
                and BATCH_MEMO not in connection.info):  # a decide stored alone: one round trip
            sealed = chain.seal(head, prepared)
            used = self._append_store_charge_pg(connection, chain, sealed, charge)
            for item in extra:  # outbox events: after the record is sealed
                item.after_seal(connection, sealed.record)
            return Written(used, sealed.record)
        record = None
        if chain is not None and head is not None:
            sealed = chain.seal(head, prepared)
            self.chains.append_link(connection, chain, sealed)
            row, record = sealed.row, sealed.record
        self.ledger.insert_row(connection, ("decision", *row), _INSERT_DECISION, row, tuple(row))
        for item in extra:  # outbox events: after the record is sealed
            item.after_seal(connection, record)
        return Written(self.keys.charge(connection, charge) if charge else None, record)

    def _batch_counts(self, connection: Connection, bucket: Bucket | None) -> ConfidenceCounts | None:
        """The confidence counts of `bucket`, before any lock: one indexed read by key prefix,
        once per batch (None without a bucket)."""
        if bucket is None:
            return None
        memo = connection.info.get(BATCH_MEMO)
        rows = memo.get(("counts", bucket)) if memo is not None else None
        if rows is None:
            rows = self.records.counts_rows(connection, bucket)
            if memo is not None:
                memo["counts", bucket] = rows
        return counts_from_rows(bucket, rows)

    def _append_store_charge_pg(self, connection: Connection, chain: ChainAppend, sealed: SealedDecision,
                                charge: CapCharge) -> int:
        """PostgreSQL, a decide stored in a transaction of its own (group commit off, or a
        member rerun in its SAVEPOINT): link, Merkle nodes, head, decision and usage charge in
        ONE statement (data-modifying CTEs), so the locked section makes one round trip instead
        of five. The semantics are those of the separate statements: any violation aborts the
        transaction, and no returned row means the cap refused the charge. A batch run all at
        once defers these rows to its multi-row INSERTs instead (`insert_row`, `BATCH_FLUSH`)."""
        row, link, nodes, peaks = sealed.row, sealed.link, sealed.nodes, sealed.peaks
        params = {f"d_{name}": value for name, value in row.items()}
        params.update(
            l_chain_id=chain.chain_id, l_position=link["chain_position"], l_decision_id=link["decision_id"],
            l_leaf_hash=link["leaf_hash"], l_link_hash=link["link_hash"],
            l_link_json=json.dumps(link, separators=(",", ":")),
            h_size=link["chain_position"], h_link_hash=link["link_hash"], h_root=link["merkle_root"],
            h_peaks=json.dumps(list(peaks)), h_updated=link["created_at"],
            u_key_id=charge.key_id, u_period=charge.period, u_cap=charge.cap,
        )
        for index, (level, idx, digest) in enumerate(nodes):
            params.update({f"n{index}_level": level, f"n{index}_idx": idx, f"n{index}_hash": digest})
        shape = (tuple(row), len(nodes))
        returned = self.ledger.hot(("pg-append", *shape), _pg_append_statement(*shape)).run(connection, params)
        used = returned[0]["used"] if returned else None
        if used is None:
            raise charge.refusal()
        carry_head(connection, chain, link, peaks)
        return int(used)


@lru_cache(maxsize=64)
def _pg_append_statement(decision_columns: tuple[str, ...], node_count: int) -> TextClause:
    """The one-round-trip append of `_append_store_charge_pg` (cached per shape)."""
    nodes = ", ".join(f"(:l_chain_id, :n{i}_level, :n{i}_idx, :n{i}_hash)" for i in range(node_count))
    columns = ", ".join(decision_columns)
    values = ", ".join(f":d_{name}" for name in decision_columns)
    # The interpolated parts are placeholders and the table's own column names, never values.
    # The JSON documents bind through their column type, so they are stored in the at-rest encoding.
    documents = [bindparam("l_link_json", type_=AtRestText())] + [
        bindparam(f"d_{name}", type_=AtRestText()) for name in decision_columns if name in AT_REST_DECISION_COLUMNS]
    return text(
        "WITH link AS (INSERT INTO chain_links (chain_id, chain_position, decision_id, leaf_hash, link_hash, link_json) "  # noqa: S608
        "VALUES (:l_chain_id, :l_position, :l_decision_id, :l_leaf_hash, :l_link_hash, :l_link_json)), "
        f"nodes AS (INSERT INTO merkle_nodes (chain_id, level, idx, hash) VALUES {nodes}), "
        "head AS (UPDATE chain_heads SET size = :h_size, head_link_hash = :h_link_hash, merkle_root = :h_root, "
        "tree_peaks = :h_peaks, updated_at = :h_updated WHERE chain_id = :l_chain_id), "
        f"decision AS (INSERT INTO decisions ({columns}) VALUES ({values})) "
        "INSERT INTO usage_counters (key_id, period, used) VALUES (:u_key_id, :u_period, 1) "
        "ON CONFLICT (key_id, period) DO UPDATE SET used = usage_counters.used + 1 "
        "WHERE usage_counters.used < :u_cap RETURNING used"
    ).bindparams(*documents)


def _is_idempotency_violation(exc: IntegrityError) -> bool:
    message = str(exc.orig).lower()
    return "idempotency_key" in message or "uq_decisions_scope_idempotency_key" in message
