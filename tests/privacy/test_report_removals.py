"""Issue 67, item 3, on SQLite and PostgreSQL: the policy reports over the live ledger say how many
decisions of their window had their inputs removed, and by what (`inputs_removed`, sealed with
the report), and count them otherwise as before: a removal keeps the verdict and the outcomes.
Asked over HTTP and from `gate report` as a subprocess; a window without the removed decisions
says 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gate.clock import FixedClock
from gate.protocol.report_envelopes import verify

pytestmark = pytest.mark.usefixtures("backend")
GATE = str(Path(sys.executable).with_name("gate"))
POLICY = "pricing_exception"
BASE = f"/api/decision/policies/{POLICY}"
HASHES = {"effectiveness": "effectiveness_hash", "anomalies": "anomaly_hash", "confidence": "confidence_hash"}


def _seeded(client, key: str, sample: dict) -> list[dict]:
    """Four decisions, oldest first, each with an outcome."""
    records = []
    for status in ("succeeded", "failed", "succeeded", "succeeded"):
        answer = client.post("/api/decide", json=sample, headers={"x-api-key": key})
        assert answer.status_code == 200, answer.json
        record = answer.json
        done = client.post(f"/api/decision/{record['decision_id']}/outcome", headers={"x-api-key": key},
                           json={"outcome_status": status, "action_executed": True,
                                 "decision_record_hash": record["record_hash"]})
        assert done.status_code == 201, done.json
        records.append(record)
    return records


def _report(client, key: str, kind: str, query: str = "") -> dict:
    answer = client.get(f"{BASE}/{kind}{query}", headers={"x-api-key": key})
    assert answer.status_code == 200, answer.json
    report = answer.json
    assert verify("anomaly" if kind == "anomalies" else kind, report)  # the member is inside what is sealed
    return report


def _rest(report: dict, kind: str) -> dict:
    return {name: value for name, value in report.items() if name not in (HASHES[kind], "inputs_removed")}


def _gate(args: list[str], env: dict) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GATE, *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=120)


def test_reports_state_the_removed_decisions_of_their_window_by_cause(make_app, issue_key, sample_request,
                                                                      gate_env):
    from gate.services.removal import InputRemoval

    app = make_app()
    client = app.test_client()
    key = issue_key("tenant_a")["api_key"]
    records = _seeded(client, key, sample_request)
    before = {kind: _report(client, key, kind) for kind in HASHES}
    for kind in HASHES:
        assert before[kind]["inputs_removed"] == {"count": 0, "by": {}}

    removal = InputRemoval(app.extensions["gate"].ledger, FixedClock(datetime.now(UTC)))
    old, older = records[1]["decision_id"], records[0]["decision_id"]
    assert removal.remove("tenant_a", [older], removal.cause("retention", "7 days")) == [older]
    assert removal.remove("tenant_a", [old], removal.cause("erasure", "governance event 3")) == [old]

    after = {kind: _report(client, key, kind) for kind in HASHES}
    for kind in HASHES:
        assert after[kind]["inputs_removed"] == {"count": 2, "by": {"erasure": 1, "retention": 1}}, kind
    # verdicts and outcomes still count: every other figure is as before, never a change; but the
    # action is an input too, so the figures kept per action (the confidence buckets, the anomaly
    # report's action segments) see the removed two as of no action, as many rows as `inputs_removed` says
    assert _rest(after["effectiveness"], "effectiveness") == _rest(before["effectiveness"], "effectiveness")
    confidence, earlier = _rest(after["confidence"], "confidence"), _rest(before["confidence"], "confidence")
    assert [b["action"] for b in confidence.pop("buckets")] == [None, "apply_discount"]
    assert [b["action"] for b in earlier.pop("buckets")] == ["apply_discount"]
    assert confidence == earlier
    anomalies, earlier = _rest(after["anomalies"], "anomalies"), _rest(before["anomalies"], "anomalies")
    assert anomalies["checks"]["segments"].pop("action") == earlier["checks"]["segments"].pop("action") + 1
    assert anomalies == earlier
    assert after["effectiveness"]["sample"]["decisions_considered"] == 4
    assert after["effectiveness"]["sample"]["latest_outcome_counts"] == {"failed": 1, "succeeded": 3}

    # the newest two decisions only: none of them was removed
    recent = _report(client, key, "effectiveness", "?limit=2")
    assert recent["inputs_removed"] == {"count": 0, "by": {}}
    assert recent["sample"]["decisions_considered"] == 2
    # another scope's report does not count this scope's removals
    other = issue_key("tenant_b")["api_key"]
    _seeded(client, other, sample_request)
    assert _report(client, other, "anomalies")["inputs_removed"] == {"count": 0, "by": {}}
    # nor does a cross-scope read (benchmarks) count its cohort's
    from workbench.dataset.load import from_ledger

    ledger = app.extensions["gate"].ledger
    assert from_ledger(ledger, "tenant_b", POLICY, limit=10, cohort_scopes=["tenant_a"]).removed == {}
    assert from_ledger(ledger, "tenant_a", POLICY, limit=10, cohort_scopes=["tenant_b"]).removed == \
        {"erasure": 1, "retention": 1}

    # `gate report` over the same ledger: the same sealed report, and a line of its text
    done = _gate(["report", "effectiveness", "--policy", POLICY, "--scope", "tenant_a", "--json"], gate_env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["inputs_removed"] == {"count": 2, "by": {"erasure": 1, "retention": 1}}
    assert json.loads(done.stdout)["effectiveness_hash"] == after["effectiveness"]["effectiveness_hash"]
    text = _gate(["report", "anomalies", "--policy", POLICY, "--scope", "tenant_a"], gate_env)
    assert text.returncode == 0, text.stderr
    assert "inputs removed: 2 decisions (erasure 1, retention 1)" in text.stdout
    window = _gate(["report", "anomalies", "--policy", POLICY, "--scope", "tenant_a", "--limit", "2", "--json"],
                   gate_env)
    assert window.returncode == 0, window.stderr
    assert json.loads(window.stdout)["inputs_removed"] == {"count": 0, "by": {}}


def test_a_report_over_a_dataset_states_no_cause(make_app, issue_key, sample_request, gate_env, tmp_path):
    """An exported dataset's rows carry no cause: its reports have no `inputs_removed` member."""
    from gate.services.removal import InputRemoval

    app = make_app()
    client = app.test_client()
    key = issue_key("tenant_a")["api_key"]
    records = _seeded(client, key, sample_request)
    removal = InputRemoval(app.extensions["gate"].ledger, FixedClock(datetime.now(UTC)))
    assert removal.remove("tenant_a", [records[0]["decision_id"]], removal.cause("retention", "7 days"))
    out = tmp_path / "dataset"
    exported = _gate(["export", "--out", str(out), "--settle-seconds", "0"], gate_env)
    assert exported.returncode == 0, exported.stderr
    done = _gate(["report", "effectiveness", "--policy", POLICY, "--dataset", str(out), "--json"], gate_env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert "inputs_removed" not in report and report["sample"]["decisions_considered"] == 4
