"""The Parquet dataset contract: explicit, versioned Arrow schemas, one per table.

The export writes exactly these schemas; the engines, the dry-run, the dashboard and the
notebooks read them (through `workbench.dataset.load`, from a dataset or from the live ledger). A
change of any column's name, type or meaning is a new `DATASET_SCHEMA_VERSION`; readers refuse
a dataset whose manifest names another version.

Layout (Hive-partitioned, documented in docs/dataset.md):

    DIR/manifest.json
    DIR/<table>/scope=<uri-escaped scope>/month=<YYYY-MM>/part-*.parquet

`scope` and `month` are partition keys: they are in the directory names, not in the files, and
every reader gets them back as columns. `month` is the UTC month of the row's own timestamp
(`created_at` for decisions and hold events, `reported_at` for receipts, the decision's
`created_at` for chain links, `opened_at` for holds). Timestamps are UTC with millisecond precision, the same instants the records hash.
"""

from __future__ import annotations

import pyarrow as pa

DATASET_SCHEMA_VERSION = "decision_dataset_v1"
PARTITION_KEYS = ("scope", "month")

TS = pa.timestamp("ms", tz="UTC")

# One row per Decision Record.
DECISIONS = pa.schema([
    pa.field("decision_id", pa.string(), nullable=False),
    pa.field("created_at", TS, nullable=False),
    pa.field("chain_position", pa.int64()),
    pa.field("policy_id", pa.string()),          # the rulebook id in rulebook mode
    pa.field("policy_version", pa.string()),
    pa.field("rulebook_hash", pa.string()),
    pa.field("policy_bundle_hash", pa.string()),
    pa.field("verdict", pa.string(), nullable=False),  # yes | no | review
    pa.field("application_verdict", pa.string()),
    pa.field("reason_code", pa.string()),
    pa.field("matched_rule_id", pa.string()),      # null when the default outcome decided
    pa.field("action", pa.string()),
    pa.field("evidence", pa.list_(pa.string())),
    pa.field("binding_mode", pa.string()),
    pa.field("record_hash", pa.string(), nullable=False),
    pa.field("receipt_hash", pa.string(), nullable=False),
    pa.field("input_hash", pa.string(), nullable=False),
    # The facts the rulebook saw (context.inputs or the adapter's facts), canonical JSON text;
    # null when the stored request does not carry them. Typed per-rulebook fact columns live
    # in the `facts` table.
    pa.field("facts_json", pa.string()),
])

# The decision columns the workbench's analyses read (the report engines, their rollups, the
# dashboard's recent reads, the dry-run), in the table's order: not the hashes, the evidence,
# the chain position or the binding mode, which are most of the bytes and no figure reads.
DECISION_ANALYSIS_COLUMNS = ("decision_id", "created_at", "policy_id", "policy_version", "rulebook_hash", "verdict",
                             "application_verdict", "reason_code", "matched_rule_id", "action", "facts_json")

# One row per execution receipt, outcome record and CRM sync record (same columns for the
# three kinds; `status` is execution_status, outcome_status or sync_status).
RECEIPT_COLUMNS = [
    pa.field("receipt_id", pa.string(), nullable=False),
    pa.field("decision_id", pa.string(), nullable=False),
    pa.field("reported_at", TS, nullable=False),
    pa.field("status", pa.string(), nullable=False),
    pa.field("receipt_hash", pa.string(), nullable=False),
    pa.field("idempotency_key", pa.string()),
    pa.field("receipt_json", pa.string(), nullable=False),  # the receipt's JSON text as stored
]
EXECUTIONS = pa.schema(RECEIPT_COLUMNS)
OUTCOMES = pa.schema(RECEIPT_COLUMNS)
CRM_SYNCS = pa.schema(RECEIPT_COLUMNS)

# One row per audit-chain link.
CHAIN_LINKS = pa.schema([
    pa.field("chain_id", pa.string(), nullable=False),
    pa.field("chain_position", pa.int64(), nullable=False),
    pa.field("decision_id", pa.string(), nullable=False),
    pa.field("leaf_hash", pa.string(), nullable=False),
    pa.field("link_hash", pa.string(), nullable=False),
    pa.field("merkle_root", pa.string(), nullable=False),
    pa.field("created_at", TS, nullable=False),
])

# The record tables: rows of signed records, appended by chain position or receipt keyset. In the
# Iceberg layout these are the Iceberg tables.
TABLES: dict[str, pa.Schema] = {
    "decisions": DECISIONS,
    "executions": EXECUTIONS,
    "outcomes": OUTCOMES,
    "crm_syncs": CRM_SYNCS,
    "chain_links": CHAIN_LINKS,
}

# Held actions (issue 43, docs/holds.md). A hold's row changes (votes, escalation, resolution), so
# the export appends one row per hold *state* it saw: a hold that changed between two runs has a
# row from each, and `last_event_seq` (the seq of the newest hold event of the scope's hold chain
# that the row reflects; 0 before any) orders them. Readers keep the row with the greatest
# `last_event_seq` per decision (`workbench.dataset.load.latest_hold_states`): one row per hold.
# `month` is the month of `opened_at` (the decision's `created_at`), so every state of a hold is in
# the same partition.
HOLDS = pa.schema([
    pa.field("decision_id", pa.string(), nullable=False),
    pa.field("opened_at", TS, nullable=False),
    pa.field("policy_id", pa.string()),
    pa.field("policy_version", pa.string()),
    pa.field("rule_id", pa.string()),              # the rule that held it; null: the default outcome
    pa.field("reason_code", pa.string()),
    pa.field("queue", pa.string(), nullable=False),  # the queue it is in (after any reassignment)
    pa.field("priority", pa.string(), nullable=False),
    pa.field("deadline_at", TS, nullable=False),
    pa.field("state", pa.string(), nullable=False),  # open | approved | denied | expired
    pa.field("resolved_at", TS),                    # null while open
    pa.field("resolved_by", pa.string()),           # the closing event's actor ("clock" for an expiry)
    pa.field("approvals", pa.int64(), nullable=False),  # approving votes counted, the closing one included
    pa.field("approvals_needed", pa.int64(), nullable=False),
    pa.field("record_hash", pa.string(), nullable=False),
    pa.field("last_event_seq", pa.int64(), nullable=False),
])

# One row per hold event (`hold_event_v1`) of a scope's hold chain, in `seq` order; `month` is the
# month of `created_at`. `event_json` is the signed event as stored (gate.holds.events verifies it).
HOLD_EVENTS = pa.schema([
    pa.field("seq", pa.int64(), nullable=False),
    pa.field("decision_id", pa.string()),          # null for a hold-policy change
    pa.field("action", pa.string(), nullable=False),  # vote | expire | escalate | claim | unclaim | reassign | policy_set
    pa.field("vote", pa.string()),                 # approve | deny (votes only)
    pa.field("outcome", pa.string()),              # approved | denied | expired on the closing event
    pa.field("actor_kind", pa.string(), nullable=False),  # api_key | person | operator | clock | …
    pa.field("actor", pa.string(), nullable=False),       # the principal's actor string
    pa.field("queue", pa.string()),
    pa.field("reason_code", pa.string()),
    pa.field("created_at", TS, nullable=False),
    pa.field("event_hash", pa.string(), nullable=False),
    pa.field("event_json", pa.string(), nullable=False),
])

HOLD_TABLES: dict[str, pa.Schema] = {"holds": HOLDS, "hold_events": HOLD_EVENTS}
# Every table of the dataset. A manifest written before the hold tables existed lists none of
# them; readers read an absent table as empty.
ALL_TABLES: dict[str, pa.Schema] = {**TABLES, **HOLD_TABLES}

# The lifecycle receipt kind of the ledger stored in each receipt table.
RECEIPT_TABLE_KIND = {"executions": "execution", "outcomes": "outcome", "crm_syncs": "crm_sync"}
# The partition columns as a reader of the dataset gets them back (appended, in this order).
PARTITION_FIELDS = [pa.field("scope", pa.string(), nullable=False), pa.field("month", pa.string(), nullable=False)]


def with_partitions(schema: pa.Schema) -> pa.Schema:
    """`schema` plus the `scope` and `month` partition columns, appended: the shape a reader of
    the dataset (and the live-ledger loader) sees, and what `workbench.dataset.convert` returns."""
    return pa.schema(list(schema) + PARTITION_FIELDS)
