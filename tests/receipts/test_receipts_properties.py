"""Properties: key order never matters, built receipts are fully compact, arbitrary JSON never
crashes validation, and every valid body yields a receipt that verifies."""

from __future__ import annotations

import random
from datetime import datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from receipts_support import RECORD, REPORTED_AT, golden, record

from gate.errors import GateError
from gate.protocol.records import compact_deep, js_trim
from gate.receipts import (
    EXECUTION_HASH_MEMBERS,
    EXECUTION_STATUSES,
    OUTCOME_HASH_MEMBERS,
    OUTCOME_STATUSES,
    SYNC_DIRECTIONS,
    SYNC_HASH_MEMBERS,
    SYNC_STATUSES,
    build_crm_sync_record,
    build_execution_receipt,
    build_outcome_record,
    execution_hash_of,
    hash_preimage,
    outcome_hash_of,
    sync_hash_of,
    validate_crm_sync_request,
    validate_execution_request,
    validate_outcome_request,
    verify_receipt_links,
)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20).filter(js_trim)
metric_name = st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_.:-]{0,10}\Z")
member_name = st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,10}\Z")
number = st.one_of(st.integers(-(2**53) + 1, 2**53 - 1),
                   st.floats(allow_nan=False, allow_infinity=False, width=64))
timestamp = st.datetimes(min_value=datetime(1970, 1, 1)).map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%S") + "Z")


def _shuffled(value, rng):
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {key: _shuffled(item, rng) for key, item in items}
    if isinstance(value, list):
        return [_shuffled(item, rng) for item in value]
    return value


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_hash_is_independent_of_key_order(seed):
    rng = random.Random(seed)
    for name, hash_member, hash_of in (("execution-receipt.json", "execution_hash", execution_hash_of),
                                       ("outcome-record.json", "outcome_hash", outcome_hash_of),
                                       ("crm-sync.json", "sync_hash", sync_hash_of)):
        receipt = golden(name)["receipt"]
        assert hash_of(_shuffled(receipt, rng)) == receipt[hash_member]


def _without_nones(draw, spec):
    return {key: draw(strategy) for key, strategy in spec.items() if draw(st.booleans())}


@st.composite
def execution_bodies(draw):
    body = _without_nones(draw, {
        "execution_result": st.one_of(text, st.dictionaries(metric_name, st.one_of(text, number, st.booleans()),
                                                            max_size=4)),
        "action_taken": text, "target_system": text, "target_object_id": text, "mutation": text,
        "execution_id": text, "external_ref": text,
        "executor": st.fixed_dictionaries({"type": text, "id": text}),
        "action_binding": st.dictionaries(member_name, text, max_size=5),
        "state_before_hash": st.from_regex(r"\Asha256:[0-9a-f]{8}\Z"),
        "state_after_ref": text,
        "evidence_refs": st.lists(text, max_size=4),
        "executed_at": timestamp,
    })
    body.update(execution_status=draw(st.sampled_from(EXECUTION_STATUSES)),
                decision_record_hash=RECORD["record_hash"], decision_receipt_hash=RECORD["receipt_hash"])
    return body


@st.composite
def outcome_bodies(draw):
    body = _without_nones(draw, {
        "action_executed": st.booleans(), "action_taken": text, "target_system": text,
        "observed_metrics": st.dictionaries(metric_name, number, max_size=6),
        "evidence_refs": st.lists(text, max_size=4), "executed_at": timestamp,
        "decision_record_hash": st.just(RECORD["record_hash"]),
    })
    body["outcome_status"] = draw(st.sampled_from(OUTCOME_STATUSES))
    return body


@st.composite
def crm_bodies(draw):
    body = _without_nones(draw, {
        "sync_direction": st.sampled_from(SYNC_DIRECTIONS), "crm_object_type": text,
        "field_mapping": st.dictionaries(st.from_regex(r"\A[A-Za-z][A-Za-z0-9 _]{0,12}\Z"),
                                         st.from_regex(r"\A[A-Za-z][A-Za-z0-9_]{0,12}\Z"), max_size=6),
        "crm_record_url": st.from_regex(r"\Ahttps://crm\.example/[a-z0-9/]{0,20}\Z"),
        "synced_at": timestamp, "decision_verdict": st.just(RECORD["verdict"]),
    })
    body.update(sync_status=draw(st.sampled_from(SYNC_STATUSES)), crm_provider=draw(text),
                crm_object_id=draw(text))
    return body


def _is_fully_compact(value) -> bool:
    if isinstance(value, dict):
        return all(item not in (None, "", {}, []) and _is_fully_compact(item) for item in value.values())
    if isinstance(value, list):
        return bool(value) and all(_is_fully_compact(item) for item in value)
    return value not in (None, "")


def _check(receipt, members, hash_member, hash_of, lists):
    assert _is_fully_compact(receipt)
    picked = {name: receipt[name] for name in members if name in receipt}
    assert hash_preimage(receipt, members) == compact_deep(picked)  # top-level == deep compaction
    assert receipt[hash_member] == hash_of(receipt)
    assert verify_receipt_links(RECORD, *lists) == []


@SETTINGS
@given(body=execution_bodies())
def test_every_valid_execution_body_builds_a_verifying_compact_receipt(body):
    receipt = build_execution_receipt(body=body, record=record(), execution_receipt_id="e1",
                                      idempotency_key="k", reported_at=REPORTED_AT)
    _check(receipt, EXECUTION_HASH_MEMBERS, "execution_hash", execution_hash_of, ([receipt], [], []))


@SETTINGS
@given(body=outcome_bodies())
def test_every_valid_outcome_body_builds_a_verifying_compact_record(body):
    outcome = build_outcome_record(body=body, record=record(), outcome_id="o1", idempotency_key=None,
                                   reported_at=REPORTED_AT)
    _check(outcome, OUTCOME_HASH_MEMBERS, "outcome_hash", outcome_hash_of, ([], [outcome], []))


@SETTINGS
@given(body=crm_bodies())
def test_every_valid_crm_body_builds_a_verifying_compact_record(body):
    try:
        sync = build_crm_sync_record(body=body, record=record(), sync_id="s1", idempotency_key=None,
                                     reported_at=REPORTED_AT)
    except GateError as error:  # random text may look like a credential; that is the only refusal
        assert error.code == "SVC_CRM_SYNC_CREDENTIALS_FORBIDDEN"
        return
    _check(sync, SYNC_HASH_MEMBERS, "sync_hash", sync_hash_of, ([], [], [sync]))


json_values = st.recursive(
    st.none() | st.booleans() | number | st.text(max_size=10),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
known_members = st.sampled_from(["execution_status", "outcome_status", "sync_status", "executor", "action_binding",
                                 "observed_metrics", "field_mapping", "evidence_refs", "execution_result",
                                 "crm_record_url", "executed_at", "decision_record_hash", "crm_provider"])


@SETTINGS
@given(body=st.dictionaries(st.one_of(known_members, st.text(max_size=8)), json_values, max_size=6) | json_values)
def test_arbitrary_json_only_ever_raises_gate_errors(body):
    for validate in (validate_execution_request, validate_outcome_request, validate_crm_sync_request):
        try:
            validate(body)
        except GateError as error:
            assert error.code in ("REQUEST_INVALID", "SVC_CRM_SYNC_CREDENTIALS_FORBIDDEN")
