"""Ledger rows → Arrow tables in exactly the dataset schemas of `workbench.dataset.schema`.

Pure functions: no I/O, no clock. They take the row dicts the ledger streams yield
(`gate.ledger.stream.iter_decisions`, `iter_chain_decisions`, `iter_receipts`) and return one
`pyarrow.Table` per batch whose schema is `with_partitions(<table schema>)`: the table's columns
in the documented order, then the `scope` and `month` partition columns, which is the shape a
reader of the exported dataset gets back. The export drops the two partition columns when it
writes (they live in the directory names); the live-ledger loader keeps them.

What each column is read from (see docs/dataset.md for the meaning of every column):

* decisions: the ledger's indexed columns (`decision_id`, `created_at`, hashes, policy id and
  version, `verdict`) and, from the stored record, `application_verdict`, `reason_code`,
  `matched_rule_id`, `action`, `evidence` and `runtime_binding.binding_mode`; `chain_position`
  from the chain link. `facts_json` is the canonical JSON (`gate.protocol.canonical.canonical_text`) of
  the facts the rulebook saw: the request's `context.inputs` in direct mode, the record's
  `adapter_facts` in adapter mode; null when neither is stored.
* executions / outcomes / crm_syncs: the receipt row; `status` is the receipt's
  `execution_status`, `outcome_status` or `sync_status`; `receipt_json` is the receipt's JSON
  text as the gate stored and returned it (canonicalize it to recompute its hash).
* chain_links: the link row; `merkle_root` and `created_at` from the stored link.
* holds: the hold row as `gate.ledger.holdstream` reads it; `approvals` counts the approving votes
  (`approvals_json`, the closing one included; a hold approved before issue 56 stored its votes
  without the closing one, which is then counted too); `month` is `opened_at`'s.
* hold_events: the event row; `vote`, `outcome`, `queue`, `reason_code`, `actor` and the
  principal's kind (`actor_kind`) from the stored signed event (`event_json`).

Timestamps are parsed from the stored ISO 8601 text (`2026-05-21T00:00:00.000Z`) into UTC
milliseconds; `month` is that text's `YYYY-MM` (UTC).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, cast

import polars as pl
import pyarrow as pa

from gate.protocol.canonical import canonical_text
from gate.vocabulary import HOLD_APPROVED
from workbench.dataset.schema import (
    ALL_TABLES,
    CHAIN_LINKS,
    DECISIONS,
    EXECUTIONS,
    HOLD_EVENTS,
    HOLDS,
    TS,
    with_partitions,
)

STATUS_FIELD = {"execution": "execution_status", "outcome": "outcome_status", "crm_sync": "sync_status"}

__all__ = [
    "STATUS_FIELD",
    "chain_links_table",
    "decision_values",
    "decisions_table",
    "empty_table",
    "facts_of",
    "frame_of",
    "hold_events_table",
    "holds_table",
    "month_of",
    "receipts_table",
]


def month_of(iso: str) -> str:
    """The partition month (`YYYY-MM`, UTC) of a stored ISO 8601 UTC timestamp."""
    return iso[:7]


def facts_of(request: Mapping[str, Any], record: Mapping[str, Any]) -> dict[str, Any] | None:
    """The facts the rulebook evaluated: `context.inputs` of the request (direct mode), else
    the record's `adapter_facts` (adapter mode), else None."""
    context = request.get("context")
    inputs = context.get("inputs") if isinstance(context, dict) else None
    if isinstance(inputs, dict):
        return inputs
    facts = record.get("adapter_facts")
    return facts if isinstance(facts, dict) else None


def decision_values(row: Mapping[str, Any]) -> dict[str, Any]:
    """One decision row (from a ledger stream) as the dataset's column values (plus `scope`
    and `month`); timestamps stay ISO text here."""
    record = json.loads(row["record_json"])
    request = json.loads(row["request_json"]) if row.get("request_json") else {}
    facts = facts_of(request, record)
    binding = record.get("runtime_binding")
    evidence = record.get("evidence")
    return {
        "decision_id": row["decision_id"],
        "created_at": row["created_at"],
        "chain_position": row.get("chain_position"),
        "policy_id": row.get("policy_id"),
        "policy_version": row.get("policy_version"),
        "rulebook_hash": row.get("rulebook_hash"),
        "policy_bundle_hash": row.get("policy_bundle_hash"),
        "verdict": row["verdict"],
        "application_verdict": record.get("application_verdict"),
        "reason_code": record.get("reason_code"),
        "matched_rule_id": record.get("matched_rule_id") or None,
        "action": record.get("action"),
        "evidence": [str(item) for item in evidence] if isinstance(evidence, list) else None,
        "binding_mode": binding.get("binding_mode") if isinstance(binding, dict) else None,
        "record_hash": row["record_hash"],
        "receipt_hash": row["receipt_hash"],
        "input_hash": row["input_hash"],
        "facts_json": canonical_text(facts) if facts is not None else None,
        "scope": row["scope"],
        "month": month_of(row["created_at"]),
    }


def _table(schema: pa.Schema, columns: dict[str, list[Any]]) -> pa.Table:
    full = with_partitions(schema)
    arrays = []
    for field in full:
        values = columns[field.name]
        if field.type == TS:
            arrays.append(pa.array(values, pa.string()).cast(TS))
        else:
            arrays.append(pa.array(values, field.type))
    return pa.Table.from_arrays(arrays, schema=full)


def _columns(schema: pa.Schema) -> dict[str, list[Any]]:
    return {field.name: [] for field in with_partitions(schema)}


def decisions_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Decision rows → a table in `with_partitions(DECISIONS)`."""
    columns = _columns(DECISIONS)
    for row in rows:
        for name, value in decision_values(row).items():
            columns[name].append(value)
    return _table(DECISIONS, columns)


def receipts_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Lifecycle receipt rows (any one kind) → a table in `with_partitions(EXECUTIONS)` (the
    executions, outcomes and crm_syncs tables share their columns)."""
    columns = _columns(EXECUTIONS)
    for row in rows:
        receipt = json.loads(row["receipt_json"])
        columns["receipt_id"].append(row["receipt_id"])
        columns["decision_id"].append(row["decision_id"])
        columns["reported_at"].append(row["reported_at"])
        columns["status"].append(receipt[STATUS_FIELD[row["kind"]]])
        columns["receipt_hash"].append(row["receipt_hash"])
        columns["idempotency_key"].append(row.get("idempotency_key"))
        columns["receipt_json"].append(row["receipt_json"])
        columns["scope"].append(row["scope"])
        columns["month"].append(month_of(row["reported_at"]))
    return _table(EXECUTIONS, columns)


def chain_links_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Chain-ordered decision rows (`iter_chain_decisions`) → a table in
    `with_partitions(CHAIN_LINKS)`; `month` is the decision's month."""
    columns = _columns(CHAIN_LINKS)
    for row in rows:
        link = json.loads(row["link_json"])
        columns["chain_id"].append(row["chain_id"])
        columns["chain_position"].append(row["chain_position"])
        columns["decision_id"].append(row["decision_id"])
        columns["leaf_hash"].append(row["leaf_hash"])
        columns["link_hash"].append(row["link_hash"])
        columns["merkle_root"].append(link["merkle_root"])
        columns["created_at"].append(link["created_at"])
        columns["scope"].append(row["scope"])
        columns["month"].append(month_of(row["created_at"]))
    return _table(CHAIN_LINKS, columns)


def holds_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Hold rows (`gate.ledger.holdstream`) → a table in `with_partitions(HOLDS)`."""
    columns = _columns(HOLDS)
    for row in rows:
        approvals = len(json.loads(row["approvals_json"]))
        if row["state"] == HOLD_APPROVED and approvals < row["approvals_needed"]:
            approvals += 1  # a hold approved before issue 56 stored its votes without the closing one
        values = {name: row[name] for name in ("decision_id", "opened_at", "policy_id", "policy_version", "rule_id",
                                                "reason_code", "queue", "priority", "deadline_at", "state",
                                                "resolved_at", "resolved_by", "approvals_needed", "record_hash",
                                                "last_event_seq", "scope")}
        values.update(approvals=approvals, month=month_of(row["opened_at"]))
        for name, value in values.items():
            columns[name].append(value)
    return _table(HOLDS, columns)


def hold_events_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Hold event rows (`gate.ledger.holdstream.iter_hold_events`) → a table in
    `with_partitions(HOLD_EVENTS)`."""
    columns = _columns(HOLD_EVENTS)
    for row in rows:
        event = json.loads(row["event_json"])
        principal = event.get("principal")
        values = {"seq": row["seq"], "decision_id": row["decision_id"], "action": row["action"],
                  "vote": event.get("vote"), "outcome": event.get("outcome"),
                  "actor_kind": principal.get("kind") if isinstance(principal, dict) else None,
                  "actor": event.get("actor"), "queue": event.get("queue"), "reason_code": event.get("reason_code"),
                  "created_at": row["created_at"], "event_hash": row["event_hash"], "event_json": row["event_json"],
                  "scope": row["scope"], "month": month_of(row["created_at"])}
        for name, value in values.items():
            columns[name].append(value)
    return _table(HOLD_EVENTS, columns)


def empty_table(name: str) -> pa.Table:
    """An empty table of dataset table `name`, with the partition columns."""
    return with_partitions(ALL_TABLES[name]).empty_table()


def frame_of(table: pa.Table) -> pl.DataFrame:
    """An Arrow table as a Polars DataFrame (without a copy where Arrow allows)."""
    # pyarrow has no type hints, so mypy cannot pick from_arrow's overload for a Table (a
    # DataFrame) over the one for an Array (a Series).
    return cast(pl.DataFrame, pl.from_arrow(table))
