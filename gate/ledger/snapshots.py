"""Ledger reads and writes of rulebook snapshots (table `rulebook_snapshots`): the rulebook a
decision was made under, bound on its first use (in the decide's own transaction,
`gate.ledger.decision_write`) or when a draft is promoted (`register_snapshot`).

Guarantees: a (scope, rulebook id, version) is bound to one rulebook hash for good; another hash
under the same version is refused (`RulebookVersionConflict`) and a racing bind of the same hash
with another registry entry is refused (`SnapshotRace`), binding nothing.
"""

from __future__ import annotations

from sqlalchemy import RowMapping, and_, select
from sqlalchemy.engine import Connection

from gate.errors import LedgerUnavailable, RulebookVersionConflict, SnapshotRace
from gate.ledger.connection import LedgerConnection
from gate.ledger.outbox_write import append_event
from gate.ledger.tables import rulebook_snapshots
from gate.protocol.types import SnapshotLineage


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


class SnapshotLedger:
    """The snapshot table over one `LedgerConnection`."""

    def __init__(self, ledger: LedgerConnection) -> None:
        self.ledger = ledger

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
        with self.ledger.read() as connection:
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
        with self.ledger.read() as connection:
            row = connection.execute(query).mappings().first()
        return _snapshot(row) if row else None

    def rulebook_ids(self, scope: str) -> list[str]:
        """The rulebook ids registered in `scope`, sorted."""
        query = (select(rulebook_snapshots.c.rulebook_id).where(rulebook_snapshots.c.scope == scope)
                 .distinct().order_by(rulebook_snapshots.c.rulebook_id))
        with self.ledger.read() as connection:
            return [row[0] for row in connection.execute(query)]

    def rulebook_versions(self, scope: str, rulebook_id: str) -> list[str]:
        """The versions of `rulebook_id` published (registered) in `scope`, newest first."""
        query = (select(rulebook_snapshots.c.version)
                 .where(and_(rulebook_snapshots.c.scope == scope, rulebook_snapshots.c.rulebook_id == rulebook_id))
                 .order_by(rulebook_snapshots.c.registered_at.desc(), rulebook_snapshots.c.snapshot_id.desc()))
        with self.ledger.read() as connection:
            return list(dict.fromkeys(row[0] for row in connection.execute(query)))

    def register_snapshot(self, snapshot: SnapshotRow) -> bool:
        """Bind a snapshot outside a decide (a promoted draft). True when newly bound, False when
        the same hash was already bound; another hash under the same version raises
        `RulebookVersionConflict` and binds nothing."""
        with self.ledger.write() as connection:
            existing = connection.execute(
                select(rulebook_snapshots.c.rulebook_hash).where(and_(
                    rulebook_snapshots.c.scope == snapshot["scope"],
                    rulebook_snapshots.c.rulebook_id == snapshot["rulebook_id"],
                    rulebook_snapshots.c.version == snapshot["version"]))
            ).scalar()
            if existing == snapshot["rulebook_hash"]:
                return False
            self.bind(connection, snapshot)
            append_event(connection, snapshot["scope"], "rulebook.published", snapshot["rulebook_id"],
                         snapshot["registered_at"], {"rulebook_id": snapshot["rulebook_id"],
                                                  "version": snapshot["version"],
                                                  "rulebook_hash": snapshot["rulebook_hash"]})
        return True

    def bind(self, connection: Connection, snapshot: SnapshotRow) -> None:
        """Bind `snapshot` in the caller's write transaction, or find it bound by the first
        writer; refuses another hash or another registry entry under its version."""
        connection.execute(self.ledger.insert_ignore(rulebook_snapshots, snapshot))
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
