"""Synthetic frames in the dataset contract for engine tests (small, seeded, hand-checkable)."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

import polars as pl

from gate.receipts.values import OUTCOME_EFFECTIVENESS_CLASS
from workbench.dataset.load import Frames, conform, empty

CLASSES = OUTCOME_EFFECTIVENESS_CLASS
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def decision(decision_id: str, *, at: datetime, scope: str = "tenant_a", policy_id: str = "pricing",
             policy_version: str = "v1", verdict: str = "yes", rule: str | None = "approve",
             reason: str = "OK", action: str = "apply_discount", facts: dict | None = None) -> dict:
    return {
        "decision_id": decision_id, "created_at": at, "chain_position": None, "policy_id": policy_id,
        "policy_version": policy_version, "rulebook_hash": "0" * 64, "policy_bundle_hash": None,
        "verdict": verdict, "application_verdict": verdict.upper(), "reason_code": reason,
        "matched_rule_id": rule, "action": action, "evidence": [reason], "binding_mode": "context_inputs",
        "record_hash": "1" * 64, "receipt_hash": "2" * 64, "input_hash": "3" * 64,
        "facts_json": None if facts is None else json.dumps(facts, sort_keys=True, separators=(",", ":")),
        "scope": scope, "month": at.strftime("%Y-%m"),
    }


def outcome(receipt_id: str, decision_id: str, status: str, *, at: datetime, scope: str = "tenant_a") -> dict:
    return {
        "receipt_id": receipt_id, "decision_id": decision_id, "reported_at": at, "status": status,
        "receipt_hash": "4" * 64, "idempotency_key": None, "receipt_json": "{}",
        "scope": scope, "month": at.strftime("%Y-%m"),
    }


def frames(decisions: list[dict], outcomes: list[dict]) -> Frames:
    d = conform(pl.DataFrame(decisions, infer_schema_length=None), "decisions") if decisions else empty("decisions")
    o = conform(pl.DataFrame(outcomes, infer_schema_length=None), "outcomes") if outcomes else empty("outcomes")
    return Frames(d, o)


def random_ledger(seed: int, n: int = 600, scopes: tuple[str, ...] = ("tenant_a", "tenant_b", "tenant_c")) -> tuple[list[dict], list[dict]]:
    """Several scopes and months, two policy versions, rule/reason/action segments, integer
    facts (exact float sums), zero to three outcomes per decision (with timestamp ties)."""
    rng = random.Random(seed)
    decisions, outcomes = [], []
    statuses = list(CLASSES)
    for i in range(n):
        at = T0 + timedelta(days=rng.randrange(0, 120), seconds=rng.randrange(0, 86400))
        version = "v1" if at < T0 + timedelta(days=80) else "v2"
        rule = rng.choice(["approve", "block", None, "escalate"])
        verdict = {"approve": "yes", "block": "no", None: "review", "escalate": "review"}[rule]
        if version == "v2" and rng.random() < 0.3:
            verdict = "no"
        facts = {"amount": rng.randrange(0, 1000) + (400 if at.month == 4 else 0),
                 "customer": {"tier": rng.randrange(1, 4)}, "region": rng.choice(["us", "eu"])}
        if rng.random() < 0.1:
            facts = None
        did = f"d{i:05d}"
        decisions.append(decision(did, at=at, scope=rng.choice(scopes), policy_version=version,
                                  verdict=verdict, rule=rule, reason=rng.choice(["OK", "MARGIN", "RISK"]),
                                  action=rng.choice(["apply_discount", "hold"]), facts=facts))
        for j in range(rng.choice([0, 1, 1, 2, 3])):
            when = at + timedelta(hours=rng.choice([1, 1, 5, 30 * 24]))
            weights = [6, 3 if rule != "escalate" else 12, 1, 1, 1, 1]
            outcomes.append(outcome(f"r{i:05d}{j}", did, rng.choices(statuses, weights)[0], at=when,
                                    scope=decisions[-1]["scope"]))
    return decisions, outcomes


def write_dataset(root, decisions: list[dict], outcomes: list[dict], *, version: str | None = None) -> None:
    """A Hive-partitioned dataset as the contract lays it out, written with pyarrow alone."""
    from pathlib import Path
    from urllib.parse import quote

    import pyarrow as pa
    import pyarrow.parquet as pq

    from workbench.dataset.schema import DATASET_SCHEMA_VERSION, TABLES

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for table, rows in (("decisions", decisions), ("outcomes", outcomes)):
        groups: dict[tuple[str, str], list[dict]] = {}
        for row in rows:
            groups.setdefault((row["scope"], row["month"]), []).append(row)
        for (scope, month), part in groups.items():
            directory = root / table / f"scope={quote(scope, safe='')}" / f"month={month}"
            directory.mkdir(parents=True, exist_ok=True)
            columns = {f.name: [r[f.name] for r in part] for f in TABLES[table]}
            pq.write_table(pa.table(columns, schema=TABLES[table]), directory / "part-0.parquet")
    from tests.workbench.manifest_support import write_listed_manifest

    write_listed_manifest(root, {"dataset_schema_version": version or DATASET_SCHEMA_VERSION})
