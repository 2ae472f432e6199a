"""Decide-time `decision_confidence` over HTTP on SQLite and PostgreSQL: absent before any
outcome, counted from the latest outcome of each similar decision, moved when a newer outcome
supersedes, exact under parallel outcome writes, signed, and mirrored in the headers."""

from __future__ import annotations

import copy
import json
import threading
from collections import Counter

import pytest
from sqlalchemy import select

from gate.ledger.tables import confidence_counters, lifecycle_receipts
from gate.protocol.confidence import ConfidenceCounts, confidence_block
from gate.receipts.values import OUTCOME_EFFECTIVENESS_CLASS

pytestmark = pytest.mark.usefixtures("backend")


def decide(client, api_key, request_body, **inputs):
    body = copy.deepcopy(request_body)
    body["context"]["inputs"].update(inputs)
    response = client.post("/api/decide", json=body, headers={"x-api-key": api_key})
    assert response.status_code == 200, response.json
    return response


def outcome(client, api_key, record, status):
    response = client.post(f"/api/decision/{record['decision_id']}/outcome",
                           json={"outcome_status": status, "action_executed": status != "cancelled",
                                 "decision_record_hash": record["record_hash"]},
                           headers={"x-api-key": api_key})
    assert response.status_code == 201, response.json
    return response.json["outcome"]


def test_no_block_until_the_scope_has_an_outcome_for_the_policy(client, api_key, sample_request):
    response = decide(client, api_key, sample_request)
    assert "decision_confidence" not in response.json and "confidence_hash" not in response.json
    # SIM118 does not apply: iterating werkzeug's Headers yields (name, value) pairs, not names.
    assert not [name for name in response.headers.keys() if name.lower().startswith("x-decision-confidence")]  # noqa: SIM118


def test_block_counts_similar_decisions_and_is_signed_and_mirrored(client, api_key, sample_request):
    approved = [decide(client, api_key, sample_request).json for _ in range(3)]
    blocked = decide(client, api_key, sample_request, discount_percent=40).json
    for record, status in zip(approved, ("succeeded", "failed", "pending"), strict=True):
        outcome(client, api_key, record, status)
    outcome(client, api_key, blocked, "succeeded")  # another verdict and action: not similar
    response = decide(client, api_key, sample_request)
    block = response.json["decision_confidence"]
    assert block == confidence_block(ConfidenceCounts(1, 1, 0, 0), policy_version="2026-11-01")
    assert block["similar_decisions"] == 2 and block["level"] == "insufficient_data"
    assert response.json["confidence_hash"] == block["confidence_hash"]
    assert response.headers["x-decision-confidence-score"] == str(block["score"])
    assert response.headers["x-decision-confidence-level"] == block["level"]
    assert response.headers["x-decision-confidence-hash"] == block["confidence_hash"]
    # The stored record carries the same signed block and verifies with the gate's keys.
    verified = client.post("/api/decision/verify", json={"record": response.json})
    assert verified.json["verified"] is True, verified.json
    assert verified.json["checks"]["confidence_signature"] is True
    assert verified.json["checks"]["confidence_hash"] is True
    # A blocked decision sees only the blocked bucket.
    other = decide(client, api_key, sample_request, discount_percent=50).json["decision_confidence"]
    assert other["based_on"]["successes"] == 1 and other["based_on"]["failures"] == 0
    # The minimal view keeps the block and its signature (spec "Response views").
    minimal = client.post("/api/decide", json=dict(sample_request, response_view="minimal"),
                          headers={"x-api-key": api_key}).json
    assert {"decision_confidence", "confidence_hash", "confidence_signature"} <= set(minimal)


def test_a_newer_outcome_moves_the_decision_to_its_new_class(client, api_key, sample_request):
    record = decide(client, api_key, sample_request).json
    outcome(client, api_key, record, "pending")
    assert decide(client, api_key, sample_request).json["decision_confidence"]["similar_decisions"] == 0
    outcome(client, api_key, record, "succeeded")
    assert decide(client, api_key, sample_request).json["decision_confidence"]["based_on"]["successes"] == 1
    outcome(client, api_key, record, "reverted")
    block = decide(client, api_key, sample_request).json["decision_confidence"]
    assert (block["based_on"]["successes"], block["based_on"]["failures"]) == (0, 1)
    outcome(client, api_key, record, "cancelled")  # excluded: no longer similar evidence
    assert decide(client, api_key, sample_request).json["decision_confidence"]["similar_decisions"] == 0


def test_another_scope_never_sees_the_counts(client, api_key, issue_key, sample_request):
    record = decide(client, api_key, sample_request).json
    outcome(client, api_key, record, "succeeded")
    other_key = issue_key(scope="tenant_b")["api_key"]
    assert "decision_confidence" not in decide(client, other_key, sample_request).json


def expected_counters(app):
    """Recompute every counter row from the stored outcomes (latest by reported_at, receipt_id)."""
    with app.extensions["gate"].ledger.engine.connect() as connection:
        rows = connection.execute(select(lifecycle_receipts).where(lifecycle_receipts.c.kind == "outcome")).mappings().all()
    latest = {}
    for row in rows:
        key = (row["reported_at"], row["receipt_id"])
        if row["decision_id"] not in latest or key > latest[row["decision_id"]][0]:
            latest[row["decision_id"]] = (key, json.loads(row["receipt_json"]))
    counts = Counter()
    for _, receipt in latest.values():
        effect = OUTCOME_EFFECTIVENESS_CLASS[receipt["outcome_status"]]
        for verdict, action, version in ((receipt["decision_verdict"], receipt["decision_action"], receipt["policy_version"]),
                                         (receipt["decision_verdict"], receipt["decision_action"], ""), ("", "", "")):
            counts[("tenant_a", receipt["policy_id"], verdict, action, version, effect)] += 1
    return +counts


def stored_counters(app):
    with app.extensions["gate"].ledger.engine.connect() as connection:
        rows = connection.execute(select(confidence_counters)).mappings().all()
    counts = Counter()
    for row in rows:
        for effect in ("success", "failure", "excluded", "open"):
            counts[(row["scope"], row["policy_id"], row["verdict"], row["action"], row["policy_version"], effect)] \
                += row[f"n_{effect}"]
    return +counts


def test_parallel_outcomes_keep_the_counters_exact(app, api_key, sample_request):
    client = app.test_client()
    records = [decide(client, api_key, sample_request, discount_percent=40 if i % 3 == 0 else 15).json
               for i in range(6)]
    statuses = ["succeeded", "failed", "pending", "reverted", "cancelled", "review"]
    errors = []

    def worker(index):
        local = app.test_client()
        try:
            for step in range(6):
                record = records[(index + step) % len(records)]
                outcome(local, api_key, record, statuses[(index * 7 + step) % len(statuses)])
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    expected = expected_counters(app)
    assert sum(n for key, n in expected.items() if key[2] == "") == len(records)
    assert stored_counters(app) == expected


def test_the_block_can_be_switched_off(make_app, api_key, sample_request):
    client = make_app().test_client()
    outcome(client, api_key, decide(client, api_key, sample_request).json, "succeeded")
    assert "decision_confidence" in decide(client, api_key, sample_request).json
    off = make_app(decide_confidence=False).test_client()
    response = decide(off, api_key, sample_request)
    assert "decision_confidence" not in response.json and "x-decision-confidence-score" not in response.headers
