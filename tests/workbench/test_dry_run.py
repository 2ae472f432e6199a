"""The dry-run library: results equal a one-by-one scalar replay; bad input; manifest and signature."""

from __future__ import annotations

import copy
import json
from collections import Counter
from datetime import timedelta

import jsonschema
import pytest
from dryrun_support import decide, rule, rulebook, write_dataset
from manifest_support import write_listed_manifest

from gate.keys.anchors import TrustAnchors
from gate.keys.signing import (
    Ed25519Key,
    Ed25519ReceiptSigner,
    HmacKey,
    HmacReceiptSigner,
)
from gate.protocol.canonical import sha256_bytes_hex, sha256_hex
from gate.rulebook import get_evaluator
from workbench.migration import (
    DryRunError,
    dry_run,
    sign_manifest,
    verify_manifest,
    write_dry_run,
)
from workbench.migration.manifest import migration_schema

NOW = "2026-11-22T00:00:00.000Z"
OLD = rulebook([rule("big", {"field": "amount", "operator": "gt", "value": 100}, "no", "TOO_BIG"),
                rule("vip", {"field": "tier", "operator": "eq", "value": "vip"}, "yes", "VIP", priority=5),
                rule("small", {"field": "amount", "operator": "lte", "value": 20}, "yes", "SMALL")])
DRAFT = rulebook([rule("big", {"field": "amount", "operator": "gt", "value": 50}, "no", "TOO_BIG"),
                  rule("vip", {"all": [{"field": "tier", "operator": "eq", "value": "vip"},
                                       {"field": "flags", "operator": "not_contains", "value": "fraud"}]},
                       "yes", "VIP", priority=5),
                  rule("small", {"field": "amount", "operator": "lte", "value": 30}, "yes", "SMALL"),
                  rule("ghost", {"field": "never.there", "operator": "exists"}, "no", "GHOST", priority=-5)],
                 version="2.0.0")
FACTS = [{"amount": a, "tier": t, "flags": f} for a in (10, 25, 60, 120) for t in ("vip", "std")
         for f in ([], ["fraud"])] + [{"amount": "70"}, {"amount": 2**60, "tier": "std"}, {"amount": True}, {}]


@pytest.fixture
def dataset(tmp_path):
    decisions = decide(OLD, FACTS, no_facts=(3, 7)) + decide(OLD, FACTS[:6], scope="other", prefix="o")
    statuses = ["failed", "succeeded", "reverted", "pending", "cancelled", None]
    outcomes = []
    for index, row in enumerate(decisions):
        status = statuses[index % len(statuses)]
        if status:
            outcomes.append({"decision_id": row["decision_id"], "status": "succeeded", "receipt_id": f"a{index}",
                             "reported_at": row["created_at"] + timedelta(days=1)})
            # A later outcome supersedes the first one: the latest counts.
            outcomes.append({"decision_id": row["decision_id"], "status": status, "receipt_id": f"b{index}",
                             "reported_at": row["created_at"] + timedelta(days=2)})
    root = write_dataset(tmp_path / "ds", decisions, outcomes)
    return root, decisions, outcomes


def reference(decisions, outcomes, draft, scope=None):
    """The dry-run's headline numbers by replaying each decision with the scalar evaluator."""
    evaluator = get_evaluator(draft, sha256_hex(draft))
    latest = {}
    for o in sorted(outcomes, key=lambda o: (o["reported_at"], o["receipt_id"])):
        latest[o["decision_id"]] = o["status"]
    classes = {"succeeded": "success", "failed": "failure", "reverted": "failure", "cancelled": "excluded",
               "pending": "open", "review": "open"}
    transitions, rules, reasons, outcome_cells = Counter(), Counter(), Counter(), Counter()
    unreplayable = 0
    for row in decisions:
        if scope and row["scope"] != scope:
            continue
        if row["facts_json"] is None:
            unreplayable += 1
            continue
        e = evaluator.evaluate(json.loads(row["facts_json"]))
        transitions[(row["verdict"], e.decision)] += 1
        rules[(row["matched_rule_id"], e.matched_rule_id)] += 1
        reasons[e.reason_code] += 1
        if row["verdict"] != e.decision:
            known = "unobservable" if row["verdict"] == "no" else classes.get(latest.get(row["decision_id"]), "none")
            outcome_cells[(row["verdict"], e.decision, known)] += 1
    return transitions, rules, reasons, outcome_cells, unreplayable


def test_result_equals_a_one_by_one_scalar_replay(dataset):
    root, decisions, outcomes = dataset
    result = dry_run(DRAFT, "refunds", dataset=root, created_at=NOW).result
    transitions, rules, reasons, outcome_cells, unreplayable = reference(decisions, outcomes, DRAFT)
    assert {(t["from"], t["to"]): t["count"] for t in result["transitions"] if t["count"]} == dict(transitions)
    assert len(result["transitions"]) == 9
    assert Counter({(c["old_rule"], c["new_rule"]): 0 for c in result["rule_transitions"]}) + Counter(
        {(c["old_rule"], c["new_rule"]): c["count"] for c in result["rule_transitions"]}) == rules
    assert {r["reason_code"]: r["after"] for r in result["drift_by_reason"] if r["after"]} == dict(reasons)
    for cell in result["outcomes"]["by_transition"]:
        for known in ("success", "failure", "excluded", "open", "none", "unobservable"):
            assert cell[known] == outcome_cells[(cell["from"], cell["to"], known)], (cell, known)
    assert result["decisions_unreplayable"] == unreplayable == 2
    assert result["decisions_total"] == len(decisions)
    assert result["decisions_evaluated"] == sum(transitions.values())
    assert result["decisions_changed"] == sum(v for (a, b), v in transitions.items() if a != b)
    assert result["decisions_scalar"] == 1  # the integer beyond 2^53 goes to the scalar evaluator
    assert result["outcomes"]["caught_failures"] == sum(
        v for (a, b, k), v in outcome_cells.items() if b == "no" and a in ("yes", "review") and k == "failure")
    assert result["rules_never_fired_in_history"] == ["ghost"]
    assert "ghost" in result["rules_never_firing_under_draft"]
    assert result["review_load"]["before"] == sum(v for (a, _), v in transitions.items() if a == "review")
    assert result["review_load"]["after"] == sum(v for (_, b), v in transitions.items() if b == "review")
    assert result["flips"]["count"] == result["decisions_changed"] == len(result["flips"]["listed"])


def test_scope_and_reproducibility(dataset):
    root, decisions, outcomes = dataset
    first = dry_run(DRAFT, "refunds", scope="other", dataset=root, created_at=NOW)
    second = dry_run(copy.deepcopy(DRAFT), "refunds", scope="other", dataset=root, created_at="2027-01-01T00:00:00.000Z")
    transitions, *_ = reference(decisions, outcomes, DRAFT, scope="other")
    assert first.result["decisions_total"] == 6
    assert {(t["from"], t["to"]): t["count"] for t in first.result["transitions"] if t["count"]} == dict(transitions)
    assert first.manifest["dry_run"]["result_hash"] == second.manifest["dry_run"]["result_hash"]
    assert first.manifest["dry_run"] == second.manifest["dry_run"]


def test_manifest_is_schema_valid_and_names_draft_and_history(dataset):
    root, _, _ = dataset
    run = dry_run(DRAFT, "refunds", dataset=root, created_at=NOW)
    manifest = sign_manifest(run.manifest, Ed25519ReceiptSigner(Ed25519Key.generate()))
    jsonschema.Draft202012Validator(migration_schema()).validate(manifest)
    assert manifest["schema_version"] == "rulebook_migration_v1"
    assert manifest["to"]["rulebook_hash"] == sha256_hex(DRAFT)
    assert manifest["dry_run"]["source"]["hash"] == sha256_bytes_hex((root / "manifest.json").read_bytes())
    assert manifest["expected_drift"]["policy"] == "requires_approval"
    assert "verdict" in manifest["expected_drift"]["fields"] and manifest["approval"]["status"] == "pending"
    same = dry_run(OLD | {"version": "1.0.1"}, "refunds", dataset=root, created_at=NOW).manifest
    assert same["expected_drift"] == {"policy": "none", "fields": []} and same["approval"]["status"] == "not_required"
    assert same["dry_run"]["decisions_changed"] == 0


@pytest.mark.parametrize("signer_kind", ["ed25519", "hmac"])
def test_signature_verifies_and_every_tamper_is_caught(dataset, signer_kind):
    root, _, _ = dataset
    if signer_kind == "ed25519":
        key = Ed25519Key.generate()
        signer, anchors = Ed25519ReceiptSigner(key), TrustAnchors.from_public_key_pem(key.public_key_pem, key.key_id)
        other = TrustAnchors.from_public_key_pem(Ed25519Key.generate().public_key_pem)
    else:
        key = HmacKey("hmac-receipt-v1", b"s" * 32)
        signer, anchors = HmacReceiptSigner(key), TrustAnchors.from_hmac_key(key)
        other = TrustAnchors.from_hmac_key(HmacKey("hmac-receipt-v1", b"t" * 32))
    manifest = sign_manifest(dry_run(DRAFT, "refunds", dataset=root, created_at=NOW).manifest, signer)
    raw = (root / "manifest.json").read_bytes()
    good = verify_manifest(manifest, anchors, draft=DRAFT, dataset_manifest=raw)
    assert good["valid"], good
    assert not verify_manifest(manifest, other)["valid"]
    assert not verify_manifest(manifest, anchors, draft=OLD)["checks"]["draft_hash"]
    assert not verify_manifest(manifest, anchors, dataset_manifest=raw + b" ")["checks"]["dataset_hash"]
    tampers = [
        lambda m: m["dry_run"].__setitem__("decisions_changed", m["dry_run"]["decisions_changed"] + 1),
        lambda m: m["dry_run"]["transitions"][0].__setitem__("count", 10**6),
        lambda m: m["to"].__setitem__("rulebook_hash", "0" * 64),
        lambda m: m.__setitem__("status", "approved"),
        lambda m: m["signature"].__setitem__("key_id", "someone-else"),
        lambda m: m.pop("signature"),
    ]
    for tamper in tampers:
        changed = copy.deepcopy(manifest)
        tamper(changed)
        assert not verify_manifest(changed, anchors)["valid"]


def test_writes_the_three_files_and_html_is_offline(dataset, tmp_path):
    root, _, _ = dataset
    run = dry_run(DRAFT, "refunds", dataset=root, created_at=NOW)
    written = write_dry_run(tmp_path / "out", run.manifest, Ed25519ReceiptSigner(Ed25519Key.generate()))
    assert json.loads((tmp_path / "out" / "migration.json").read_text()) == written
    html = (tmp_path / "out" / "report.html").read_text()
    assert html.count("<svg") == 4 and "<script" not in html and "http://" not in html.replace(
        'xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in html
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert written["migration_hash"] in markdown and "Could not replay" in markdown


def test_bad_input_is_refused_with_a_clear_error(dataset, tmp_path):
    root, _, _ = dataset
    invalid = copy.deepcopy(DRAFT)
    invalid["rules"][1]["condition"]["all"][0]["operator"] = "matches"
    invalid["rules"][0]["script"] = "x"
    with pytest.raises(DryRunError) as caught:
        dry_run(invalid, "refunds", dataset=root, created_at=NOW)
    assert caught.value.code == "DRAFT_INVALID"
    fields = [e["field"] for e in caught.value.errors]
    assert fields == ["rulebook.rules[0].script", "rulebook.rules[1].condition.all[0].operator"]
    with pytest.raises(DryRunError, match="not 'loans'") as caught:
        dry_run(DRAFT, "loans", dataset=root, created_at=NOW)
    assert caught.value.code == "DRAFT_RULEBOOK_MISMATCH"
    with pytest.raises(DryRunError) as caught:
        dry_run(DRAFT | {"rulebook_id": "loans"}, "loans", dataset=root, created_at=NOW)
    assert caught.value.code == "RULEBOOK_UNKNOWN"
    with pytest.raises(DryRunError) as caught:
        dry_run(DRAFT, "refunds", scope="nobody", dataset=root, created_at=NOW)
    assert caught.value.code == "HISTORY_EMPTY"
    (root / "manifest.json").write_text(json.dumps({"dataset_schema_version": "decision_dataset_v0"}))
    with pytest.raises(DryRunError, match="decision_dataset_v0") as caught:
        dry_run(DRAFT, "refunds", dataset=root, created_at=NOW)
    assert caught.value.code == "DATASET_INVALID"
    with pytest.raises(DryRunError) as caught:
        dry_run(DRAFT, "refunds", dataset=tmp_path / "nothing", created_at=NOW)
    assert caught.value.code == "DATASET_INVALID"


def test_a_dataset_without_facts_files_replays_every_decision_through_the_scalar_evaluator(tmp_path):
    decisions = decide(OLD, FACTS, no_facts=(0,))
    root = write_dataset(tmp_path / "ds", decisions, [], facts=False)
    result = dry_run(DRAFT, "refunds", dataset=root, created_at=NOW).result
    transitions, *_ = reference(decisions, [], DRAFT)
    assert result["decisions_scalar"] == len(decisions) - 1 and result["decisions_unreplayable"] == 1
    assert {(t["from"], t["to"]): t["count"] for t in result["transitions"] if t["count"]} == dict(transitions)


def test_the_migration_schema_is_published(client):
    from workbench.migration.manifest import SCHEMA_FILE

    response = client.get("/schemas/rulebook-migration-v1.schema.json")
    assert response.status_code == 200 and response.data == SCHEMA_FILE.read_bytes()
    assert client.get("/docs.json").json["schemas"]["rulebook_migration_v1"] == "/schemas/rulebook-migration-v1.schema.json"


def test_facts_files_without_the_stored_outcome_are_joined_with_the_decisions(dataset, tmp_path):
    """Facts files of an older writer (typed columns only) still replay exactly."""
    import pyarrow.parquet as pq

    root, decisions, outcomes = dataset
    for path in (root / "facts").rglob("*.parquet"):
        table = pq.read_table(path)
        pq.write_table(table.drop_columns(["facts_json", "created_at", "verdict", "application_verdict", "action",
                                           "reason_code", "matched_rule_id"]), path)
    base = {k: v for k, v in json.loads((root / "manifest.json").read_text()).items() if k not in ("tables", "facts")}
    write_listed_manifest(root, base)  # the older writer listed its files as they are
    result = dry_run(DRAFT, "refunds", dataset=root, created_at=NOW).result
    transitions, *_ = reference(decisions, outcomes, DRAFT)
    assert {(t["from"], t["to"]): t["count"] for t in result["transitions"] if t["count"]} == dict(transitions)
    assert result["decisions_scalar"] == 1 and result["decisions_unreplayable"] == 2
