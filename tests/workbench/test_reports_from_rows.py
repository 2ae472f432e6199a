"""Reports from rows on edge datasets: every policy report computed from the rows (the rollups
set aside) equals the report from the dataset's rollups, hashes included, and equals the report
computed with the sorting reference of the latest outcome (`common.with_latest_outcome`, which
`latest_rows` replaces). The dataset holds what a packed maximum or a partition could get
wrong: timestamp ties of one status and of two (settled by receipt id), a decision whose
outcomes sit in two months' partitions (and in a later month than the decision), a decision
decisions with no outcome, empty partition files, outcomes of
another policy's decisions, two versions, and facts in the typed table and only as JSON."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from workbench_support import T0, decision, outcome, write_dataset

from tests.workbench.manifest_support import write_listed_manifest
from workbench.dataset.facts import write_facts
from workbench.dataset.load import from_dataset
from workbench.dataset.rebuild import rebuild_rollups
from workbench.dataset.schema import DATASET_SCHEMA_VERSION, TABLES
from workbench.engines import anomalies as anomaly_engine
from workbench.engines import common
from workbench.reports.policy import (
    ReportParams,
    anomaly_report,
    benchmark_report,
    confidence_report,
    effectiveness_report,
)

POLICY = "pricing"
SCOPES = ("tenant_a", "tenant_b")
EVERY = ReportParams(limit=None, min_sample=3, threshold=0.0, max_items=100)
STATUSES = ("succeeded", "failed", "pending", "cancelled", "reverted")


def _ledger() -> tuple[list[dict], list[dict]]:
    ds, os_ = [], []
    for i in range(240):
        scope = SCOPES[i % 2]
        at = T0 + timedelta(days=i * 90 // 240, minutes=i)
        version = "v1" if i < 150 else "v2"
        rule = ("approve", "block", None, "escalate")[i % 4]
        verdict = {"approve": "yes", "block": "no", None: "review", "escalate": "review"}[rule]
        facts = None if i % 17 == 0 else {"amount": 100 + i % 9 * 10 + (300 if at.month == 3 else 0), "tier": i % 3}
        ds.append(decision(f"d{i:03d}", at=at, scope=scope, policy_version=version, verdict=verdict, rule=rule,
                           reason=("OK", "MARGIN")[i % 2], facts=facts))
        if i % 11 == 0:
            continue  # no outcome
        status = STATUSES[(i * 7) % 5] if i % 5 else "failed"
        os_.append(outcome(f"r{i:03d}a", f"d{i:03d}", status, at=at + timedelta(hours=1), scope=scope))
        if i % 4 == 1:  # a tie of two statuses: receipt id b wins over a, whatever the statuses' order
            tied = "cancelled" if i % 8 == 1 else "succeeded"
            os_.append(outcome(f"r{i:03d}b", f"d{i:03d}", tied, at=at + timedelta(hours=1), scope=scope))
        if i % 6 == 2:  # a tie of one status
            os_.append(outcome(f"r{i:03d}0", f"d{i:03d}", status, at=at + timedelta(hours=1), scope=scope))
        if i % 9 == 3:  # a later record in another month's partition
            os_.append(outcome(f"r{i:03d}c", f"d{i:03d}", "reverted", at=at + timedelta(days=45), scope=scope))
    # a decision of another policy, with an outcome in the same partitions
    ds.append(decision("other_1", at=T0, policy_id="other"))
    os_.append(outcome("r_other", "other_1", "failed", at=T0 + timedelta(hours=2)))
    return ds, os_


def _empty_partitions(root: Path) -> None:
    """A decisions and an outcomes file of 0 rows in a month nothing else is in."""
    for table in ("decisions", "outcomes"):
        folder = root / table / "scope=tenant_b" / "month=2025-12"
        folder.mkdir(parents=True)
        pq.write_table(TABLES[table].empty_table(), folder / "part-0.parquet")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("rows") / "ds"
    ds, os_ = _ledger()
    write_dataset(root, ds, os_)
    _empty_partitions(root)
    typed = [d for d in ds if d["decision_id"] != "d005"]  # one decision the facts table lacks: from its JSON
    write_facts(root, pa.table({name: [d[name] for d in typed] for name in
                                ("decision_id", "facts_json", "scope", "month", "policy_id", "created_at", "verdict",
                                 "application_verdict", "action", "reason_code", "matched_rule_id")}), "000001-0000")
    write_listed_manifest(root, {"dataset_schema_version": DATASET_SCHEMA_VERSION, "runs": 1, "synthetic": True})
    rebuild_rollups(str(root), signer=None)
    return root


def _reports(frames) -> dict:
    return {
        "effectiveness": effectiveness_report(frames, POLICY, EVERY),
        "anomalies": anomaly_report(frames, POLICY, EVERY),
        "benchmarks": benchmark_report(frames, POLICY, EVERY, own_scope=SCOPES[0], opted_in=set(SCOPES)),
        "confidence": confidence_report(frames, POLICY, EVERY),
    }


@pytest.mark.parametrize("view", [{}, {"scopes": ["tenant_b"]}, {"policy_version": "v2"}])
def test_reports_from_rows_equal_reports_from_rollups(dataset, view):
    frames = from_dataset(dataset, policy_id=POLICY, limit=None, **view)
    assert frames.rollup is not None
    from_rollups = _reports(frames)
    from_rows = _reports(replace(frames, rollup=None))
    assert from_rows == from_rollups  # hashes included
    sample = from_rows["effectiveness"]["sample"]
    assert sample["decisions_considered"] and sample["decisions_with_outcome"] < sample["decisions_considered"]
    assert from_rows["effectiveness"]["health"]["anomalies"] in ("investigate", "monitor")
    assert from_rows["anomalies"]["anomaly_count"] and all(a["decision_ids"] for a in from_rows["anomalies"]["anomalies"])


@pytest.mark.parametrize("view", [{}, {"scopes": ["tenant_b"]}, {"policy_version": "v2"}])
def test_a_read_with_the_rollups_set_aside_gives_the_same_reports(dataset, view):
    """`from_dataset(…, rollups=False)`: no rollup view (the rollups neither read nor checked),
    the facts table matched to the decisions as for a dataset without rollups, and the same
    reports as from the rollups, hashes included."""
    frames = from_dataset(dataset, policy_id=POLICY, limit=None, rollups=False, **view)
    assert frames.rollup is None and frames.facts is not None
    assert _reports(frames) == _reports(from_dataset(dataset, policy_id=POLICY, limit=None, **view))


def test_reports_from_rows_equal_the_sorting_reference(dataset, monkeypatch):
    """The same reports with the latest outcome taken by the sort (`latest_outcomes`) and the
    health from the anomaly state with its evidence: the figures the rows gave before."""
    frames = replace(from_dataset(dataset, policy_id=POLICY, limit=None), rollup=None)
    now = _reports(frames)
    reference = common.with_latest_outcome
    monkeypatch.setattr(common, "latest_rows", lambda rows, outcomes: reference(rows.lazy(), outcomes).collect())
    monkeypatch.setattr(anomaly_engine, "latest_rows", common.latest_rows)
    full = anomaly_engine.partial
    monkeypatch.setattr(anomaly_engine, "partial", lambda *a, evidence=True, **k: full(*a, **k))
    assert _reports(frames) == now


def test_the_facts_are_matched_to_the_decisions_only_when_a_report_reads_them(dataset, monkeypatch):
    """From rows, the facts table's match to the decisions (for a whole history, a count of each:
    a read of every decision) is made the first time `Frames.facts` is read, once: benchmarks and
    confidence never read the facts and never pay for it; effectiveness (its health) and
    anomalies do, and both reports are the ones of a dataset read without the deferral."""
    import workbench.dataset.load as load

    calls = []
    real = load.facts_rows_of
    monkeypatch.setattr(load, "facts_rows_of", lambda *a, **k: calls.append(k) or real(*a, **k))
    frames = from_dataset(dataset, policy_id=POLICY, limit=None, rollups=False)
    benchmark_report(frames, POLICY, EVERY, own_scope=SCOPES[0], opted_in=set(SCOPES))
    confidence_report(frames, POLICY, EVERY)
    assert calls == []
    effectiveness = effectiveness_report(frames, POLICY, EVERY)
    anomalies = anomaly_report(frames, POLICY, EVERY)
    assert calls == [{"every_decision": True}]  # once, for the whole history
    assert frames.facts is frames.facts
    eager = replace(frames, facts_of=real(frames.decisions, load.scan_facts(dataset, POLICY), every_decision=True))
    assert eager.facts is eager.facts_of
    assert (effectiveness, anomalies) == (effectiveness_report(eager, POLICY, EVERY), anomaly_report(eager, POLICY, EVERY))
    scoped = from_dataset(dataset, policy_id=POLICY, limit=None, rollups=False, policy_version="v2")
    anomaly_report(scoped, POLICY, EVERY)
    assert calls[-1] == {"every_decision": False}  # one version: matched by decision id


def test_two_frames_match_their_facts_at_the_same_time():
    """A first read of one selection's facts (a count of every decision, seconds at 10M) does not
    hold up the first read of another's: the workbench serves sessions on threads."""
    import threading

    import polars as pl

    from workbench.dataset.load import Frames

    empty = pl.LazyFrame({"decision_id": []}, schema={"decision_id": pl.String})
    started, released = threading.Event(), threading.Event()
    waited = {}

    def slow():
        started.set()
        waited["released"] = released.wait(5)
        return empty

    def quick():
        released.set()
        return empty

    first, second = Frames(empty, empty, slow), Frames(empty, empty, quick)
    reader = threading.Thread(target=lambda: first.facts)
    reader.start()
    assert started.wait(5)
    assert second.facts is empty  # computed while the first is still being matched
    reader.join(10)
    assert waited == {"released": True}
    assert first.facts is empty and first.facts is first.facts
