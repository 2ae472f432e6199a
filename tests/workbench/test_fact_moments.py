"""Fact moments (the anomaly engine's `fact_drift` input): the typed facts table and the
one-by-one JSON flattening give the same report, and facts of mixed or odd shapes neither
break the report nor count as numbers."""

from __future__ import annotations

import random
from datetime import timedelta

import pyarrow as pa
import pytest
from manifest_support import write_listed_manifest
from workbench_support import T0, decision, frames, outcome, write_dataset

from workbench.dataset.facts import write_facts
from workbench.dataset.load import from_dataset
from workbench.dataset.schema import DATASET_SCHEMA_VERSION
from workbench.engines import anomalies, fact_moments
from workbench.reports.policy import CLASSES, ReportParams, anomaly_report


def _odd_facts(rng: random.Random, i: int, at) -> dict | None:
    """Integers (exact float sums), nested objects, booleans, strings, arrays, nulls, keys no
    field path can name, integers beyond 2^53 (partial rows) and paths that change kind."""
    if rng.random() < 0.05:
        return None
    facts = {"amount": rng.randrange(0, 500) + (300 if at.month == 3 else 0),
             "customer": {"tier": rng.randrange(1, 4), "age_days": rng.randrange(0, 900)},
             "flag": rng.random() < 0.5, "region": rng.choice(["us", "eu"]), "tags": [1, 2],
             "has space": rng.randrange(0, 9), "dotted.key": 4, "maybe": None,
             # many ties at the extremes, one fact drifting up and one down
             "level": rng.randrange(0, 3) + (2 if at.month == 3 else 0),
             "dip": rng.randrange(3, 6) - (3 if at.month == 3 else 0)}
    if i % 37 == 0:
        facts["big"] = 2**60  # an integer beyond 2^53: the facts row is partial (sums stay exact)
    if i % 11 == 0:
        facts["shape"] = {"inner": 1}
    else:
        facts["shape"] = rng.randrange(0, 5)  # a number here, an object there: not numeric
    if i % 13 == 0:
        facts["customer"]["tier"] = True  # a boolean among numbers: not numeric
    return facts


def _ledger(seed: int = 3, n: int = 400):
    rng = random.Random(seed)
    ds, os_ = [], []
    for i in range(n):
        at = T0 + timedelta(days=rng.randrange(0, 80), seconds=rng.randrange(0, 86400))
        did = f"d{i:04d}"
        ds.append(decision(did, at=at, scope=rng.choice(["tenant_a", "tenant_b"]),
                           policy_version="v1" if i < n // 2 else "v2", facts=_odd_facts(rng, i, at)))
        os_.append(outcome(f"r{i:04d}", did, rng.choice(["succeeded", "failed"]), at=at + timedelta(hours=1),
                           scope=ds[-1]["scope"]))
    return ds, os_


def _with_facts_table(root, ds, os_, *, leave_out: int = 0):
    write_dataset(root, ds, os_)
    kept = ds[leave_out:]  # an older export wrote no facts rows for the first `leave_out` decisions
    batch = pa.table({name: [d[name] for d in kept] for name in
                      ("decision_id", "facts_json", "scope", "month", "policy_id", "created_at", "verdict",
                       "application_verdict", "action", "reason_code", "matched_rule_id")})
    write_facts(root, batch, "000001-0000")
    write_listed_manifest(root, {"dataset_schema_version": DATASET_SCHEMA_VERSION})  # the facts files listed too


PARAMS = ReportParams(limit=None, min_sample=10, threshold=0.0, max_items=100)


@pytest.mark.parametrize("leave_out", [0, 25])
@pytest.mark.parametrize("view", [{}, {"policy_version": "v2"}, {"limit": 90}])
def test_the_typed_table_and_the_json_give_the_same_report(tmp_path, leave_out, view):
    ds, os_ = _ledger()
    _with_facts_table(tmp_path, ds, os_, leave_out=leave_out)
    params = ReportParams(**{**PARAMS.__dict__, **view})
    typed = from_dataset(tmp_path, policy_id="pricing", **view)
    assert typed.facts is not None
    # the same decisions, facts from their JSON
    plain = type(typed)(typed.decisions, typed.outcomes, source=typed.source)
    a, b = anomaly_report(typed, "pricing", params), anomaly_report(plain, "pricing", params)
    assert a == b
    assert a["checks"]["facts"]["numeric_facts"] == 6  # amount, big, customer.age_days, dip, level, shape.inner
    drift = {f["value"]: f["decision_ids"] for f in a["anomalies"] if f["kind"] == "fact_drift"}
    # the evidence: ten of many equal extreme values, by decision id
    assert len(drift.get("level", [])) == 10 and len(drift.get("dip", [])) == 10


def test_mixed_kinds_unreachable_keys_and_partial_rows():
    ds, os_ = _ledger()
    f = frames(ds, os_)
    state = fact_moments.facts_partial(f.decisions)
    by_fact = state["facts"].drop("month").group_by("fact").sum()
    non_numeric = dict(zip(by_fact["fact"], by_fact["non_numeric"], strict=True))
    counted = dict(zip(by_fact["fact"], by_fact["n"], strict=True))
    # a path that is sometimes an object, a boolean among numbers: counted as non-numeric
    assert non_numeric["shape"] > 0 and non_numeric["customer.tier"] > 0
    assert non_numeric["flag"] > 0 and non_numeric["region"] > 0 and non_numeric["tags"] > 0
    # keys no field path can name are no facts; a JSON null is no value
    assert not {"has space", "dotted.key", "maybe"} & set(by_fact["fact"])
    # the integer beyond 2^53 is a value of `big` (read from the partial row's JSON)
    assert counted["big"] == sum(1 for d in ds if d["facts_json"] and '"big"' in d["facts_json"]) > 0
    report = anomalies.anomalies(f.decisions, f.outcomes, CLASSES, min_sample=10, threshold=0.0, max_items=100)
    assert report["checks"]["facts"]["numeric_facts"] == 6
    assert {a["value"] for a in report["anomalies"] if a["kind"] == "fact_drift"} <= {
        "amount", "big", "customer.age_days", "dip", "level", "shape.inner"}


def test_a_path_that_is_a_number_and_an_object_does_not_break_the_report():
    ds = [decision("d1", at=T0, facts={"x": 1}), decision("d2", at=T0, facts={"x": {"y": 2}})]
    f = frames(ds, [])
    report = anomalies.anomalies(f.decisions, f.outcomes, CLASSES, min_sample=1, threshold=0.0, max_items=5)
    assert report["checks"]["facts"]["numeric_facts"] == 1  # x.y; x itself holds an object once


def test_a_month_with_fewer_than_twice_k_values_lists_each_decision_once(tmp_path):
    """Its largest and smallest values overlap: the typed table must not give a decision twice
    as evidence (the JSON reading never did)."""
    ds, os_ = _ledger(seed=5, n=24)
    _with_facts_table(tmp_path, ds, os_)
    params = ReportParams(limit=None, min_sample=3, threshold=0.0, max_items=100)
    typed = from_dataset(tmp_path, policy_id="pricing")
    a = anomaly_report(typed, "pricing", params)
    assert a == anomaly_report(type(typed)(typed.decisions, typed.outcomes, source=typed.source), "pricing", params)
    drift = [f for f in a["anomalies"] if f["kind"] == "fact_drift"]
    assert drift
    for finding in drift:
        assert len(finding["decision_ids"]) == len(set(finding["decision_ids"])) > 0
