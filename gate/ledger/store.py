"""The ledger repository: every read and write of stored state goes through `Ledger`.

`Ledger` is its connection (`gate.ledger.connection`: engine, transactions, upgrade) and one part
per aggregate, each a module of its own that changes with its tables: API keys and their usage
(`gate.ledger.api_keys`), rulebook snapshots (`gate.ledger.snapshots`), audit chains and
checkpoints (`gate.ledger.chains`), decision reads (`gate.ledger.records`) and the decide's
one-transaction write (`gate.ledger.decision_write`). Holds, releases and the outbox are parts
over a `Ledger` in the same way (`HoldLedger`, `ReleaseLedger`, `Outbox`). The methods below are
the parts' public face, so a caller holds one `Ledger`; what they guarantee is said where they
are written.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.engine import Engine

from gate.chain.rowseal import SealedDecisionRow
from gate.ledger.api_keys import ApiKeyLedger, ApiKeyRow, CapCharge
from gate.ledger.chains import ChainAppend, ChainHead, ChainHeadRow, ChainLedger, ChainLinkRow, SealedDecision
from gate.ledger.confidence import Bucket
from gate.ledger.connection import MIGRATIONS_DIR, LedgerConnection
from gate.ledger.decision_write import DecisionExtra, DecisionWriter, Written
from gate.ledger.records import DecisionHashes, RecordLedger, StoredDecision
from gate.ledger.snapshots import SnapshotLedger, SnapshotRow, StoredSnapshot
from gate.protocol.confidence import ConfidenceCounts
from gate.strict_json import JsonValue

__all__ = ["MIGRATIONS_DIR", "ApiKeyRow", "CapCharge", "ChainAppend", "ChainHead", "ChainHeadRow", "DecisionExtra", "Ledger", "SealedDecision",
           "SnapshotRow", "StoredDecision", "StoredSnapshot", "Written"]


class Ledger(LedgerConnection):
    """Repository over an SQLAlchemy engine (SQLite file or PostgreSQL): the connection and its
    parts (`keys`, `snapshots`, `chains`, `records`, `writer`)."""

    def __init__(self, url: str, *, pool_size: int = 5, engine: Engine | None = None,
                 group_commit: bool | None = None) -> None:
        super().__init__(url, pool_size=pool_size, engine=engine, group_commit=group_commit)
        self.keys = ApiKeyLedger(self)
        self.snapshots = SnapshotLedger(self)
        self.chains = ChainLedger(self)
        self.records = RecordLedger(self)
        self.writer = DecisionWriter(self, records=self.records, chains=self.chains, snapshots=self.snapshots,
                                     keys=self.keys)

    # ------------------------------------------------------------------ API keys (gate.ledger.api_keys)

    def insert_api_key(self, row: ApiKeyRow) -> None:
        self.keys.insert_api_key(row)

    def api_key_by_hash(self, key_hash: str) -> ApiKeyRow | None:
        return self.keys.api_key_by_hash(key_hash)

    def api_key(self, key_id: str) -> ApiKeyRow | None:
        return self.keys.api_key(key_id)

    def list_api_keys(self) -> list[ApiKeyRow]:
        return self.keys.list_api_keys()

    def set_api_key_status(self, key_id: str, status: str, at: str) -> bool:
        return self.keys.set_api_key_status(key_id, status, at)

    def set_api_key_grant(self, key_id: str, permissions: str | None, holder: str | None) -> bool:
        return self.keys.set_api_key_grant(key_id, permissions, holder)

    def monthly_usage(self, key_id: str, period: str) -> int:
        return self.keys.monthly_usage(key_id, period)

    # ------------------------------------------------------------------ rulebook snapshots (gate.ledger.snapshots)

    def rulebook_snapshot(self, scope: str, *, rulebook_id: str | None = None, version: str | None = None,
                          rulebook_hash: str | None = None) -> StoredSnapshot | None:
        return self.snapshots.rulebook_snapshot(scope, rulebook_id=rulebook_id, version=version,
                                                rulebook_hash=rulebook_hash)

    def latest_rulebook_snapshot(self, scope: str, rulebook_id: str) -> StoredSnapshot | None:
        return self.snapshots.latest_rulebook_snapshot(scope, rulebook_id)

    def rulebook_ids(self, scope: str) -> list[str]:
        return self.snapshots.rulebook_ids(scope)

    def rulebook_versions(self, scope: str, rulebook_id: str) -> list[str]:
        return self.snapshots.rulebook_versions(scope, rulebook_id)

    def register_snapshot(self, snapshot: SnapshotRow) -> bool:
        return self.snapshots.register_snapshot(snapshot)

    # ------------------------------------------------------------------ decisions (gate.ledger.records, decision_write)

    def decision(self, scope: str, decision_id: str) -> StoredDecision | None:
        return self.records.decision(scope, decision_id)

    def decision_by_idempotency(self, scope: str, idempotency_key: str) -> StoredDecision | None:
        return self.records.decision_by_idempotency(scope, idempotency_key)

    def bundle_hash_known(self, policy_bundle_hash: str) -> dict[str, JsonValue] | None:
        return self.records.bundle_hash_known(policy_bundle_hash)

    def decision_hashes(self, decision_ids: Sequence[str | None]) -> dict[str | None, DecisionHashes]:
        return self.records.decision_hashes(decision_ids)

    def confidence_counts(self, bucket: Bucket) -> ConfidenceCounts | None:
        return self.records.confidence_counts(bucket)

    def store_decision(self, row: SealedDecisionRow, *, snapshot: SnapshotRow | None, charge: CapCharge | None,
                       chain: ChainAppend | None = None, extra: Sequence[DecisionExtra] = ()) -> Written:
        return self.writer.store_decision(row, snapshot=snapshot, charge=charge, chain=chain, extra=extra)

    # ------------------------------------------------------------------ chains (gate.ledger.chains)

    def chain_head(self, chain_id: str) -> ChainHeadRow | None:
        return self.chains.chain_head(chain_id)

    def chain_links_window(self, chain_id: str, first: int, last: int) -> list[ChainLinkRow]:
        return self.chains.chain_links_window(chain_id, first, last)

    def chain_last_link(self, chain_id: str) -> ChainLinkRow | None:
        return self.chains.chain_last_link(chain_id)

    def chain_link_for(self, decision_id: str) -> ChainLinkRow | None:
        return self.chains.chain_link_for(decision_id)

    def merkle_nodes(self, chain_id: str, refs: list[tuple[int, int]]) -> dict[tuple[int, int], str]:
        return self.chains.merkle_nodes(chain_id, refs)

    def checkpoint(self, chain_id: str, tree_size: int) -> str | None:
        return self.chains.checkpoint(chain_id, tree_size)

    def store_checkpoint(self, chain_id: str, tree_size: int, checkpoint_json: str) -> str:
        return self.chains.store_checkpoint(chain_id, tree_size, checkpoint_json)
