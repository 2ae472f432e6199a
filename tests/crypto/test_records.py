"""Record envelope selection, action binding, the rulebook record builder and response views."""

from __future__ import annotations

import copy

import pytest
from crypto_support import (
    ADAPTER,
    CONTEXT,
    FACTS,
    RULEBOOK,
    default_evaluation,
    key_a,
    make_record,
    needs_input_evaluation,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from gate import vocabulary as C
from gate.keys.signing import b64url_decode, ed25519_verify
from gate.protocol.attestation import registry_attestation_hash
from gate.protocol.canonical import sha256_hex
from gate.protocol.records import (
    MINIMAL_VIEW_MEMBERS,
    STANDARD_VIEW_MEMBERS,
    action_binding_from_context,
    compact_deep,
    limit_text,
    project_view,
    receipt_hash,
    record_envelope,
    record_hash,
    rulebook_output_hash,
)

BASE = {
    "decision_protocol_version": "decision_protocol_v1",
    "decision_record_version": "decision_record_v1",
    "decision_id": "d1",
    "request_id": "r1",
    "verdict": "yes",
    "action": "go",
    "evidence": ["E"],
    "evidence_manifest": {"codes": ["E"], "sources": []},
    "policy_id": "p",
    "policy_version": "1",
    "policy_hash": "h",
    "input_hash": "i",
    "output_hash": "o",
    "created_at": "t",
    "replay_url": "/r",
    "verify_url": "/v",
}


# --------------------------------------------------------------------------- envelope


def test_envelope_defaults_for_missing_idempotency_key_and_binding():
    envelope = record_envelope(BASE)
    assert envelope["idempotency_key"] == ""
    assert envelope["action_binding"] == {}
    assert "policy_bundle_hash" not in envelope and "policy_bundle" not in envelope
    assert record_hash(BASE) == record_hash({**BASE, "idempotency_key": None, "action_binding": None})
    assert record_hash(BASE) == record_hash({**BASE, "idempotency_key": ""})
    assert record_hash(BASE) != record_hash({**BASE, "idempotency_key": "k"})


def test_envelope_ignores_unhashed_members():
    extra = {**BASE, "c": "yes", "v": "x", "integrity": {"a": 1}, "receipt_signature": "s",
             "receipt_key_id": "k", "decision_confidence": {"score": 1}, "audit_chain": {"x": 1},
             "record_hash": "r", "receipt_hash": "q", "status": "ok", "evaluation": {"m": 1}}
    assert record_hash(extra) == record_hash(BASE)


def test_policy_bundle_drops_empty_members():
    bundle = {"id": "b", "version": "1", "hash": "h", "source": "", "extra": None}
    envelope = record_envelope({**BASE, "policy_bundle": bundle, "policy_bundle_hash": "h"})
    assert envelope["policy_bundle"] == {"id": "b", "version": "1", "hash": "h"}
    assert envelope["policy_bundle_hash"] == "h"
    assert "policy_bundle" not in record_envelope({**BASE, "policy_bundle": {"source": ""}})


def test_optional_members_are_deep_compacted():
    record = {**BASE, "application_verdict": "", "matched_rule_id": None,
              "rulebook_attestation": {"signature": {"key_id": None, "status": "unsigned"}, "empty": {}},
              "adapter_facts": {"list": [1, None, {}], "gone": []}}
    envelope = record_envelope(record)
    assert "application_verdict" not in envelope and "matched_rule_id" not in envelope
    assert envelope["rulebook_attestation"] == {"signature": {"status": "unsigned"}}
    assert envelope["adapter_facts"] == {"list": [1, None, {}]}  # array positions are kept
    assert compact_deep({"a": {"b": {"c": None}}, "f": False, "z": 0}) == {"f": False, "z": 0}


def test_evidence_manifest_is_reduced_to_codes_and_sources():
    record = {**BASE, "evidence_manifest": {"codes": ["E"], "sources": [], "note": "x"}}
    assert record_envelope(record)["evidence_manifest"] == {"codes": ["E"], "sources": []}
    # ... but the receipt hash covers the whole stored manifest.
    assert receipt_hash({**record, "record_hash": "x"}) != receipt_hash({**BASE, "record_hash": "x"})


@pytest.mark.parametrize("name", sorted(BASE))
def test_every_always_present_member_changes_record_hash(name):
    changed = copy.deepcopy(BASE)
    changed[name] = ["other"] if isinstance(changed[name], list) else (
        {"codes": [], "sources": ["x"]} if isinstance(changed[name], dict) else changed[name] + "x")
    assert record_hash(changed) != record_hash(BASE)


# --------------------------------------------------------------------------- action binding


def test_action_binding_from_context_mapping_and_fallbacks():
    assert action_binding_from_context(
        {"target_system": "crm", "target_object_id": "acc_1", "requested_action": "write"}
    ) == {"system": "crm", "resource": "acc_1", "proposed_action": "write",
          "target_system": "crm", "target_object_id": "acc_1"}
    binding = action_binding_from_context(
        {"workflow": "  wf  ", "amount": 2.50, "currency": "EUR", "subject": "cust_1", "actor": 7,
         "mutation": "", "inputs": {"x": 1}}
    )
    assert binding == {"system": "wf", "amount": "2.5", "currency": "EUR", "subject": "cust_1"}
    assert action_binding_from_context({"amount": 15.0})["amount"] == "15"
    assert action_binding_from_context({"amount": True}) == {}
    assert action_binding_from_context({}) == {}
    assert action_binding_from_context(None) == {}


# --------------------------------------------------------------------------- limits


def test_limit_text_trims_and_counts_utf16_units():
    assert limit_text("  abc \n", 10) == "abc"
    assert limit_text("a" * 10, 4) == "aaaa"
    assert limit_text("ab😀c", 3) == "ab"  # the emoji (2 units) does not fit and is not split
    assert limit_text("ab😀c", 4) == "ab😀"
    assert limit_text("\ufeffx\u3000", 5) == "x"  # JavaScript white space


def test_builder_applies_reference_lengths():
    record = make_record(decision_id="d" * 700, request_id=" r " + "q" * 200, idempotency_key="k" * 400)
    assert len(record["decision_id"]) == 600
    assert len(record["request_id"]) == 160 and record["request_id"].startswith("r ")
    assert len(record["idempotency_key"]) == 300
    assert record["verify_url"] == "/api/decision/" + "d" * 600 + "/verify"


# --------------------------------------------------------------------------- builder


def test_rulebook_record_members():
    key = key_a()
    record = make_record()
    rulebook_hash = sha256_hex(RULEBOOK)
    assert record["decision_protocol_version"] == "decision_protocol_v1"
    assert record["decision_record_version"] == "decision_record_v1"
    assert record["status"] == "ok" and "missing_fields" not in record
    assert (record["c"], record["v"], record["verdict"]) == ("yes", "APPROVE", "yes")
    assert record["application_verdict"] == "APPROVE"
    assert record["reason_code"] == "WITHIN_DISCOUNT_LIMIT"
    assert record["matched_rule_id"] == "small_discount"
    assert record["engine"] == C.ENGINE and record["evaluator_version"] == C.EVALUATOR_VERSION
    assert record["evaluation"]["matched"] is True and len(record["evaluation"]["checks"]) == 1
    assert record["rulebook"] == {"schema_version": "rulebook_v1", "id": "pricing_exception",
                                  "version": "2026.05.1", "hash": rulebook_hash}
    assert record["rulebook_contract"] == {"schema_version": "rulebook_v1", "schema_url": "/schemas/rulebook-v1.schema.json",
                                           "schema_hash": "5" * 64, "evaluator_version": C.EVALUATOR_VERSION}
    assert record["runtime_binding"] == {"production_core": C.PRODUCTION_CORE, "binding_mode": C.BINDING_DIRECT,
                                         "verdict_authority": "declarative_rulebook",
                                         "customer_supplied_code": "rejected"}
    assert record["policy_id"] == "pricing_exception" and record["policy_version"] == "2026.05.1"
    assert record["policy_hash"] == record["source_hash"] == rulebook_hash
    assert record["policy_bundle"] == {"id": "pricing_exception", "version": "2026.05.1", "hash": rulebook_hash,
                                       "hash_algorithm": "sha256", "canonicalization": "json.sort_deep.v1",
                                       "source": "rulebook:pricing_exception@2026.05.1"}
    assert record["evidence"] == ["WITHIN_DISCOUNT_LIMIT"]
    assert record["evidence_manifest"] == {
        "codes": ["WITHIN_DISCOUNT_LIMIT"],
        "sources": [{"id": "small_discount", "type": "rulebook_rule", "rulebook_id": "pricing_exception",
                     "rulebook_version": "2026.05.1", "rulebook_hash": rulebook_hash}],
    }
    assert record["action"] == "apply_discount"
    assert record["action_binding"] == action_binding_from_context(CONTEXT)
    assert record["idempotency_key"] == "idem:sub_1042:discount_15"
    assert record["replay_url"] == "/api/decision/dec_test_0001/replay"
    assert record["verify_url"] == "/api/decision/dec_test_0001/verify"
    assert record["decision_url"] == "/api/decision/dec_test_0001"
    assert record["created_at"] == "2026-05-21T00:00:00.000Z"
    # hashes
    assert record["record_hash"] == record_hash(record)
    assert record["receipt_hash"] == receipt_hash(record)
    assert record["output_hash"] == rulebook_output_hash(record)
    assert record["output_hash"] == sha256_hex({n: record[n] for n in (
        "status", "verdict", "application_verdict", "action", "reason_code", "matched_rule_id", "evidence",
        "evaluation")})
    # receipt
    assert record["receipt_key_id"] == key.key_id
    assert record["receipt_signature_algorithm"] == "ed25519"
    assert record["receipt_public_key_fingerprint"] == key.fingerprint
    assert record["integrity"] == {
        "canonicalization": "json.sort_deep.v1", "hash_algorithm": "sha256",
        "decision_protocol_version": "decision_protocol_v1", "input_hash": record["input_hash"],
        "output_hash": record["output_hash"], "policy_hash": rulebook_hash,
        "policy_bundle_hash": record["policy_bundle_hash"], "record_hash": record["record_hash"],
        "receipt_hash": record["receipt_hash"], "replay_url": record["replay_url"],
        "verify_url": record["verify_url"],
        "signature": {"algorithm": "ed25519", "key_id": key.key_id, "public_key_fingerprint": key.fingerprint},
    }


def test_rulebook_attestation_bundle_and_signature():
    key = key_a()
    record = make_record()
    attestation = record["rulebook_attestation"]
    bundle = attestation["bundle"]
    assert attestation["schema_version"] == "rulebook_attestation_v1"
    assert attestation["bundle_hash"] == sha256_hex(bundle) == record["policy_bundle_hash"]
    assert bundle == {
        "engine": C.ENGINE, "evaluator_version": C.EVALUATOR_VERSION, "rulebook": record["rulebook"],
        "input_hash": sha256_hex(FACTS),
        "outcome": {"status": "ok", "verdict": "yes", "application_verdict": "APPROVE",
                    "action": "apply_discount", "reason_code": "WITHIN_DISCOUNT_LIMIT",
                    "matched_rule_id": "small_discount"},
        "runtime_binding": record["runtime_binding"], "trusted_adapter": None,
    }
    signature = attestation["signature"]
    assert signature["status"] == "signed" and signature["algorithm"] == "Ed25519"
    assert signature["signed_field"] == "bundle_hash" and signature["key_id"] == key.key_id
    assert signature["public_key_pem"] == key.public_key_pem
    assert ed25519_verify(key.public_key_raw, attestation["bundle_hash"].encode(), b64url_decode(signature["signature"]))


def test_unsigned_attestation_and_registry():
    record = make_record(attest=False, signer="hmac")
    signature = record["rulebook_attestation"]["signature"]
    assert signature["status"] == "unsigned"
    assert signature["key_id"] is None and signature["public_key_pem"] is None and signature["signature"] is None
    registry = record["rulebook_registry"]["registry_attestation"]
    assert registry["status"] == "unsigned" and registry["signature"] is None
    assert registry["attestation_hash"] == registry_attestation_hash(record["rulebook_registry"])
    assert "receipt_public_key_fingerprint" not in record
    assert record["integrity"]["signature"] == {"algorithm": "hmac-sha256", "key_id": "decide_conformance_hmac_v1"}


def test_unsigned_receipt_has_no_signature_members():
    record = make_record(signer=None)
    for name in ("receipt_key_id", "receipt_signature", "receipt_signature_algorithm",
                 "receipt_public_key_fingerprint"):
        assert name not in record
    assert "signature" not in record["integrity"]


def test_default_outcome_and_review_record():
    record = make_record(evaluation=default_evaluation(), idempotency_key=None)
    assert (record["c"], record["v"], record["verdict"]) == ("unclear", "REVIEW", "review")
    assert record["matched_rule_id"] is None
    assert record["evidence_manifest"]["sources"][0]["id"] == "default_outcome"
    assert "idempotency_key" not in record
    assert record_envelope(record)["idempotency_key"] == ""
    assert "matched_rule_id" not in record_envelope(record)


def test_needs_input_record():
    record = make_record(evaluation=needs_input_evaluation())
    assert record["status"] == "needs_input"
    assert record["missing_fields"] == ["discount_percent"] and record["invalid_fields"] == ["account_tier"]
    assert (record["c"], record["v"], record["action"]) == ("unclear", "NEEDS_INPUT", "collect_required_input")
    assert record["reason_code"] == "INPUT_SCHEMA_FAILED" and record["matched_rule_id"] is None
    assert record["evidence_manifest"]["sources"][0]["id"] == "input_schema"
    # missing_fields are bound by the output hash.
    changed = dict(record, missing_fields=["other"])
    assert rulebook_output_hash(changed) != record["output_hash"]


def test_adapter_mode_record():
    record = make_record(adapter=True)
    assert record["runtime_binding"]["binding_mode"] == C.BINDING_ADAPTER
    assert record["runtime_binding"]["adapter_authority"] == "facts_only"
    assert record["trusted_adapter"] == ADAPTER
    assert record["adapter_facts"]["derived_margin_ok"] is True
    assert record["rulebook_attestation"]["bundle"]["trusted_adapter"] == ADAPTER
    assert record_envelope(record)["trusted_adapter"] == ADAPTER


def test_builder_rejects_bad_arguments():
    with pytest.raises(ValueError):
        make_record(binding_mode="customer_executable_rulebook")
    with pytest.raises(ValueError):
        make_record(input_hash="sha256:abc")
    with pytest.raises(ValueError):
        make_record(decision_id="   ")
    with pytest.raises(ValueError):
        make_record(binding_mode=C.BINDING_ADAPTER)  # no trusted_adapter lineage


def test_builder_is_deterministic():
    assert make_record() == make_record()


# --------------------------------------------------------------------------- views

ALWAYS_KEPT = {"decision_id", "record_hash", "receipt_hash", "policy_bundle_hash", "verify_url",
               "receipt_key_id", "receipt_signature", "receipt_signature_algorithm",
               "receipt_public_key_fingerprint", "decision_confidence"}


def test_views():
    record = make_record()
    record["decision_confidence"] = {"decision_confidence_version": "decision_confidence_v1", "score": 0.9}
    minimal = project_view(record, "minimal")
    standard = project_view(record, "standard")
    full = project_view(record, "full")
    assert full == record and full is not record
    assert ALWAYS_KEPT <= set(minimal) <= set(standard) <= set(full)
    assert ALWAYS_KEPT <= MINIMAL_VIEW_MEMBERS
    assert {"decision_url", "replay_url", "application_verdict", "reason_code", "matched_rule_id",
            "rulebook", "action", "request_id", "verdict"} <= set(minimal)
    assert "evidence" not in minimal and "integrity" not in minimal
    assert {"evidence", "policy_bundle", "action_binding", "input_hash", "output_hash", "created_at",
            "policy_id", "policy_version", "policy_hash"} <= set(standard)
    assert "evidence_manifest" not in standard and "integrity" not in standard
    assert MINIMAL_VIEW_MEMBERS <= STANDARD_VIEW_MEMBERS
    for view in (minimal, standard):
        for name in ALWAYS_KEPT:
            assert view[name] == record[name]
    with pytest.raises(ValueError):
        project_view(record, "compact")


def _compact_reference(value):
    """compact_deep as the reference facts state it: every value compacted, then members whose
    compacted value is null, "", {} or [] dropped; arrays keep every position."""
    def empty(item):
        return item is None or (isinstance(item, (str, dict, list, tuple)) and len(item) == 0)
    if isinstance(value, dict):
        compacted = {key: _compact_reference(item) for key, item in value.items()}
        return {key: item for key, item in compacted.items() if not empty(item)}
    if isinstance(value, (list, tuple)):
        return [_compact_reference(item) for item in value]
    return value


_json_like = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", "x", 0.0, 1.5]),
    lambda children: (st.lists(children, max_size=4) | st.lists(children, max_size=3).map(tuple)
                      | st.dictionaries(st.sampled_from(["a", "b", "c", ""]), children, max_size=4)),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None)
@given(_json_like)
def test_compact_deep_is_the_reference_compaction(value):
    assert compact_deep(value) == _compact_reference(value)
