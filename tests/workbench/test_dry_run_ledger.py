"""A dry-run over the live ledger: decisions made through the real API, replayed under a draft."""

from __future__ import annotations

import copy

from gate.ledger import Ledger
from workbench.migration import DryRunError, dry_run
from workbench.migration.sweep import sweep

NOW = "2026-11-22T00:00:00.000Z"


def test_dry_run_reads_the_live_ledger(client, api_key, sample_request, gate_env, backend):
    inputs = [
        {"discount_percent": 15, "margin_percent": 31, "owner_approved": True, "account_tier": "annual"},
        {"discount_percent": 22, "margin_percent": 31, "owner_approved": True, "account_tier": "annual"},
        {"discount_percent": 30, "margin_percent": 31, "owner_approved": True, "account_tier": "annual"},
        {"discount_percent": 15, "margin_percent": 18, "owner_approved": True, "account_tier": "annual"},
        {"discount_percent": 15, "margin_percent": 31, "owner_approved": False},
        {"discount_percent": 18, "margin_percent": 31, "owner_approved": True, "account_tier": "enterprise"},
    ]
    records = []
    for facts in inputs:
        body = copy.deepcopy(sample_request)
        body["context"]["inputs"] = facts
        response = client.post("/api/decide", json=body, headers={"x-api-key": api_key})
        assert response.status_code == 200, response.json
        records.append(response.json)
    failed = records[5]
    client.post(f"/api/decision/{failed['decision_id']}/outcome", headers={"x-api-key": api_key},
                json={"outcome_status": "failed"})
    draft = copy.deepcopy(sample_request["rulebook"])
    draft["version"] = "2026-12-01"
    draft["rules"][0]["condition"]["value"] = 16  # block discounts above 16%
    ledger = Ledger(gate_env["GATE_DATABASE_URL"])
    try:
        run = dry_run(draft, "pricing_exception", ledger=ledger, created_at=NOW)
        result = run.result
        assert result["decisions_total"] == 6 and result["decisions_unreplayable"] == 0
        moved = {(t["from"], t["to"]): t["count"] for t in result["transitions"] if t["count"]}
        # 22% (review by default: not within 20%) and 18% enterprise (yes) now hit the ceiling.
        assert moved[("yes", "no")] == 1 and moved[("review", "no")] == 1
        assert result["outcomes"]["caught_failures"] == 1
        assert result["source"]["kind"] == "ledger" and len(result["source"]["hash"]) == 64
        assert "password" not in result["source"]["location"]
        scoped = dry_run(draft, "pricing_exception", scope="tenant_a", ledger=ledger, created_at=NOW).result
        assert scoped["transitions"] == result["transitions"]
        try:
            dry_run(draft, "pricing_exception", scope="tenant_b", ledger=ledger, created_at=NOW)
            raise AssertionError("an empty history must be refused")
        except DryRunError as error:
            assert error.code == "HISTORY_EMPTY"
        # The threshold sweep reads the same live history: at 16 its approvals are the dry-run's.
        swept = sweep(draft, "pricing_exception", ("block_deep_discount", "discount_percent", 0), [16, 40],
                      ledger=ledger)
        assert swept["decisions_replayed"] == 6
        approvals = {(t["from"], t["to"]): t["count"] for t in result["transitions"] if t["to"] == "yes"}
        assert swept["points"][0]["approvals"]["count"] == sum(approvals.values())
    finally:
        ledger.dispose()


def test_a_scoped_dry_run_over_the_ledger_reads_only_its_scope(client, issue_key, sample_request, gate_env, backend):
    """The ledger is read for every scope, then cut to the asked scope: its decisions, replay
    rows and outcomes only, and the history names that scope."""
    keys = {scope: issue_key(scope=scope)["api_key"] for scope in ("tenant_a", "tenant_b")}
    plan = [("tenant_a", 18, "enterprise", "failed"), ("tenant_a", 15, "annual", None),
            ("tenant_b", 22, "annual", None), ("tenant_b", 15, "annual", "succeeded"), ("tenant_b", 30, "annual", None)]
    for scope, discount, tier, status in plan:
        body = copy.deepcopy(sample_request)
        body["context"]["inputs"] = {"discount_percent": discount, "margin_percent": 31, "owner_approved": True,
                                     "account_tier": tier}
        response = client.post("/api/decide", json=body, headers={"x-api-key": keys[scope]})
        assert response.status_code == 200, response.json
        if status:
            client.post(f"/api/decision/{response.json['decision_id']}/outcome", headers={"x-api-key": keys[scope]},
                        json={"outcome_status": status})
    draft = copy.deepcopy(sample_request["rulebook"])
    draft["version"] = "2026-12-01"
    draft["rules"][0]["condition"]["value"] = 16  # block discounts above 16%
    ledger = Ledger(gate_env["GATE_DATABASE_URL"])
    try:
        whole = dry_run(draft, "pricing_exception", ledger=ledger, created_at=NOW)
        run = dry_run(draft, "pricing_exception", scope="tenant_b", ledger=ledger, created_at=NOW)
    finally:
        ledger.dispose()
    assert (whole.history.scope, run.history.scope, run.result["scope"]) == (None, "tenant_b", "tenant_b")
    assert (whole.result["decisions_total"], run.result["decisions_total"]) == (5, 3)
    assert run.history.decisions.collect().height == 3 and run.history.base.collect().height == 3
    assert sorted(run.history.outcomes.collect()["status"].to_list()) == ["succeeded"]
    assert sum(t["count"] for t in run.result["transitions"]) == 3
    assert whole.result["outcomes"]["caught_failures"] == 1 and run.result["outcomes"]["caught_failures"] == 0
