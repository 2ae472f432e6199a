"""One test per compatibility rule of the spec's Versioning section (compatibility_policy_v1)."""

from __future__ import annotations

import copy
import json
from datetime import date

import pytest

from gate.protocol.canonical import sha256_hex
from gate.replay.golden import CORPUS_DIR, load_corpus, replay_fixture
from gate.replay.migration_check import check_migration
from gate.settings import Settings
from gate_cli.conformance import exit_code, run_conformance
from gate_cli.golden_build import build_corpus
from gate_cli.served_app import create_app
from tests.api.test_replay import decide
from tests.conftest import ROOT
from tests.fake_adapters import FakeRegistry, adapter_request

SCHEMAS = ROOT / "gate" / "schemas"


def _adapter_corpus(tmp_path, registry):
    items = [{"fixture_id": "refund-window-inside", "description": "20 days: inside the window",
              "request": adapter_request(100, 120)},
             {"fixture_id": "refund-window-edge", "description": "30 days: at the edge", "request": adapter_request(100, 130)}]
    build_corpus(items, tmp_path / "corpus", adapters=registry)
    return tmp_path / "corpus"


def _manifest(to_rulebook, compatibility_class, fields, status="approved"):
    return {"schema_version": "rulebook_migration_v1", "migration_id": "mig_test", "rulebook_id": to_rulebook["rulebook_id"],
            "status": status, "compatibility_class": compatibility_class,
            "to": {"rulebook_id": to_rulebook["rulebook_id"], "version": to_rulebook["version"],
                   "rulebook_hash": sha256_hex(to_rulebook)},
            "expected_drift": {"policy": "requires_approval" if fields else "none", "fields": fields},
            "approval": {"status": "approved" if status == "approved" else "pending"}}


def test_rule_1_historical_replay_never_reinterprets_with_the_current_evaluator_or_adapter(tmp_path):
    _, fixtures = load_corpus()
    fixture = fixtures[0]
    older = {**fixture.snapshot, "evaluator_version": "svc_rulebook_v0"}
    refused = replay_fixture(type(fixture)(fixture.fixture_id, fixture.description, fixture.request_text, older,
                                           dict(fixture.expected_record, evaluator_version="svc_rulebook_v0")))
    assert refused["error"]["code"] == "REPLAY_LINEAGE_UNAVAILABLE"
    assert refused["error"]["lineage_component"] == "evaluator"
    registry = FakeRegistry()
    corpus = _adapter_corpus(tmp_path, registry)
    _, adapter_fixtures = load_corpus(corpus)
    assert replay_fixture(adapter_fixtures[0], adapters=registry)["replay_status"] == "matched"
    registry.implementation_hash = "9" * 64  # the current adapter is another build
    refused = replay_fixture(adapter_fixtures[0], adapters=registry)
    assert refused["error"]["code"] == "REPLAY_LINEAGE_MISMATCH"
    assert refused["error"]["field"] == "trusted_adapter.implementation_hash"


def test_rule_2_an_id_and_version_never_rebind_to_another_hash(app, client, api_key, sample_request):
    record = decide(client, api_key, sample_request)
    changed = copy.deepcopy(sample_request)
    changed["rulebook"]["rules"][0]["condition"]["value"] = 10
    response = client.post("/api/decide", json=changed, headers={"x-api-key": api_key})
    assert response.status_code == 409 and response.json["error"] == "RULEBOOK_VERSION_CONFLICT"
    assert response.json["registered_hash"] == record["rulebook"]["hash"]
    from gate.errors import RulebookVersionConflict

    with pytest.raises(RulebookVersionConflict):
        app.extensions["gate"].service.register_rulebook("tenant_a", changed["rulebook"])
    replayed = client.post(f"/api/decision/{record['decision_id']}/replay", headers={"x-api-key": api_key}).json
    assert replayed["replay_status"] == "matched"
    assert replayed["replay_against"]["rulebook"]["hash"] == record["rulebook"]["hash"]


def test_rule_3_an_adapter_change_needs_an_explicit_migration(tmp_path):
    registry = FakeRegistry()
    corpus = _adapter_corpus(tmp_path, registry)
    _, fixtures = load_corpus(corpus)
    rulebook = fixtures[0].snapshot["body"]
    registry.implementation_hash, registry.bias = "9" * 64, 1  # new build: one more day counted
    undeclared = check_migration(_manifest(rulebook, "rulebook", []), corpus=corpus, adapters=registry)
    assert undeclared["ok"] and not undeclared["gate_passed"]
    assert any("adapter lineage changed without a migration" in p for p in undeclared["problems"])
    fields = ["verdict", "application_verdict", "action", "reason_code", "matched_rule_id"]  # 30 → 31 days: denied
    declared = check_migration(_manifest(rulebook, "adapter", fields), corpus=corpus, adapters=registry)
    assert declared["gate_passed"], declared["problems"]
    edge = next(f for f in declared["fixtures"] if f["fixture_id"] == "refund-window-edge")
    assert edge["lineage_changed"] == "adapter" and edge["drift_fields"] == fields
    unapproved = check_migration(_manifest(rulebook, "adapter", fields, status="proposed"), corpus=corpus,
                                 adapters=registry)
    assert not unapproved["gate_passed"]


STABLE_RECORD_FIELDS = (  # the spec's Decision Record table (rulebook mode, signing configured)
    "decision_record_version", "c", "v", "verdict", "application_verdict", "reason_code", "matched_rule_id",
    "rulebook", "evaluator_version", "rulebook_contract", "runtime_binding", "rulebook_registry",
    "rulebook_attestation", "request_id", "decision_id", "evidence", "evidence_manifest", "action",
    "action_binding", "policy_id", "policy_version", "policy_hash", "source_hash", "policy_bundle",
    "policy_bundle_hash", "input_hash", "output_hash", "record_hash", "receipt_hash", "receipt_key_id",
    "receipt_signature", "receipt_signature_algorithm", "receipt_public_key_fingerprint", "replay_url",
    "verify_url", "integrity", "created_at",
)


def _keys(value, prefix=""):
    """Every member path of nested objects (array elements are not walked: their shape is theirs)."""
    if not isinstance(value, dict):
        return set()
    paths = set()
    for key, item in value.items():
        paths.add(prefix + key)
        paths |= _keys(item, prefix + key + ".")
    return paths


def test_rule_4_responses_may_add_fields_but_never_remove_or_rename_stable_ones(client, api_key):
    _, fixtures = load_corpus()
    for fixture in fixtures:
        fresh = decide(client, api_key, json.loads(fixture.request_text))
        missing = _keys(fixture.expected_record) - _keys(fresh)
        assert not missing, (fixture.fixture_id, sorted(missing))
        for name in ("verdict", "application_verdict", "action", "reason_code", "matched_rule_id", "evidence",
                     "status", "policy_hash"):
            assert fresh.get(name) == fixture.expected_record.get(name), (fixture.fixture_id, name)
        assert set(STABLE_RECORD_FIELDS) <= set(fresh), sorted(set(STABLE_RECORD_FIELDS) - set(fresh))


def test_rule_5_public_contract_artifacts_are_published_byte_for_byte(client):
    docs = client.get("/docs.json").json["schemas"]
    for name, path in (("rulebook_v1", "rulebook-v1.schema.json"), ("conformance_index", "conformance/index.json"),
                       ("golden_replay_corpus", "golden-replay/index.json"),
                       ("rulebook_migration_v1", "rulebook-migration-v1.schema.json")):
        assert docs[name] == "/schemas/" + path
        response = client.get(docs[name])
        assert response.status_code == 200 and response.data == (SCHEMAS / path).read_bytes(), name
    conformance = json.loads((SCHEMAS / "conformance" / "index.json").read_text())
    for entry in conformance["fixtures"]:
        assert client.get("/schemas/conformance/" + entry["path"]).data == (SCHEMAS / "conformance" / entry["path"]).read_bytes()
    for bad in ("conformance/../../pyproject.toml", "..%2Fpyproject.toml", ".hidden.json", "conformance/fixtures/x/y/z.json"):
        assert client.get("/schemas/" + bad).status_code == 404


class DateWindowRegistry(FakeRegistry):
    """Stands in for the operator's `refund_window@1.0.0` (ISO dates in, window facts out)."""

    def run(self, invocation):
        self.resolve(invocation)
        data = invocation["input"]
        days = (date.fromisoformat(data["request_date"]) - date.fromisoformat(data["purchase_date"])).days
        facts = {**data, "days_since_purchase": days, "within_window": 0 <= days <= data["window_days"],
                 "days_remaining": max(0, data["window_days"] - days), "request_before_purchase": days < 0}
        block = {"adapter_id": "refund_window", "version": "1.0.0", "implementation_hash": self.implementation_hash,
                 "manifest_hash": invocation["manifest_hash"], "input_hash": sha256_hex(data),
                 "output_hash": sha256_hex(facts)}
        from tests.fake_adapters import AdapterRun

        return AdapterRun(facts=facts, trusted_adapter=block, adapter_facts=facts)


def test_rule_6_conformance_fixtures_cover_the_required_cases_and_pass_here(gate_env, issue_key):
    index = json.loads((SCHEMAS / "conformance" / "index.json").read_text())
    covered = {kind for entry in index["fixtures"] for kind in entry["covers"]}
    assert {"direct_rulebook_approval", "adapter_rulebook_approval", "rejected_executable_payload",
            "rejected_output_material", "unsupported_binding_mode", "binding_mode_conflict", "needs_input"} <= covered
    registry = DateWindowRegistry()  # registered as refund_window@1.0.0, like the shipped adapter
    app = create_app(Settings.from_env(gate_env), adapters=registry)
    client, key = app.test_client(), issue_key()["api_key"]

    def send(method, path, body):
        if path == "/api/decision/adapters":  # the public registry listing, from the same registry
            return 200, {"adapters": registry.manifests()}
        response = client.open(path, method=method, json=body, headers={"x-api-key": key})
        return response.status_code, response.json

    report = run_conformance(send)
    assert report["ok"] and exit_code(report) == 0, [f for f in report["fixtures"] if f["result"] != "passed"]
    app.extensions["gate"].ledger.dispose()


def test_rule_7_migrations_are_checked_and_gated_by_their_manifest():
    candidate = json.loads((ROOT / "gate" / "data" / "rulebooks" / "refund-approval-2026-08-01.json").read_text())
    fields = ["verdict", "application_verdict", "action", "reason_code", "matched_rule_id"]
    assert check_migration(_manifest(candidate, "rulebook", fields), rulebook=candidate)["gate_passed"]
    proposed = check_migration(_manifest(candidate, "rulebook", fields, status="proposed"), rulebook=candidate)
    assert proposed["ok"] and not proposed["gate_passed"]
    silent = check_migration(_manifest(candidate, "rulebook", []), rulebook=candidate)
    assert not silent["gate_passed"] and silent["observed_drift"] == fields
    same = json.loads((ROOT / "gate" / "data" / "rulebooks" / "refund-approval.json").read_text())
    unchanged = check_migration(_manifest(same, "rulebook", [], status="approved") | {"approval": {"status": "not_required"}},
                                rulebook=same)
    assert unchanged["gate_passed"] and unchanged["observed_drift"] == []
    assert check_migration({"schema_version": "rulebook_migration_v1"})["ok"] is False
    assert CORPUS_DIR.is_dir()
