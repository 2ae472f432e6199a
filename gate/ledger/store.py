"""The ledger repository: every read and write of stored state goes through `Ledger`.

Guarantees:
- A decision, its first-use rulebook snapshot and its monthly-usage charge are written in one
  transaction: either all exist afterwards or none does.
- Idempotency holds across processes and hosts because `(scope, idempotency_key)` is a unique
  constraint: a concurrent duplicate fails in the database, never in process memory.
- The monthly cap is charged with a conditional UPDATE (`used < cap`) in that same transaction,
  so concurrent requests can never overshoot it and refused requests charge nothing.
- Driver errors are wrapped once, here, as `LedgerUnavailable` (the API answers 503).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import (
    RowMapping,
    Table,
    TextClause,
    and_,
    bindparam,
    insert,
    select,
    text,
    union_all,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError
from sqlalchemy.sql.dml import Insert, ReturningInsert
from sqlalchemy.sql.expression import Executable

from gate.chain.links import ChainLink
from gate.chain.rowseal import SealedDecisionRow
from gate.clock import seconds_to_next_month
from gate.errors import (
    DuplicateIdempotencyKey,
    LedgerUnavailable,
    MonthlyCapExceeded,
    RulebookVersionConflict,
    SnapshotRace,
)
from gate.ledger import waits, writelock
from gate.ledger.codec import AtRestText, StoredValueUnreadable
from gate.ledger.confidence import COUNTS_QUERY, Bucket, counts_from_rows, counts_params
from gate.ledger.engine import WRITE_OPTION, make_engine, normalize_url
from gate.ledger.groupcommit import BATCH_MEMO, GroupWriter, defer, defer_row
from gate.ledger.outbox_write import append_event
from gate.ledger.prepared import Prepared
from gate.ledger.tables import (
    api_keys,
    chain_checkpoints,
    chain_heads,
    chain_links,
    decisions,
    merkle_nodes,
    rulebook_snapshots,
    usage_counters,
)
from gate.protocol.confidence import ConfidenceCounts
from gate.protocol.decision_record import DecisionRecord
from gate.protocol.types import SnapshotLineage

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
BUNDLE_CANDIDATES = 8

# Hot-path statements, built once (executed with parameter dicts).
_INSERT_DECISION = insert(decisions)
_KEY_BY_HASH = select(api_keys).where(api_keys.c.key_hash == bindparam("key_hash"))
_HEAD_FOR_UPDATE = select(chain_heads).where(chain_heads.c.chain_id == bindparam("chain_id")).with_for_update()
_INSERT_LINK = insert(chain_links)
_INSERT_NODES = insert(merkle_nodes)
_SET_USED = update(usage_counters).where(and_(
    usage_counters.c.key_id == bindparam("counter_key_id"), usage_counters.c.period == bindparam("counter_period"),
)).values(used=bindparam("counter_used"))
_UPDATE_HEAD = update(chain_heads).where(chain_heads.c.chain_id == bindparam("head_chain_id")).values(
    size=bindparam("size"), head_link_hash=bindparam("head_link_hash"), merkle_root=bindparam("merkle_root"),
    tree_peaks=bindparam("tree_peaks"), updated_at=bindparam("updated_at"))


UNREADABLE = "a stored ledger value could not be decoded (corrupt, or written with an unknown dictionary)"

# SQLite refuses an expression tree deeper than 1,000; an OR of N conditions is N deep.
NODE_REFS_PER_QUERY = 400
AT_REST_DECISION_COLUMNS = ("record_json", "request_json")


@dataclass(frozen=True, slots=True)
class CapCharge:
    """Charge one record to `key_id` for `period` (YYYY-MM), refusing beyond `cap`; `at` is the
    record's time (the refusal says how long until the cap resets)."""

    key_id: str
    period: str
    cap: int
    at: str

    def refusal(self) -> MonthlyCapExceeded:
        """The cap's refusal, saying in how many seconds it resets (`retry_after`)."""
        return MonthlyCapExceeded(self.cap, self.period, seconds_to_next_month(self.at))


class SnapshotRow(SnapshotLineage):
    """A rulebook snapshot as bound (`rulebook_snapshots`): its lineage, its canonical body and its
    signed registry entry as stored text, in a scope."""

    scope: str
    body_json: str
    registry_json: str


class StoredSnapshot(SnapshotRow):
    """A snapshot as read back, with its row id."""

    snapshot_id: int


def _snapshot(row: RowMapping) -> StoredSnapshot:
    return {"snapshot_id": row["snapshot_id"], "scope": row["scope"], "rulebook_id": row["rulebook_id"],
            "version": row["version"], "rulebook_hash": row["rulebook_hash"],
            "evaluator_version": row["evaluator_version"], "schema_hash": row["schema_hash"],
            "registered_at": row["registered_at"], "body_json": row["body_json"],
            "registry_json": row["registry_json"]}


@dataclass(frozen=True, slots=True)
class ChainHead:
    """A chain's head as read under its row lock (size 0 for a new chain)."""

    chain_id: str
    size: int
    head_link_hash: str | None
    merkle_root: str | None
    tree_peaks: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SealedDecision:
    """What `ChainAppend.seal` returns: the decision row (its stored record text included), its
    chain link, the completed tree nodes (level, index, hash), the tree's new peaks, and the
    sealed record itself (the ledger only hands it to the decision's `after` steps and returns it)."""

    row: SealedDecisionRow
    link: ChainLink
    nodes: list[tuple[int, int, str]]
    peaks: tuple[str, ...]
    record: DecisionRecord


@dataclass(frozen=True, slots=True)
class ChainAppend:
    """What one decision adds to its chain, computed by the caller in two steps.

    `prepare(counts)` runs first, before the chain head is locked: `counts` are the decide-time
    confidence counts of `confidence` (read in the storing transaction, once per batch; None
    without a bucket or before the scope's first outcome). `seal(head, prepared)` then runs under
    the head's lock with what `prepare` returned, and answers the `SealedDecision`. Both return
    new values; a batch run again member by member calls them again from the start.
    """

    chain_id: str
    scope: str
    seal: Callable[[ChainHead, Any], SealedDecision]
    prepare: Callable[[ConfidenceCounts | None], Any] = lambda counts: None
    confidence: Bucket | None = None


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


@dataclass(frozen=True, slots=True)
class StoredDecision:
    decision_id: str
    scope: str
    idempotency_key: str | None
    input_hash: str
    record_hash: str
    receipt_hash: str
    created_at: str
    record_json: str
    request_json: str
    # Every other column, as stored (what `gate.chain.rowseal` seals and verify compares).
    columns: dict[str, Any]


def _carry_head(connection: Connection, chain: ChainAppend, link: ChainLink, peaks: Sequence[str]) -> bool:
    """In a batch run all at once (`gate.ledger.groupcommit`), the head this member's link leaves
    is the next member's: the row stays locked to this transaction until it commits. False
    outside such a batch."""
    memo = connection.info.get(BATCH_MEMO)
    if memo is None:
        return False
    memo["head", chain.chain_id] = ChainHead(chain.chain_id, link["chain_position"], link["link_hash"],
                                             link["merkle_root"], tuple(peaks))
    return True


class Ledger:
    """Repository over an SQLAlchemy engine (SQLite file or PostgreSQL)."""

    def __init__(self, url: str, *, pool_size: int = 5, engine: Engine | None = None,
                 group_commit: bool | None = None) -> None:
        """`group_commit`: decisions stored through one writer thread per process, many per
        transaction (`gate.ledger.groupcommit`); None (auto): on, for SQLite and PostgreSQL alike."""
        self.url = normalize_url(url)
        self.engine = engine or make_engine(self.url, pool_size=pool_size)
        self.dialect = self.engine.dialect.name
        self._charge_sql: ReturningInsert[Any] | None = None
        self._prepared: dict[Any, Prepared] = {}
        self._node_queries: dict[int, Executable] = {}  # `merkle_nodes` by how many levels it names
        self.write_queue = writelock.for_url(self.engine.url.database) if self.dialect == "sqlite" else None
        self._snapshot = threading.local()  # the connection of this thread's `one_snapshot`, if any
        if group_commit is None:
            group_commit = True
        self.group = GroupWriter(self.write) if group_commit else None

    # ------------------------------------------------------------------ lifecycle

    def upgrade(self) -> None:
        """Bring the schema to the newest Alembic revision (idempotent). A ledger that already
        states the newest revision is left as it is without loading Alembic (issue 68: a command
        such as `gate holds list` starts without it)."""
        if self._states_newest_revision():
            return
        # Alembic is imported only here: a serving process that does not migrate never loads it.
        from alembic import command
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS_DIR))
        config.set_main_option("sqlalchemy.url", self.url.replace("%", "%%"))
        with self.engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")

    def _states_newest_revision(self) -> bool:
        """Whether `alembic_version` holds exactly the newest migration's revision: each file in
        migrations/versions is named as its revision and the names sort in the chain's order
        (tests/ledger/test_migration_names.py). Anything else (no such table, an older, a branched
        or an unknown revision) is Alembic's to handle."""
        newest = max(path.stem for path in (MIGRATIONS_DIR / "versions").glob("[0-9]*.py"))
        try:
            with self.engine.connect() as connection:
                stated = connection.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
        except DBAPIError:
            return False
        return list(stated) == [newest]

    def dispose(self) -> None:
        self.engine.dispose()

    def ping(self) -> bool:
        try:
            with self.engine.connect() as connection:
                connection.execute(text("SELECT 1"))
            return True
        except SQLAlchemyError:
            return False

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction (BEGIN IMMEDIATE on SQLite); commits on success."""
        try:
            asked = time.perf_counter()
            with self._queued(), self.engine.connect() as plain:
                connection = plain.execution_options(**{WRITE_OPTION: True})
                with connection.begin():
                    if self.write_queue is not None:  # SQLite: BEGIN IMMEDIATE ran, the write lock is held
                        waits.waited(waits.WRITE_QUEUE, time.perf_counter() - asked)
                    yield connection
        except IntegrityError:
            raise
        except (DBAPIError, SQLAlchemyError) as exc:
            raise LedgerUnavailable(f"ledger write failed: {type(exc).__name__}") from exc
        except StoredValueUnreadable as exc:
            raise LedgerUnavailable(UNREADABLE) from exc

    def _queued(self) -> AbstractContextManager[None]:
        """SQLite: wait in the host's fair write queue first (`gate.ledger.writelock`)."""
        return self.write_queue.held() if self.write_queue is not None else nullcontext()

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read. On PostgreSQL reads run in autocommit (no BEGIN/COMMIT round trips): each
        is one statement, and the writes they race are atomic transactions. Inside
        `one_snapshot` every read of the thread runs on that snapshot's connection."""
        pinned: Connection | None = getattr(self._snapshot, "connection", None)
        try:
            if pinned is not None:
                yield pinned
                return
            with self.engine.connect() as connection:
                if self.dialect == "postgresql":
                    yield connection.execution_options(isolation_level="AUTOCOMMIT")
                    return
                with connection.begin():
                    yield connection
        except (DBAPIError, SQLAlchemyError) as exc:
            raise LedgerUnavailable(f"ledger read failed: {type(exc).__name__}") from exc
        except StoredValueUnreadable as exc:  # a corrupt at-rest value (gate.ledger.codec): fail closed
            raise LedgerUnavailable(UNREADABLE) from exc

    @contextmanager
    def one_snapshot(self) -> Iterator[None]:
        """Every read of this thread inside sees the ledger as of one instant. Several reads that
        must agree (a chain head, its newest link, its nodes) otherwise each see the ledger of
        their own moment, and a decide committed between them reads as a contradiction. SQLite:
        one deferred read transaction (WAL keeps its snapshot from the first read); PostgreSQL:
        one REPEATABLE READ, READ ONLY transaction. Nested: the outer snapshot holds."""
        if getattr(self._snapshot, "connection", None) is not None:
            yield
            return
        try:
            with self.engine.connect() as plain:
                connection = (plain.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
                              if self.dialect == "postgresql" else plain)
                with connection.begin():
                    self._snapshot.connection = connection
                    try:
                        yield
                    finally:
                        self._snapshot.connection = None
        except (DBAPIError, SQLAlchemyError) as exc:
            raise LedgerUnavailable(f"ledger read failed: {type(exc).__name__}") from exc

    def insert_ignore(self, table: Table, values: Mapping[str, Any]) -> Insert:
        """INSERT … ON CONFLICT DO NOTHING for either dialect."""
        dialect_insert = postgresql.insert if self.dialect == "postgresql" else sqlite.insert
        return dialect_insert(table).values(**values).on_conflict_do_nothing()

    # ------------------------------------------------------------------ API keys

    def insert_api_key(self, row: dict[str, Any]) -> None:
        with self.write() as connection:
            connection.execute(insert(api_keys).values(**row))

    def api_key_by_hash(self, key_hash: str) -> dict[str, Any] | None:
        with self.read() as connection:
            row = connection.execute(_KEY_BY_HASH, {"key_hash": key_hash}).mappings().first()
        return dict(row) if row else None

    def api_key(self, key_id: str) -> dict[str, Any] | None:
        with self.read() as connection:
            row = connection.execute(
                select(api_keys).where(api_keys.c.key_id == key_id)
            ).mappings().first()
        return dict(row) if row else None

    def list_api_keys(self) -> list[dict[str, Any]]:
        with self.read() as connection:
            rows = connection.execute(select(api_keys).order_by(api_keys.c.created_at)).mappings()
            return [dict(row) for row in rows]

    def set_api_key_status(self, key_id: str, status: str, at: str) -> bool:
        with self.write() as connection:
            result = connection.execute(
                update(api_keys)
                .where(api_keys.c.key_id == key_id)
                .values(status=status, disabled_at=at if status == "disabled" else None)
            )
        return result.rowcount == 1

    def set_api_key_grant(self, key_id: str, permissions: str | None, holder: str | None) -> bool:
        """A key's permissions and holder (gate.services.keys widens a key through here only when
        it acts on no production right; one that does is written with its grant event)."""
        with self.write() as connection:
            result = connection.execute(update(api_keys).where(api_keys.c.key_id == key_id)
                                        .values(permissions=permissions, holder=holder))
        return result.rowcount == 1

    def monthly_usage(self, key_id: str, period: str) -> int:
        with self.read() as connection:
            used = connection.execute(
                select(usage_counters.c.used).where(
                    and_(usage_counters.c.key_id == key_id, usage_counters.c.period == period)
                )
            ).scalar()
        return int(used or 0)

    # ------------------------------------------------------------------ rulebook snapshots

    def rulebook_snapshot(
        self, scope: str, *, rulebook_id: str | None = None, version: str | None = None,
        rulebook_hash: str | None = None,
    ) -> StoredSnapshot | None:
        """The scope's snapshot by (id, version) or by hash (first registered), or None."""
        query = select(rulebook_snapshots).where(rulebook_snapshots.c.scope == scope)
        if rulebook_hash is not None:
            query = query.where(rulebook_snapshots.c.rulebook_hash == rulebook_hash)
        else:
            query = query.where(
                and_(
                    rulebook_snapshots.c.rulebook_id == rulebook_id,
                    rulebook_snapshots.c.version == version,
                )
            )
        query = query.order_by(rulebook_snapshots.c.snapshot_id).limit(1)
        with self.read() as connection:
            row = connection.execute(query).mappings().first()
        return _snapshot(row) if row else None

    def latest_rulebook_snapshot(self, scope: str, rulebook_id: str) -> StoredSnapshot | None:
        """The scope's newest registered snapshot of `rulebook_id` (its current version), or None."""
        query = (select(rulebook_snapshots)
                 .where(and_(rulebook_snapshots.c.scope == scope,
                             rulebook_snapshots.c.rulebook_id == rulebook_id))
                 .order_by(rulebook_snapshots.c.registered_at.desc(),
                           rulebook_snapshots.c.snapshot_id.desc())
                 .limit(1))
        with self.read() as connection:
            row = connection.execute(query).mappings().first()
        return _snapshot(row) if row else None

    def rulebook_ids(self, scope: str) -> list[str]:
        """The rulebook ids registered in `scope`, sorted."""
        query = (select(rulebook_snapshots.c.rulebook_id).where(rulebook_snapshots.c.scope == scope)
                 .distinct().order_by(rulebook_snapshots.c.rulebook_id))
        with self.read() as connection:
            return [row[0] for row in connection.execute(query)]

    def rulebook_versions(self, scope: str, rulebook_id: str) -> list[str]:
        """The versions of `rulebook_id` published (registered) in `scope`, newest first."""
        query = (select(rulebook_snapshots.c.version)
                 .where(and_(rulebook_snapshots.c.scope == scope, rulebook_snapshots.c.rulebook_id == rulebook_id))
                 .order_by(rulebook_snapshots.c.registered_at.desc(), rulebook_snapshots.c.snapshot_id.desc()))
        with self.read() as connection:
            return list(dict.fromkeys(row[0] for row in connection.execute(query)))

    def register_snapshot(self, snapshot: SnapshotRow) -> bool:
        """Bind a snapshot outside a decide (a promoted draft). True when newly bound, False when
        the same hash was already bound; another hash under the same version raises
        `RulebookVersionConflict` and binds nothing."""
        with self.write() as connection:
            existing = connection.execute(
                select(rulebook_snapshots.c.rulebook_hash).where(and_(
                    rulebook_snapshots.c.scope == snapshot["scope"],
                    rulebook_snapshots.c.rulebook_id == snapshot["rulebook_id"],
                    rulebook_snapshots.c.version == snapshot["version"]))
            ).scalar()
            if existing == snapshot["rulebook_hash"]:
                return False
            self._bind_snapshot(connection, snapshot)
            append_event(connection, snapshot["scope"], "rulebook.published", snapshot["rulebook_id"],
                         snapshot["registered_at"], {"rulebook_id": snapshot["rulebook_id"],
                                                  "version": snapshot["version"],
                                                  "rulebook_hash": snapshot["rulebook_hash"]})
        return True

    # ------------------------------------------------------------------ decisions

    def decision(self, scope: str, decision_id: str) -> StoredDecision | None:
        """The decision if it belongs to `scope` (another scope's decision reads as absent)."""
        with self.read() as connection:
            row = connection.execute(
                select(decisions).where(
                    and_(decisions.c.decision_id == decision_id, decisions.c.scope == scope)
                )
            ).mappings().first()
        return _stored(row)

    def decision_by_idempotency(self, scope: str, idempotency_key: str) -> StoredDecision | None:
        with self.read() as connection:
            row = connection.execute(
                select(decisions).where(
                    and_(
                        decisions.c.scope == scope,
                        decisions.c.idempotency_key == idempotency_key,
                    )
                )
            ).mappings().first()
        return _stored(row)

    def bundle_hash_known(self, policy_bundle_hash: str) -> dict[str, Any] | None:
        """First decision that carries this policy bundle hash (any scope; hashes only).

        The indexed column only finds candidates: every value returned is read from the stored
        record itself, and a row whose record does not carry this bundle hash is skipped
        (SECURITY: an edited column can neither invent a bundle nor relabel one). At most
        `BUNDLE_CANDIDATES` rows are read."""
        with self.read() as connection:
            rows = connection.execute(
                select(decisions.c.record_json)
                .where(decisions.c.policy_bundle_hash == policy_bundle_hash)
                .order_by(decisions.c.created_at)
                .limit(BUNDLE_CANDIDATES)
            ).all()
        found = []
        for (record_json,) in rows:
            try:
                record = json.loads(record_json)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("policy_bundle_hash") == policy_bundle_hash \
                    and isinstance(record.get("created_at"), str):
                found.append({"policy_bundle_hash": policy_bundle_hash, "policy_id": record.get("policy_id"),
                              "policy_version": record.get("policy_version"),
                              "rulebook_hash": record.get("policy_hash"), "created_at": record["created_at"]})
        return min(found, key=lambda known: known["created_at"]) if found else None

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

        if self.group is not None:  # one writer thread, many decisions per transaction
            return self.group.submit(store, refusal)
        try:
            with self.write() as connection:
                return store(connection)
        except IntegrityError as exc:
            raise refusal(exc) from exc

    def _store_one(self, connection: Connection, row: SealedDecisionRow, snapshot: SnapshotRow | None,
                   charge: CapCharge | None, chain: ChainAppend | None, extra: Sequence[DecisionExtra]) -> Written:
        """One decision's statements inside a write transaction (see `store_decision`)."""
        prepared = chain.prepare(self._batch_counts(connection, chain.confidence)) if chain else None
        # The chain head lock comes first: every writer of a scope takes the same lock
        # in the same order, so snapshot and usage rows can never deadlock.
        head = self._lock_chain_head(connection, chain) if chain else None
        if snapshot is not None:
            self._bind_snapshot(connection, snapshot)
        for item in extra:  # rows that live or die with the decision (its release row, its hold)
            for table, values in item.rows():
                columns = tuple(values)
                self._insert(connection, ("extra", table.name, columns), insert(table), values, columns)
        if (chain is not None and head is not None and charge is not None and self.dialect == "postgresql"
                and BATCH_MEMO not in connection.info):  # a decide stored alone: one round trip
            sealed = chain.seal(head, prepared)
            used = self._append_store_charge_pg(connection, chain, sealed, charge)
            for item in extra:  # outbox events: after the record is sealed
                item.after_seal(connection, sealed.record)
            return Written(used, sealed.record)
        record = None
        if chain is not None and head is not None:
            sealed = chain.seal(head, prepared)
            self._append_link(connection, chain, sealed)
            row, record = sealed.row, sealed.record
        self._insert(connection, ("decision", *row), _INSERT_DECISION, row, tuple(row))
        for item in extra:  # outbox events: after the record is sealed
            item.after_seal(connection, record)
        return Written(self._charge(connection, charge) if charge else None, record)

    def _batch_counts(self, connection: Connection, bucket: Bucket | None) -> ConfidenceCounts | None:
        """The confidence counts of `bucket`, before any lock: one indexed read by key prefix,
        once per batch (None without a bucket)."""
        if bucket is None:
            return None
        memo = connection.info.get(BATCH_MEMO)
        rows = memo.get(("counts", bucket)) if memo is not None else None
        if rows is None:
            rows = self._counts_rows(connection, bucket)
            if memo is not None:
                memo["counts", bucket] = rows
        return counts_from_rows(bucket, rows)

    def _insert(self, connection: Connection, key: Any, statement: Any, row: Mapping[str, Any],
                column_keys: tuple[str, ...] | None = None) -> None:
        """Insert `row` now, or, in a batch run all at once, with the batch's other rows of the
        same statement in one multi-row INSERT before the commit (`BATCH_FLUSH`). A constraint a
        deferred row violates then fails that INSERT, and the batch is run again member by
        member, each row in its member's SAVEPOINT (`gate.ledger.groupcommit`)."""
        prepared = self._hot(key, statement, column_keys)
        if BATCH_MEMO in connection.info:
            defer_row(connection, key, prepared, row)
        else:
            prepared.run(connection, row)

    def confidence_counts(self, bucket: Bucket) -> ConfidenceCounts | None:
        """The confidence counts of `bucket` as stored now; None before its scope's first outcome."""
        with self.read() as connection:
            return counts_from_rows(bucket, self._counts_rows(connection, bucket))

    def _counts_rows(self, connection: Connection, bucket: Bucket) -> list[dict[str, Any]]:
        return self._hot("counts", COUNTS_QUERY).run(connection, counts_params(bucket))

    def _hot(self, key: Any, statement: Any, column_keys: tuple[str, ...] | None = None) -> Prepared:
        """A decide-path statement compiled once for this ledger (`gate.ledger.prepared`)."""
        prepared = self._prepared.get(key)
        if prepared is None:
            prepared = self._prepared[key] = Prepared(statement, self.engine.dialect, column_keys)
        return prepared

    def _lock_chain_head(self, connection: Connection, chain: ChainAppend) -> ChainHead:
        memo = connection.info.get(BATCH_MEMO)
        if memo is not None and ("head", chain.chain_id) in memo:  # locked by an earlier member of this batch
            head: ChainHead = memo["head", chain.chain_id]
            return head
        head_for_update = self._hot("head", _HEAD_FOR_UPDATE)
        asked = time.perf_counter()
        row = head_for_update.first(connection, {"chain_id": chain.chain_id})
        if self.dialect == "postgresql":  # the row lock another transaction may hold (SQLite's is the file's)
            waits.waited(waits.CHAIN_HEAD, time.perf_counter() - asked)
        if row is None:  # a new chain: create its head (a concurrent creator may win), then lock it
            connection.execute(self.insert_ignore(chain_heads, {
                "chain_id": chain.chain_id, "scope": chain.scope, "size": 0, "head_link_hash": None,
                "merkle_root": None, "tree_peaks": "[]", "updated_at": "",
            }))
            row = head_for_update.first(connection, {"chain_id": chain.chain_id})
            if row is None:  # pragma: no cover - the head was just created (by this writer or another)
                raise LedgerUnavailable("the chain head could not be locked")
        return ChainHead(row["chain_id"], row["size"], row["head_link_hash"], row["merkle_root"],
                         tuple(json.loads(row["tree_peaks"])))

    def _append_link(self, connection: Connection, chain: ChainAppend, sealed: SealedDecision) -> None:
        link, nodes, peaks = sealed.link, sealed.nodes, sealed.peaks
        self._insert(connection, "link", _INSERT_LINK, {
            "chain_id": chain.chain_id, "chain_position": link["chain_position"],
            "decision_id": link["decision_id"], "leaf_hash": link["leaf_hash"],
            "link_hash": link["link_hash"], "link_json": json.dumps(link, separators=(",", ":")),
        })
        for level, idx, digest in nodes:
            self._insert(connection, "nodes", _INSERT_NODES,
                         {"chain_id": chain.chain_id, "level": level, "idx": idx, "hash": digest})
        new_head = {"head_chain_id": chain.chain_id, "size": link["chain_position"],
                    "head_link_hash": link["link_hash"], "merkle_root": link["merkle_root"],
                    "tree_peaks": json.dumps(list(peaks)), "updated_at": link["created_at"]}
        update_head = self._hot("update-head", _UPDATE_HEAD)
        if not _carry_head(connection, chain, link, peaks):
            update_head.run(connection, new_head)
        else:  # the batch's last member's head is the one written (`BATCH_FLUSH`)
            defer(connection, ("head", chain.chain_id), lambda connection: update_head.run(connection, new_head))

    def _append_store_charge_pg(self, connection: Connection, chain: ChainAppend, sealed: SealedDecision,
                                charge: CapCharge) -> int:
        """PostgreSQL, a decide stored in a transaction of its own (group commit off, or a
        member rerun in its SAVEPOINT): link, Merkle nodes, head, decision and usage charge in
        ONE statement (data-modifying CTEs), so the locked section makes one round trip instead
        of five. The semantics are those of the separate statements: any violation aborts the
        transaction, and no returned row means the cap refused the charge. A batch run all at
        once defers these rows to its multi-row INSERTs instead (`_insert`, `BATCH_FLUSH`)."""
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
        returned = self._hot(("pg-append", *shape), _pg_append_statement(*shape)).run(connection, params)
        used = returned[0]["used"] if returned else None
        if used is None:
            raise charge.refusal()
        _carry_head(connection, chain, link, peaks)
        return int(used)

    # ------------------------------------------------------------------ chain reads

    def chain_head(self, chain_id: str) -> dict[str, Any] | None:
        with self.read() as connection:
            row = connection.execute(
                select(chain_heads).where(chain_heads.c.chain_id == chain_id)
            ).mappings().first()
        return dict(row) if row else None

    def chain_links_window(self, chain_id: str, first: int, last: int) -> list[dict[str, Any]]:
        """Stored links with positions first..last (ascending), as stored JSON plus row columns."""
        with self.read() as connection:
            rows = connection.execute(
                select(chain_links)
                .where(and_(chain_links.c.chain_id == chain_id,
                            chain_links.c.chain_position >= first,
                            chain_links.c.chain_position <= last))
                .order_by(chain_links.c.chain_position)
            ).mappings().all()
        return [dict(row) for row in rows]

    def chain_last_link(self, chain_id: str) -> dict[str, Any] | None:
        """The stored link with the greatest position in the chain (whatever the head row says),
        or None for a chain without links: what a head must name (`gate.chain.links.chain_head_failures`)."""
        with self.read() as connection:
            row = connection.execute(
                select(chain_links).where(chain_links.c.chain_id == chain_id)
                .order_by(chain_links.c.chain_position.desc()).limit(1)
            ).mappings().first()
        return dict(row) if row else None

    def chain_link_for(self, decision_id: str) -> dict[str, Any] | None:
        with self.read() as connection:
            row = connection.execute(
                select(chain_links).where(chain_links.c.decision_id == decision_id)
            ).mappings().first()
        return dict(row) if row else None

    def merkle_nodes(self, chain_id: str, refs: list[tuple[int, int]]) -> dict[tuple[int, int], str]:
        """The stored subtree hashes for `refs`, in one read transaction of bounded queries.

        A query names at most `NODE_REFS_PER_QUERY` refs, grouped by tree level: one
        `level = ? AND idx IN (...)` term per level (a tree has at most 64), so the statement's
        shape depends only on how many levels it names and is built and compiled once per
        count (`_nodes_query`). One condition per ref made SQLite refuse a chain view of 1,000
        links ("Expression tree is too large", a 503); and building that expression anew for
        every read cost about a sixth of a cadence checkpoint's CPU."""
        if not refs:
            return {}
        found: dict[tuple[int, int], str] = {}
        with self.read() as connection:
            for start in range(0, len(refs), NODE_REFS_PER_QUERY):
                by_level: dict[int, list[int]] = {}
                for level, idx in refs[start:start + NODE_REFS_PER_QUERY]:
                    by_level.setdefault(level, []).append(idx)
                params: dict[str, str | int | list[int]] = {"chain_id": chain_id}
                for number, (level, indexes) in enumerate(by_level.items()):
                    params[f"level_{number}"], params[f"idx_{number}"] = level, indexes
                rows = connection.execute(self._nodes_query(len(by_level)), params).all()
                found.update(((row.level, row.idx), row.hash) for row in rows)
        return found

    def _nodes_query(self, levels: int) -> Executable:
        """The node read naming `levels` tree levels, each with its list of indexes: one arm per
        level, `UNION ALL`, each a search of the primary key on (chain_id, level, idx). One `OR`
        of the levels' terms made SQLite search on `chain_id` alone, reading every node of the
        chain: 13.7 ms a read at 100,000 links, and decide's CPU grew with the chain."""
        query = self._node_queries.get(levels)
        if query is None:
            arms = [select(merkle_nodes.c.level, merkle_nodes.c.idx, merkle_nodes.c.hash).where(
                        merkle_nodes.c.chain_id == bindparam("chain_id"),
                        merkle_nodes.c.level == bindparam(f"level_{number}"),
                        merkle_nodes.c.idx.in_(bindparam(f"idx_{number}", expanding=True)))
                    for number in range(levels)]
            query = self._node_queries[levels] = arms[0] if levels == 1 else union_all(*arms)
        return query

    def decision_hashes(self, decision_ids: Sequence[str | None]) -> dict[str | None, dict[str, Any]]:
        """scope, record_hash, receipt_hash and the stored record JSON of the given decisions."""
        if not decision_ids:
            return {}
        with self.read() as connection:
            rows = connection.execute(
                select(decisions.c.decision_id, decisions.c.scope, decisions.c.record_hash,
                       decisions.c.receipt_hash, decisions.c.record_json)
                .where(decisions.c.decision_id.in_(decision_ids))
            ).mappings().all()
        return {row["decision_id"]: dict(row) for row in rows}

    def checkpoint(self, chain_id: str, tree_size: int) -> str | None:
        with self.read() as connection:
            stored: str | None = connection.execute(
                select(chain_checkpoints.c.checkpoint_json).where(and_(
                    chain_checkpoints.c.chain_id == chain_id, chain_checkpoints.c.tree_size == tree_size))
            ).scalar()
            return stored

    def store_checkpoint(self, chain_id: str, tree_size: int, checkpoint_json: str) -> str:
        """Keep the first checkpoint stored for (chain, size); returns the one that is stored."""
        with self.write() as connection:
            # RETURNING names the row only when this writer inserted it (the driver's rowcount is
            # -1 for an upsert on PostgreSQL's raw cursor, so it cannot say).
            inserted = connection.execute(self.insert_ignore(chain_checkpoints, {
                "chain_id": chain_id, "tree_size": tree_size, "checkpoint_json": checkpoint_json})
                .returning(chain_checkpoints.c.tree_size)).scalar()
            scope = connection.execute(select(chain_heads.c.scope).where(chain_heads.c.chain_id == chain_id)).scalar()
            if inserted is not None and scope is not None:  # announced once, by its first writer (docs/events.md)
                made = json.loads(checkpoint_json)
                append_event(connection, scope, "checkpoint.saved", chain_id, str(made["created_at"]),
                             {member: made.get(member) for member in (
                                 "chain_id", "tree_size", "root_hash", "checkpoint_hash", "created_at")})
            stored: str = connection.execute(
                select(chain_checkpoints.c.checkpoint_json).where(and_(
                    chain_checkpoints.c.chain_id == chain_id, chain_checkpoints.c.tree_size == tree_size))
            ).scalar_one()  # the row exists: inserted now, or kept from the first writer
            return stored

    # ------------------------------------------------------------------ snapshots (write side)

    def _bind_snapshot(self, connection: Connection, snapshot: SnapshotRow) -> None:
        connection.execute(self.insert_ignore(rulebook_snapshots, snapshot))
        stored = connection.execute(
            select(rulebook_snapshots.c.rulebook_hash, rulebook_snapshots.c.registry_json).where(
                and_(
                    rulebook_snapshots.c.scope == snapshot["scope"],
                    rulebook_snapshots.c.rulebook_id == snapshot["rulebook_id"],
                    rulebook_snapshots.c.version == snapshot["version"],
                )
            )
        ).first()
        if stored is None:  # pragma: no cover - the row exists: inserted now, or by the first writer
            raise LedgerUnavailable("the rulebook snapshot could not be read back")
        if stored.rulebook_hash != snapshot["rulebook_hash"]:
            raise RulebookVersionConflict(
                snapshot["rulebook_id"], snapshot["version"], stored.rulebook_hash,
                snapshot["rulebook_hash"],
            )
        if stored.registry_json != snapshot["registry_json"]:
            raise SnapshotRace(snapshot["rulebook_id"])

    def _charge(self, connection: Connection, charge: CapCharge) -> int:
        """One atomic upsert: create the month's counter at 1, or add 1 while below the cap.
        In a batch run all at once only the key's first member runs it (the counter's row is
        then this transaction's until the commit); the others count on from its answer, under the
        same rule, and the batch writes the last count once (`BATCH_FLUSH`)."""
        memo = connection.info.get(BATCH_MEMO)
        counted: list[int] | None = memo.get(("used", charge.key_id, charge.period)) if memo is not None else None
        if counted is not None:
            if counted[0] >= charge.cap:
                raise charge.refusal()
            counted[0] += 1
            set_used = self._hot("set-used", _SET_USED)
            values = {"counter_key_id": charge.key_id, "counter_period": charge.period, "counter_used": counted[0]}
            defer(connection, ("used", charge.key_id, charge.period),
                   lambda connection: set_used.run(connection, values))
            return counted[0]
        answer = self._hot("charge", self._charge_statement()).first(
            connection, {"key_id": charge.key_id, "period": charge.period, "cap": charge.cap})
        used = answer["used"] if answer is not None else None
        if used is None:
            raise charge.refusal()
        if memo is not None:
            memo["used", charge.key_id, charge.period] = [int(used)]
        return int(used)

    def _charge_statement(self) -> ReturningInsert[Any]:
        if self._charge_sql is None:
            dialect_insert = postgresql.insert if self.dialect == "postgresql" else sqlite.insert
            statement = dialect_insert(usage_counters).values(
                key_id=bindparam("key_id"), period=bindparam("period"), used=1
            )
            self._charge_sql = statement.on_conflict_do_update(
                index_elements=[usage_counters.c.key_id, usage_counters.c.period],
                set_={"used": usage_counters.c.used + 1},
                where=usage_counters.c.used < bindparam("cap"),
            ).returning(usage_counters.c.used)
        return self._charge_sql


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


def _stored(row: RowMapping | None) -> StoredDecision | None:
    if row is None:
        return None
    return StoredDecision(
        decision_id=row["decision_id"],
        scope=row["scope"],
        idempotency_key=row["idempotency_key"],
        input_hash=row["input_hash"],
        record_hash=row["record_hash"],
        receipt_hash=row["receipt_hash"],
        created_at=row["created_at"],
        record_json=row["record_json"],
        request_json=row["request_json"],
        columns={name: row[name] for name in row if name not in ("record_json", "request_json")},
    )


def _is_idempotency_violation(exc: IntegrityError) -> bool:
    message = str(exc.orig).lower()
    return "idempotency_key" in message or "uq_decisions_scope_idempotency_key" in message
