"""A small dataset in the export's contract, written row by row, for the dry-run tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from gate.protocol.canonical import canonical_text, sha256_hex
from gate.rulebook import get_evaluator
from tests.workbench.manifest_support import write_listed_manifest
from workbench.dataset.facts import write_facts
from workbench.dataset.schema import DATASET_SCHEMA_VERSION, DECISIONS, OUTCOMES

T0 = datetime(2026, 1, 5, tzinfo=UTC)


def rulebook(rules, version="1.0.0", rulebook_id="refunds", default=("review", "REVIEW", "hold", "NO_RULE")):
    d, v, a, r = default
    return {"schema_version": "rulebook_v1", "rulebook_id": rulebook_id, "version": version, "rules": rules,
            "default_outcome": {"decision": d, "verdict": v, "action": a, "reason_code": r}}


def rule(rule_id, condition, decision, reason, priority=None):
    out = {"rule_id": rule_id, "condition": condition,
           "outcome": {"decision": decision, "verdict": decision.upper() + "_V", "action": "act_" + decision,
                       "reason_code": reason}}
    if priority is not None:
        out["priority"] = priority
    return out


def decide(book, facts_list, scope="acme", start=T0, prefix="d", no_facts=()):
    """Decision rows as the gate would have recorded them under `book`."""
    evaluator = get_evaluator(book, sha256_hex(book))
    rows = []
    for index, facts in enumerate(facts_list):
        e = evaluator.evaluate(facts)
        created = start + timedelta(days=index * 3)
        rows.append({
            "decision_id": f"{prefix}{index:05d}", "created_at": created, "chain_position": index + 1,
            "policy_id": book["rulebook_id"], "policy_version": book["version"], "rulebook_hash": sha256_hex(book),
            "policy_bundle_hash": None, "verdict": e.decision, "application_verdict": e.application_verdict,
            "reason_code": e.reason_code, "matched_rule_id": e.matched_rule_id, "action": e.action,
            "evidence": [e.reason_code], "binding_mode": "direct_rulebook", "record_hash": "r" * 64,
            "receipt_hash": "c" * 64, "input_hash": "i" * 64,
            "facts_json": None if index in no_facts else canonical_text(facts),
            "scope": scope, "month": created.strftime("%Y-%m"),
        })
    return rows


def write_dataset(root: Path, decisions: list[dict], outcomes: list[dict], *, version=DATASET_SCHEMA_VERSION,
                  facts=True, signer=None) -> Path:
    """decisions: rows from `decide`; outcomes: {decision_id, status, reported_at, receipt_id}.
    The manifest lists every file with its digest (`manifest_support`); `signer` signs it."""
    root.mkdir(parents=True, exist_ok=True)
    by_partition: dict[tuple[str, str], list[dict]] = {}
    for row in decisions:
        by_partition.setdefault((row["scope"], row["month"]), []).append(row)
    for (scope, month), rows in by_partition.items():
        folder = root / "decisions" / f"scope={scope}" / f"month={month}"
        folder.mkdir(parents=True, exist_ok=True)
        table = pa.Table.from_pylist([{k: v for k, v in r.items() if k not in ("scope", "month")} for r in rows],
                                     schema=DECISIONS)
        pq.write_table(table, folder / "part-000001-0000.parquet")
    scope_of = {row["decision_id"]: row["scope"] for row in decisions}
    outcome_rows: dict[tuple[str, str], list[dict]] = {}
    for o in outcomes:
        month = o["reported_at"].strftime("%Y-%m")
        outcome_rows.setdefault((scope_of[o["decision_id"]], month), []).append({
            "receipt_id": o["receipt_id"], "decision_id": o["decision_id"], "reported_at": o["reported_at"],
            "status": o["status"], "receipt_hash": "h" * 64, "idempotency_key": None, "receipt_json": "{}"})
    for (scope, month), rows in outcome_rows.items():
        folder = root / "outcomes" / f"scope={scope}" / f"month={month}"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=OUTCOMES), folder / "part-000001-0000.parquet")
    if facts:
        keep = ("decision_id", "created_at", "policy_id", "verdict", "application_verdict", "action", "reason_code",
                "matched_rule_id", "facts_json", "scope", "month")
        schema = pa.schema([DECISIONS.field(k) if k in DECISIONS.names else pa.field(k, pa.string()) for k in keep])
        batch = pa.Table.from_pylist([{k: r[k] for k in keep} for r in decisions], schema=schema)
        write_facts(root, batch, "000001-0000")
    write_listed_manifest(root, {"dataset_schema_version": version, "synthetic": True}, signer)
    return root
