"""`gate.verify.attestations` branch by branch: the rulebook attestation, the registry and its
attestation, and the trusted-adapter lineage, each called on a record changed in one place (and
re-signed where the change must pass the signature), with the exact checks it writes."""

from __future__ import annotations

import copy

import pytest
from crypto_support import ADAPTER, FACTS, REQUEST, key_a, key_b, make_record

from gate.keys.signing import Ed25519ReceiptSigner
from gate.protocol.attestation import registry_attestation_hash
from gate.protocol.canonical import sha256_hex
from gate.verify import TrustAnchors
from gate.verify.attestations import (
    _dependency_matches,
    _is_hex64,
    check_registry,
    check_rulebook_attestation,
    check_trusted_adapter,
)

ANCHORS = TrustAnchors.from_public_key_pem(key_a().public_key_pem, key_id=key_a().key_id)
ATTESTATION_OK = {"rulebook_attestation_bundle_hash": True, "rulebook_attestation_consistency": True,
                  "rulebook_attestation_signature": True, "policy_bundle_hash": True}


def _attest(record, original_input=None, anchors=ANCHORS):
    result = check_rulebook_attestation(record, anchors, original_input)
    return dict(result.checks), dict(result.expected), dict(result.actual), list(result.notes)


def _rebundle(record, **changes):
    """The attestation bundle changed and consistently re-hashed and re-signed with key A."""
    attestation = record["rulebook_attestation"]
    attestation["bundle"].update(changes)
    digest = sha256_hex(attestation["bundle"])
    attestation["bundle_hash"] = record["policy_bundle_hash"] = digest
    attestation["signature"]["signature"] = Ed25519ReceiptSigner(key_a()).sign_attestation_hash(digest)
    return record


# --------------------------------------------------------------------------- rulebook attestation


def test_a_direct_mode_attestation_checks_the_facts_through_the_original_input():
    record = make_record()
    checks, expected, actual, notes = _attest(record, REQUEST)
    assert checks == dict(ATTESTATION_OK, rulebook_attestation_input_hash=True) and notes == []
    assert expected == actual == {
        "rulebook_attestation_bundle_hash": record["policy_bundle_hash"], "policy_bundle_hash": record["policy_bundle_hash"],
        "rulebook_attestation_input_hash": sha256_hex(FACTS)}
    checks, expected, _, _ = _attest(record)
    assert checks == ATTESTATION_OK and "rulebook_attestation_input_hash" not in expected


def test_an_adapter_mode_attestation_checks_the_facts_against_the_adapter_output():
    record = make_record(adapter=True)
    checks, expected, actual, _ = _attest(record)
    assert checks == dict(ATTESTATION_OK, rulebook_attestation_input_hash=True)
    assert expected["rulebook_attestation_input_hash"] == actual["rulebook_attestation_input_hash"] \
        == ADAPTER["output_hash"]
    _rebundle(record, input_hash="0" * 64)
    assert _attest(record)[0] == dict(ATTESTATION_OK, rulebook_attestation_input_hash=False)


@pytest.mark.parametrize("adapter", ["junk", {k: v for k, v in ADAPTER.items() if k != "output_hash"}])
def test_without_an_adapter_output_hash_the_facts_come_from_the_original_input(adapter):
    record = make_record()
    record["trusted_adapter"] = adapter
    _rebundle(record, trusted_adapter=adapter)
    checks, expected, _, _ = _attest(record, REQUEST)
    assert checks == dict(ATTESTATION_OK, rulebook_attestation_input_hash=True)
    assert expected["rulebook_attestation_input_hash"] == sha256_hex(FACTS)


@pytest.mark.parametrize("original_input", ["junk", {"context": "junk"}, {"context": {"inputs": "junk"}}, {}])
def test_an_original_input_without_an_inputs_object_leaves_the_facts_unchecked(original_input):
    checks, expected, _, _ = _attest(make_record(), original_input)
    assert checks == ATTESTATION_OK and "rulebook_attestation_input_hash" not in expected


def test_a_record_without_an_attestation():
    record = make_record()
    del record["rulebook_attestation"]
    checks, expected, _, notes = _attest(record)
    assert checks == {"rulebook_attestation_bundle_hash": False} and expected == {} and len(notes) == 1
    del record["rulebook"]
    assert _attest(record) == ({}, {}, {}, [])


@pytest.mark.parametrize("attestation", ["junk", {"bundle": "junk"}, {"bundle_hash": "0" * 64}])
def test_an_attestation_without_a_bundle_object_fails_all_four(attestation):
    record = make_record()
    record["rulebook_attestation"] = attestation
    checks, expected, _, _ = _attest(record, REQUEST)
    assert checks == dict.fromkeys(ATTESTATION_OK, False) and expected == {}


@pytest.mark.parametrize("change", [
    lambda r: r["rulebook_attestation"].update(schema_version="rulebook_attestation_v0"),
    lambda r: _rebundle(r, engine="other_engine"),
    lambda r: _rebundle(r, evaluator_version="other"),
    lambda r: _rebundle(r, rulebook=dict(r["rulebook"], version="0")),
    lambda r: _rebundle(r, outcome=dict(r["rulebook_attestation"]["bundle"]["outcome"], action="refund")),
    lambda r: _rebundle(r, runtime_binding=dict(r["runtime_binding"], verdict_authority="x")),
    lambda r: _rebundle(r, trusted_adapter={"adapter_id": "x"}),
])
def test_each_bundle_member_must_agree_with_the_record(change):
    record = make_record()
    change(record)
    assert _attest(record)[0] == dict(ATTESTATION_OK, rulebook_attestation_consistency=False)


def test_a_record_without_an_engine_takes_the_bundle_engine():
    record = make_record()
    del record["engine"]
    assert _attest(record)[0] == ATTESTATION_OK


def test_the_bundle_hash_and_the_policy_bundle_hash_are_separate_checks():
    record = make_record()
    record["policy_bundle_hash"] = "0" * 64
    assert _attest(record)[0] == dict(ATTESTATION_OK, policy_bundle_hash=False)
    record = make_record()
    record["rulebook_attestation"]["bundle_hash"] = "0" * 64
    checks, expected, actual, _ = _attest(record)
    assert checks == dict(ATTESTATION_OK, rulebook_attestation_bundle_hash=False)
    assert actual["rulebook_attestation_bundle_hash"] == "0" * 64 != expected["rulebook_attestation_bundle_hash"]


def _signature(record, **changes):
    record["rulebook_attestation"]["signature"].update(changes)
    return record


BLANK = {"key_id": None, "public_key_pem": None, "signature": None}


@pytest.mark.parametrize("changes, result", [
    (dict(BLANK, status="unsigned"), None),
    (dict(BLANK, status="unsigned", key_id="k"), False),
    (dict(BLANK, status="unsigned", public_key_pem="pem"), False),
    (dict(BLANK, status="unsigned", signature="sig"), False),
    (dict(BLANK, status="unsigned", schema_version="other"), False),
    (dict(BLANK, status="unsigned", algorithm="other"), False),
    (dict(BLANK, status="unsigned", signed_field="other"), False),
    ({"status": "other"}, False),
    ({"schema_version": "other"}, False),
    ({"algorithm": "other"}, False),
    ({"signed_field": "other"}, False),
    ({"public_key_pem": key_b().public_key_pem}, False),  # trusted key, another embedded key
    ({"public_key_pem": 5}, False),
    ({"public_key_pem": None}, True),  # no embedded key: the trusted key alone
    ({"key_id": "unknown"}, True),  # found by the embedded key's fingerprint
])
def test_the_attestation_signature(changes, result):
    checks, _, _, notes = _attest(_signature(make_record(), **changes))
    assert checks == dict(ATTESTATION_OK, rulebook_attestation_signature=result) and notes == []


def test_an_attestation_signature_that_is_not_an_object_fails():
    record = make_record()
    record["rulebook_attestation"]["signature"] = "junk"
    assert _attest(record)[0] == dict(ATTESTATION_OK, rulebook_attestation_signature=False)


def test_without_a_trusted_key_only_the_embedded_key_is_tried_as_a_diagnostic():
    record = make_record()
    checks, _, _, notes = _attest(record, anchors=TrustAnchors())
    expected = {k: v for k, v in ATTESTATION_OK.items() if k != "rulebook_attestation_signature"}
    assert checks == dict(expected, rulebook_attestation_signature_matches_untrusted_key=True) and len(notes) == 1
    _signature(record, public_key_pem=key_b().public_key_pem)
    assert _attest(record, anchors=TrustAnchors())[0] == dict(
        expected, rulebook_attestation_signature_matches_untrusted_key=False)
    for pem in ("junk", 5, None):
        _signature(record, public_key_pem=pem)
        assert _attest(record, anchors=TrustAnchors())[0] == expected, pem


# --------------------------------------------------------------------------- registry


def _registry(record, anchors=ANCHORS):
    result = check_registry(record, anchors)
    return dict(result.checks), dict(result.expected), dict(result.actual), list(result.notes)


REGISTRY_OK = {"rulebook_registry_consistency": True, "registry_attestation_hash": True,
               "registry_attestation_signature": True}


def _resign_registry(record, **changes):
    registry = record["rulebook_registry"]
    registry.update(changes)
    attestation = registry["registry_attestation"]
    attestation["attestation_hash"] = registry_attestation_hash(dict(registry))
    attestation["signature"] = Ed25519ReceiptSigner(key_a()).sign_attestation_hash(attestation["attestation_hash"])
    return record


@pytest.mark.parametrize("adapter", [False, True])
def test_a_valid_registry(adapter):
    record = make_record(adapter=adapter)
    checks, expected, actual, notes = _registry(record)
    assert checks == REGISTRY_OK and notes == []
    assert expected == actual == {
        "registry_attestation_hash": record["rulebook_registry"]["registry_attestation"]["attestation_hash"]}


def test_no_registry_and_a_registry_that_is_not_an_object():
    record = make_record()
    del record["rulebook_registry"]
    assert _registry(record) == ({}, {}, {}, [])
    record["rulebook_registry"] = "junk"
    assert _registry(record)[0] == {"rulebook_registry_consistency": False, "registry_attestation_hash": False}


@pytest.mark.parametrize("change", [
    {"rulebook_id": "other"}, {"version": "0"}, {"hash": "0" * 64}, {"evaluator_version": "other"},
    {"trusted_adapter_dependency": {"adapter_id": "x", "version": "1", "manifest_hash": "2" * 64}},
])
def test_each_registry_member_must_agree_with_the_record(change):
    record = _resign_registry(make_record(), **change)
    assert _registry(record)[0] == dict(REGISTRY_OK, rulebook_registry_consistency=False)


def test_a_record_rulebook_that_is_not_an_object_fails_the_registry_consistency():
    record = make_record()
    record["rulebook"] = "junk"
    assert _registry(record)[0] == dict(REGISTRY_OK, rulebook_registry_consistency=False)


def test_the_registry_attestation_shapes():
    record = make_record()
    del record["rulebook_registry"]["registry_attestation"]
    checks, _, _, notes = _registry(record)
    assert checks == {"rulebook_registry_consistency": True} and len(notes) == 1
    record["rulebook_registry"]["registry_attestation"] = "junk"
    assert _registry(record)[0] == {"rulebook_registry_consistency": True, "registry_attestation_hash": False}


@pytest.mark.parametrize("changes, hash_ok, signature", [
    ({"registry_attestation_version": "other"}, False, True),
    ({"attestation_hash": "0" * 64}, False, True),  # the signature is over the recomputed hash
    ({"status": "unsigned", "signature": None, "key_id": None}, True, None),
    ({"status": "unsigned", "key_id": None}, True, False),
    ({"status": "unsigned", "signature": None}, True, False),
    ({"status": "other"}, True, False),
    ({"signature_algorithm": "hmac-sha256"}, True, False),
    ({"signature": "A" * 86}, True, False),
])
def test_the_registry_attestation_hash_and_signature(changes, hash_ok, signature):
    record = make_record()
    record["rulebook_registry"]["registry_attestation"].update(changes)
    checks, _, _, _ = _registry(record)
    assert checks == dict(REGISTRY_OK, registry_attestation_hash=hash_ok, registry_attestation_signature=signature)


def test_a_registry_attestation_without_a_trusted_key_is_not_checked():
    record = make_record()
    checks, _, _, notes = _registry(record, anchors=TrustAnchors())
    assert checks == {"rulebook_registry_consistency": True, "registry_attestation_hash": True} and len(notes) == 1
    # Selected by key id only: a trusted key under another id does not check it.
    other_id = TrustAnchors.from_public_key_pem(key_a().public_key_pem, key_id="other")
    assert "registry_attestation_signature" not in _registry(record, anchors=other_id)[0]


def test_the_adapter_dependency_match():
    adapter = dict(ADAPTER)
    dependency = {name: adapter[name] for name in ("adapter_id", "version", "manifest_hash")}
    assert _dependency_matches(None, None) is True
    assert _dependency_matches(dependency, adapter) is True
    assert _dependency_matches(dependency, None) is False and _dependency_matches(None, adapter) is False
    assert _dependency_matches("junk", adapter) is False and _dependency_matches(dependency, "junk") is False
    assert _dependency_matches(dict(dependency, extra=1), adapter) is False
    for name in dependency:
        assert _dependency_matches(dict(dependency, **{name: "other"}), adapter) is False, name
        assert _dependency_matches({k: v for k, v in dependency.items() if k != name}, adapter) is False, name


# --------------------------------------------------------------------------- trusted adapter


def test_is_hex64():
    assert _is_hex64("0123456789abcdef" * 4) is True
    for value in ("A" * 64, "X" * 64, "a" * 63, "a" * 65, "g" * 64, 5, None, b"a" * 64):
        assert _is_hex64(value) is False, value


ADAPTER_REQUEST = {"mode": "rulebook", "rulebook": REQUEST["rulebook"],
                   "context": {k: v for k, v in REQUEST["context"].items() if k != "inputs"},
                   "adapter": {"adapter_id": ADAPTER["adapter_id"], "version": ADAPTER["version"],
                               "manifest_hash": ADAPTER["manifest_hash"], "input": dict(FACTS)}}


def _lineage(record, original_input=None):
    result = check_trusted_adapter(record, original_input)
    return dict(result.checks), dict(result.expected), dict(result.actual), list(result.notes)


def _adapter_record(**adapter_changes):
    record = make_record(adapter=True)
    record["trusted_adapter"] = dict(record["trusted_adapter"], **adapter_changes,
                                     input_hash=sha256_hex(FACTS))
    return record


def test_a_valid_lineage_with_and_without_the_original_request():
    record = _adapter_record()
    checks, expected, actual, notes = _lineage(record, ADAPTER_REQUEST)
    assert checks == {"trusted_adapter_lineage": True} and notes == []
    assert expected == actual == {"adapter_facts_hash": ADAPTER["output_hash"]}
    checks, _, _, notes = _lineage(record)
    assert checks == {"trusted_adapter_lineage": True} and len(notes) == 1


def test_a_direct_mode_record_has_no_lineage_unless_it_claims_adapter_authority():
    record = make_record()
    assert _lineage(record, REQUEST) == ({}, {}, {}, [])
    record["runtime_binding"] = dict(record["runtime_binding"], adapter_authority="facts_only")
    checks, _, _, notes = _lineage(record, REQUEST)
    assert checks == {"trusted_adapter_lineage": False} and len(notes) == 1


@pytest.mark.parametrize("member", ["trusted_adapter", "adapter_facts"])
def test_either_adapter_member_alone_puts_a_record_in_adapter_mode(member):
    record = make_record()
    record[member] = dict(ADAPTER)
    assert _lineage(record)[0] == {"trusted_adapter_lineage": False}


@pytest.mark.parametrize("change", [
    lambda r: r.update(trusted_adapter="junk"),
    lambda r: r.update(adapter_facts="junk"),
    lambda r: r["trusted_adapter"].pop("execution_isolation"),
    lambda r: r["trusted_adapter"].update(extra=1),
    lambda r: r["trusted_adapter"].update(implementation_hash="A" * 64),
    lambda r: r["trusted_adapter"].update(manifest_hash="2" * 63),
    lambda r: r["trusted_adapter"].update(input_hash=None),
    lambda r: r["trusted_adapter"].update(output_hash="x"),
    lambda r: r["trusted_adapter"].update(execution_timeout_ms="1000"),
    lambda r: r.update(runtime_binding=dict(r["runtime_binding"], binding_mode="direct_declarative_rulebook")),
    lambda r: r.update(runtime_binding=dict(r["runtime_binding"], adapter_authority="verdict")),
    lambda r: r.update(runtime_binding="junk"),
    lambda r: r["adapter_facts"].update(discount_percent=16),
])
def test_each_part_of_the_adapter_block_and_binding_is_required(change):
    record = _adapter_record()
    change(record)
    assert _lineage(record, ADAPTER_REQUEST)[0] == {"trusted_adapter_lineage": False}
    assert _lineage(record)[0] == {"trusted_adapter_lineage": False}


def test_the_facts_hash_is_reported_even_when_the_adapter_block_is_not_an_object():
    record = _adapter_record()
    record["trusted_adapter"] = "junk"
    _, expected, actual, _ = _lineage(record)
    assert expected == {"adapter_facts_hash": ADAPTER["output_hash"]} and actual == {"adapter_facts_hash": None}


@pytest.mark.parametrize("change", [
    lambda a: a.update(adapter_id="other"),
    lambda a: a.update(version="9"),
    lambda a: a.update(manifest_hash="9" * 64),
    lambda a: a.update(input="junk"),
    lambda a: a.update(input=dict(FACTS, discount_percent=16)),  # input_hash no longer matches
])
def test_the_original_invocation_must_name_this_adapter_and_its_input(change):
    original = copy.deepcopy(ADAPTER_REQUEST)
    change(original["adapter"])
    checks, _, _, notes = _lineage(_adapter_record(), original)
    assert checks == {"trusted_adapter_lineage": False} and notes == []


def test_every_input_member_must_reappear_unchanged_in_the_facts():
    original = copy.deepcopy(ADAPTER_REQUEST)
    original["adapter"]["input"] = dict(FACTS, extra_input=1)
    record = make_record(adapter=True)
    record["trusted_adapter"] = dict(record["trusted_adapter"], input_hash=sha256_hex(original["adapter"]["input"]))
    assert _lineage(record, original)[0] == {"trusted_adapter_lineage": False}
    original["adapter"]["input"] = {"discount_percent": 15.0}  # canonically equal to the fact 15
    record["trusted_adapter"]["input_hash"] = sha256_hex(original["adapter"]["input"])
    assert _lineage(record, original)[0] == {"trusted_adapter_lineage": True}


def test_an_invocation_that_is_not_an_object_is_not_checked():
    original = dict(ADAPTER_REQUEST, adapter="junk")
    checks, _, _, notes = _lineage(_adapter_record(), original)
    assert checks == {"trusted_adapter_lineage": True} and len(notes) == 1
