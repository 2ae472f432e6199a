"""Ledger reads and writes of the decisions' audit chains (tables `chain_heads`, `chain_links`,
`merkle_nodes`, `chain_checkpoints`).

A decision's link, the tree nodes it completes and its chain's new head are written in the
decision's own transaction (`gate.ledger.decision_write`), under the head's row lock: every
writer of a chain takes it first, so positions never fork. Checkpoints are kept first-writer-wins
per (chain, size) and announced once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, cast

from sqlalchemy import and_, bindparam, insert, select, union_all, update
from sqlalchemy.engine import Connection, RowMapping
from sqlalchemy.sql.expression import Executable

from gate.chain.links import ChainLink
from gate.chain.rowseal import SealedDecisionRow
from gate.errors import LedgerUnavailable
from gate.ledger import waits
from gate.ledger.confidence import Bucket
from gate.ledger.connection import LedgerConnection
from gate.ledger.groupcommit import BATCH_MEMO, defer
from gate.ledger.outbox_write import append_event
from gate.ledger.tables import chain_checkpoints, chain_heads, chain_links, merkle_nodes
from gate.protocol.confidence import ConfidenceCounts
from gate.protocol.decision_record import DecisionRecord

# Hot-path statements, built once (executed with parameter dicts).
_HEAD_FOR_UPDATE = select(chain_heads).where(chain_heads.c.chain_id == bindparam("chain_id")).with_for_update()
_INSERT_LINK = insert(chain_links)
_INSERT_NODES = insert(merkle_nodes)
_UPDATE_HEAD = update(chain_heads).where(chain_heads.c.chain_id == bindparam("head_chain_id")).values(
    size=bindparam("size"), head_link_hash=bindparam("head_link_hash"), merkle_root=bindparam("merkle_root"),
    tree_peaks=bindparam("tree_peaks"), updated_at=bindparam("updated_at"))

# SQLite refuses an expression tree deeper than 1,000; an OR of N conditions is N deep.
NODE_REFS_PER_QUERY = 400


class ChainLinkRow(TypedDict):
    """A `chain_links` row: the link's place and keys as columns, the link itself as stored text."""

    chain_id: str
    chain_position: int
    decision_id: str
    leaf_hash: str
    link_hash: str
    link_json: str


class ChainHeadRow(TypedDict):
    """A `chain_heads` row: a chain's size, head link, Merkle root and peaks (JSON text)."""

    chain_id: str
    scope: str
    size: int
    head_link_hash: str | None
    merkle_root: str | None
    tree_peaks: str
    updated_at: str


def _link_row(row: RowMapping) -> ChainLinkRow:
    return cast(ChainLinkRow, dict(row))  # select(chain_links): exactly its columns


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


def carry_head(connection: Connection, chain: ChainAppend, link: ChainLink, peaks: Sequence[str]) -> bool:
    """In a batch run all at once (`gate.ledger.groupcommit`), the head this member's link leaves
    is the next member's: the row stays locked to this transaction until it commits. False
    outside such a batch."""
    memo = connection.info.get(BATCH_MEMO)
    if memo is None:
        return False
    memo["head", chain.chain_id] = ChainHead(chain.chain_id, link["chain_position"], link["link_hash"],
                                             link["merkle_root"], tuple(peaks))
    return True


class ChainLedger:
    """The chain tables over one `LedgerConnection`."""

    def __init__(self, ledger: LedgerConnection) -> None:
        self.ledger = ledger
        self._node_queries: dict[int, Executable] = {}  # `merkle_nodes` by how many levels it names

    # ------------------------------------------------------------------ reads

    def chain_head(self, chain_id: str) -> ChainHeadRow | None:
        with self.ledger.read() as connection:
            row = connection.execute(
                select(chain_heads).where(chain_heads.c.chain_id == chain_id)
            ).mappings().first()
        return cast(ChainHeadRow, dict(row)) if row else None  # select(chain_heads): exactly its columns

    def chain_links_window(self, chain_id: str, first: int, last: int) -> list[ChainLinkRow]:
        """Stored links with positions first..last (ascending), as stored JSON plus row columns."""
        with self.ledger.read() as connection:
            rows = connection.execute(
                select(chain_links)
                .where(and_(chain_links.c.chain_id == chain_id,
                            chain_links.c.chain_position >= first,
                            chain_links.c.chain_position <= last))
                .order_by(chain_links.c.chain_position)
            ).mappings().all()
        return [_link_row(row) for row in rows]

    def chain_last_link(self, chain_id: str) -> ChainLinkRow | None:
        """The stored link with the greatest position in the chain (whatever the head row says),
        or None for a chain without links: what a head must name (`gate.chain.links.chain_head_failures`)."""
        with self.ledger.read() as connection:
            row = connection.execute(
                select(chain_links).where(chain_links.c.chain_id == chain_id)
                .order_by(chain_links.c.chain_position.desc()).limit(1)
            ).mappings().first()
        return _link_row(row) if row else None

    def chain_link_for(self, decision_id: str) -> ChainLinkRow | None:
        with self.ledger.read() as connection:
            row = connection.execute(
                select(chain_links).where(chain_links.c.decision_id == decision_id)
            ).mappings().first()
        return _link_row(row) if row else None

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
        with self.ledger.read() as connection:
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

    # ------------------------------------------------------------------ checkpoints

    def checkpoint(self, chain_id: str, tree_size: int) -> str | None:
        with self.ledger.read() as connection:
            stored: str | None = connection.execute(
                select(chain_checkpoints.c.checkpoint_json).where(and_(
                    chain_checkpoints.c.chain_id == chain_id, chain_checkpoints.c.tree_size == tree_size))
            ).scalar()
            return stored

    def store_checkpoint(self, chain_id: str, tree_size: int, checkpoint_json: str) -> str:
        """Keep the first checkpoint stored for (chain, size); returns the one that is stored."""
        with self.ledger.write() as connection:
            # RETURNING names the row only when this writer inserted it (the driver's rowcount is
            # -1 for an upsert on PostgreSQL's raw cursor, so it cannot say).
            inserted = connection.execute(self.ledger.insert_ignore(chain_checkpoints, {
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

    # ------------------------------------------------------------------ appends (a decision's transaction)

    def lock_head(self, connection: Connection, chain: ChainAppend) -> ChainHead:
        """The chain's head under its row lock (created first for a new chain); in a batch run all
        at once, the head an earlier member left (`carry_head`)."""
        memo = connection.info.get(BATCH_MEMO)
        if memo is not None and ("head", chain.chain_id) in memo:  # locked by an earlier member of this batch
            head: ChainHead = memo["head", chain.chain_id]
            return head
        head_for_update = self.ledger.hot("head", _HEAD_FOR_UPDATE)
        asked = time.perf_counter()
        row = head_for_update.first(connection, {"chain_id": chain.chain_id})
        if self.ledger.dialect == "postgresql":  # the row lock another transaction may hold (SQLite's is the file's)
            waits.waited(waits.CHAIN_HEAD, time.perf_counter() - asked)
        if row is None:  # a new chain: create its head (a concurrent creator may win), then lock it
            connection.execute(self.ledger.insert_ignore(chain_heads, {
                "chain_id": chain.chain_id, "scope": chain.scope, "size": 0, "head_link_hash": None,
                "merkle_root": None, "tree_peaks": "[]", "updated_at": "",
            }))
            row = head_for_update.first(connection, {"chain_id": chain.chain_id})
            if row is None:  # pragma: no cover - the head was just created (by this writer or another)
                raise LedgerUnavailable("the chain head could not be locked")
        return ChainHead(row["chain_id"], row["size"], row["head_link_hash"], row["merkle_root"],
                         tuple(json.loads(row["tree_peaks"])))

    def append_link(self, connection: Connection, chain: ChainAppend, sealed: SealedDecision) -> None:
        """The sealed decision's link, its completed tree nodes and the chain's new head."""
        link, nodes, peaks = sealed.link, sealed.nodes, sealed.peaks
        self.ledger.insert_row(connection, "link", _INSERT_LINK, {
            "chain_id": chain.chain_id, "chain_position": link["chain_position"],
            "decision_id": link["decision_id"], "leaf_hash": link["leaf_hash"],
            "link_hash": link["link_hash"], "link_json": json.dumps(link, separators=(",", ":")),
        })
        for level, idx, digest in nodes:
            self.ledger.insert_row(connection, "nodes", _INSERT_NODES,
                                   {"chain_id": chain.chain_id, "level": level, "idx": idx, "hash": digest})
        new_head = {"head_chain_id": chain.chain_id, "size": link["chain_position"],
                    "head_link_hash": link["link_hash"], "merkle_root": link["merkle_root"],
                    "tree_peaks": json.dumps(list(peaks)), "updated_at": link["created_at"]}
        update_head = self.ledger.hot("update-head", _UPDATE_HEAD)
        if not carry_head(connection, chain, link, peaks):
            update_head.run(connection, new_head)
        else:  # the batch's last member's head is the one written (`BATCH_FLUSH`)
            defer(connection, ("head", chain.chain_id), lambda connection: update_head.run(connection, new_head))
