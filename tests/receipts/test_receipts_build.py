"""Builders: members, sources of values, server inputs, and the golden vectors."""

from __future__ import annotations

import hashlib

import pytest
from receipts_support import (
    RECORD,
    REPORTED_AT,
    crm_body,
    execution_body,
    golden,
    outcome_body,
    record,
)

from gate.protocol.canonical import canonical_text, sha256_hex
from gate.receipts import (
    EXECUTION_HASH_MEMBERS,
    OUTCOME_HASH_MEMBERS,
    OUTCOME_LINK_MEMBERS,
    SYNC_HASH_MEMBERS,
    build_crm_sync_record,
    build_execution_receipt,
    build_outcome_record,
    execution_hash_of,
    hash_preimage,
    outcome_hash_of,
    request_input_hash,
    sync_hash_of,
)

KINDS = {
    "execution": (build_execution_receipt, "execution_receipt_id", EXECUTION_HASH_MEMBERS,
                  "execution_hash", execution_hash_of, "execution_input_hash", execution_body),
    "outcome": (build_outcome_record, "outcome_id", OUTCOME_HASH_MEMBERS,
                "outcome_hash", outcome_hash_of, "outcome_input_hash", outcome_body),
    "crm_sync": (build_crm_sync_record, "sync_id", SYNC_HASH_MEMBERS,
                 "sync_hash", sync_hash_of, "sync_input_hash", crm_body),
}
GOLDEN_FILES = {
    "execution-receipt.json": "execution",
    "execution-receipt-unmatched.json": "execution",
    "outcome-record.json": "outcome",
    "crm-sync.json": "crm_sync",
}
PINNED = {
    "execution-receipt.json": "c066892fb79f611889ba4d39a22a79a6b77e375b8421bf36e590464c32bc14f3",
    "execution-receipt-unmatched.json": "74613c105126cb84aa1b90ab699ad96a6fb49b51ceca80c4598c59623a52dc6b",
    "outcome-record.json": "f28166aecc497d5b65aa792ffad95f5ae70f4b68c6b4dbb1a30496b31ced1d78",
    "crm-sync.json": "4bc342b0cb6445684a90275bbcbe1da504b3310b513c54fb934903fc4d6ec0ab",
}


def build(kind, body=None, **overrides):
    builder, id_name, *_ , make_body = KINDS[kind]
    kwargs = {"body": make_body() if body is None else body, "record": record(), id_name: f"{kind}_1",
              "idempotency_key": "key-1", "reported_at": REPORTED_AT}
    kwargs.update(overrides)
    return builder(**kwargs)


@pytest.mark.parametrize("kind", KINDS)
def test_receipt_is_its_preimage_plus_the_hash(kind):
    _, _, members, hash_member, hash_of, _, _ = KINDS[kind]
    receipt = build(kind)
    assert set(receipt) - set(members) == {hash_member}
    assert list(receipt)[:-1] == [name for name in members if name in receipt]
    assert receipt[hash_member] == hash_of(receipt) == sha256_hex(hash_preimage(receipt, members))


@pytest.mark.parametrize("kind", KINDS)
def test_record_derived_members_come_from_the_record(kind):
    receipt = build(kind)
    assert receipt["decision_protocol_version"] == "decision_protocol_v1"
    assert receipt["decision_id"] == RECORD["decision_id"]
    assert receipt["decision_record_hash"] == RECORD["record_hash"]
    assert receipt["decision_receipt_hash"] == RECORD["receipt_hash"]
    assert receipt["decision_verdict"] == RECORD["verdict"]
    assert receipt["decision_action"] == RECORD["action"]
    assert receipt["policy_id"] == RECORD["policy_id"]
    assert receipt["policy_version"] == RECORD["policy_version"]
    assert receipt["policy_bundle_hash"] == RECORD["policy_bundle_hash"]
    assert receipt["decision_found"] is True
    assert receipt["reported_at"] == REPORTED_AT
    assert receipt["idempotency_key"] == "key-1"


def test_version_labels():
    assert build("execution")["decision_execution_version"] == "decision_execution_v1"
    assert build("outcome")["decision_outcome_version"] == "decision_outcome_v1"
    assert build("crm_sync")["decision_crm_sync_version"] == "decision_crm_sync_v1"


def test_outcome_carries_a_copy_of_the_record_binding():
    rec = record()
    outcome = build_outcome_record(body=outcome_body(), record=rec, outcome_id="o", idempotency_key=None,
                                   reported_at=REPORTED_AT)
    assert outcome["action_binding"] == RECORD["action_binding"]
    outcome["action_binding"]["actor"] = "changed"
    assert rec["action_binding"] == RECORD["action_binding"]


@pytest.mark.parametrize("kind", KINDS)
def test_absent_idempotency_key_is_omitted(kind):
    assert "idempotency_key" not in build(kind, idempotency_key=None)
    assert "idempotency_key" not in build(kind, idempotency_key="")


@pytest.mark.parametrize("kind", KINDS)
def test_input_hash_is_the_hash_of_the_body_as_received(kind):
    *_, input_member, make_body = KINDS[kind]
    body = make_body()
    body["external_ref"] = "  ref-1  "  # trimmed in the receipt, hashed raw in the input hash
    receipt = build(kind, body=body)
    assert receipt["external_ref"] == "ref-1"
    assert receipt[input_member] == request_input_hash(body) == sha256_hex(body)
    body["external_ref"] = "ref-1"
    assert request_input_hash(body) != receipt[input_member]


@pytest.mark.parametrize("kind", KINDS)
def test_supplied_input_hash_is_used_and_checked_for_format(kind):
    *_, input_member, _ = KINDS[kind]
    assert build(kind, **{input_member: "a" * 64})[input_member] == "a" * 64
    with pytest.raises(ValueError):
        build(kind, **{input_member: "sha256:" + "a" * 64})


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("field, value", [("id", ""), ("id", None), ("id", "x" * 301),
                                          ("reported_at", ""), ("idempotency_key", "k" * 301)])
def test_server_inputs_must_be_well_formed(kind, field, value):
    id_name = KINDS[kind][1]
    with pytest.raises(ValueError):
        build(kind, **{id_name if field == "id" else field: value})


def test_record_must_be_a_mapping():
    with pytest.raises(TypeError):
        build("execution", record=["not", "a", "record"])


def test_record_without_policy_bundle_gives_receipt_without_it():
    rec = record()
    del rec["policy_bundle_hash"]
    receipt = build_execution_receipt(body=execution_body(), record=rec, execution_receipt_id="e",
                                      idempotency_key=None, reported_at=REPORTED_AT)
    assert "policy_bundle_hash" not in receipt
    assert receipt["execution_hash"] == execution_hash_of(receipt)


def test_false_and_zero_are_values_not_empty():
    outcome = build("outcome", body=outcome_body(action_executed=False, observed_metrics={"n": 0}))
    assert outcome["action_executed"] is False and outcome["observed_metrics"] == {"n": 0}
    receipt = build("execution", body=execution_body(target_object_id="sub_other",
                                                     action_taken="apply_discount"))
    assert receipt["action_binding_match"] is False


# --------------------------------------------------------------------------- golden vectors


@pytest.mark.parametrize("name", sorted(GOLDEN_FILES))
def test_golden_vector_hash_and_canonical_preimage(name):
    vector = golden(name)
    kind = GOLDEN_FILES[name]
    _, _, members, hash_member, hash_of, input_member, _ = KINDS[kind]
    receipt = vector["receipt"]
    text = vector["preimage_canonical"]
    assert canonical_text(hash_preimage(receipt, members)) == text
    assert hashlib.sha256(text.encode("utf-8")).hexdigest() == vector[hash_member] == PINNED[name]
    assert hash_of(receipt) == receipt[hash_member] == PINNED[name]
    assert receipt[input_member] == request_input_hash(vector["request"])


@pytest.mark.parametrize("name", sorted(GOLDEN_FILES))
def test_golden_vector_rebuilds_exactly_from_its_request(name):
    vector = golden(name)
    builder, *_ = KINDS[GOLDEN_FILES[name]]
    rebuilt = builder(body=vector["request"], record=record(), **vector["inputs"])
    assert rebuilt == vector["receipt"]
    assert list(rebuilt) == list(vector["receipt"])


# An outcome's link to its execution receipt is stored beside outcome_hash, not in it (issue 41).
# Each body's members are its schema's (gate/bodies/<name>.schema.json, its one home).
BODY_MEMBERS = [
    ("execution", EXECUTION_HASH_MEMBERS),
    ("outcome", OUTCOME_HASH_MEMBERS + OUTCOME_LINK_MEMBERS),
    ("crm-sync", SYNC_HASH_MEMBERS),
]


@pytest.mark.parametrize("body_schema, hash_members", BODY_MEMBERS)
def test_every_request_member_is_stored_in_the_preimage(body_schema, hash_members):
    from gate import bodies

    assert set(bodies.schema(body_schema)["properties"]) <= set(hash_members)


@pytest.mark.parametrize("body_schema, hash_members", BODY_MEMBERS)
def test_problems_are_reported_in_preimage_order_after_decision_id(body_schema, hash_members):
    from gate import bodies

    order = list(bodies.schema(body_schema)["properties"])
    assert order[0] == "decision_id"
    assert order[1:] == [name for name in hash_members if name in order[1:]]
