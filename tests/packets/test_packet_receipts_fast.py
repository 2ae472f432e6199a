"""`_fast_receipt_ok` condition by condition: a receipt resealed after one edit (its hash recomputed
over the edited text, so only the edited condition can refuse it) leaves the fast path exactly
when the gate would not have built it so; and the helpers it relies on."""

from __future__ import annotations

import copy

import pytest
from packet_support import scenario

from gate.packets import _BindingCache, _fast_receipt_ok, _packet_text, _ReceiptTexts
from gate.protocol.canonical import canonical_text, sha256_hex

BASE = scenario(n_exec=1, execution_limit=1, n_out=1, outcome_limit=1, n_crm=1, include_chain=False, reports=False)
RECORD = BASE.packet["decision_record"]
HASH = {"execution_receipts": "execution_hash", "outcome_records": "outcome_hash", "crm_sync_records": "sync_hash"}
PARTS = tuple(HASH)


def receipt(part: str, **changes) -> dict:
    """The scenario's receipt of `part` with `changes` (None deletes a member), resealed."""
    item = copy.deepcopy(BASE.packet[part][0])
    for name, value in changes.items():
        if value is None:
            item.pop(name, None)
        else:
            item[name] = value
    return reseal(part, item)


def reseal(part: str, item: dict) -> dict:
    item[HASH[part]] = sha256_hex({k: v for k, v in item.items() if k != HASH[part]})
    return item


def fast(part: str, item, record=RECORD) -> bool:
    return _fast_receipt_ok(part, item, canonical_text(item), record, _BindingCache(record))


@pytest.mark.parametrize("part", PARTS)
def test_a_receipt_as_the_gate_builds_it_takes_the_fast_path(part):
    assert fast(part, BASE.packet[part][0]) is True
    assert fast(part, receipt(part)) is True  # resealing an unedited receipt changes nothing


@pytest.mark.parametrize("part", PARTS)
def test_no_object_no_text_or_a_stated_hash_that_is_not_hex64_leaves_the_fast_path(part):
    item = BASE.packet[part][0]
    assert _fast_receipt_ok(part, [item], canonical_text([item]), RECORD, _BindingCache(RECORD)) is False
    assert _fast_receipt_ok(part, item, None, RECORD, _BindingCache(RECORD)) is False
    for stated in (None, item[HASH[part]].upper(), item[HASH[part]][:63]):
        edited = dict(item, **{HASH[part]: stated})
        assert fast(part, edited) is False, stated


@pytest.mark.parametrize("part", PARTS)
@pytest.mark.parametrize("changes", [
    {"note": "x"},  # a member outside the preimage
    {"external_ref": ""}, {"evidence_refs": {}}, {"decision_found": 1},
    {"decision_protocol_version": "decision_protocol_v0"}, {"decision_protocol_version": None},
    {"decision_found": False}, {"decision_verdict": "no"}, {"policy_id": "another_policy"},
    {"policy_bundle_hash": None}, {"decision_record_hash": "0" * 64},
])
def test_a_resealed_receipt_that_the_gate_would_not_build_leaves_the_fast_path(part, changes):
    assert fast(part, receipt(part, **changes)) is False


def test_a_member_that_is_null_or_not_a_plain_json_type_leaves_the_fast_path():
    # A tuple has the canonical text of a list, but the gate never builds one.
    for value in (None, ("log:00000",)):
        item = copy.deepcopy(BASE.packet["execution_receipts"][0])
        item["evidence_refs"] = value
        assert fast("execution_receipts", reseal("execution_receipts", item)) is False


@pytest.mark.parametrize("part, version_member", [
    ("execution_receipts", "decision_execution_version"), ("outcome_records", "decision_outcome_version"),
    ("crm_sync_records", "decision_crm_sync_version"),
])
def test_another_receipt_version_leaves_the_fast_path(part, version_member):
    assert fast(part, receipt(part, **{version_member: "v0"})) is False
    assert fast(part, receipt(part, **{version_member: None})) is False


@pytest.mark.parametrize("part, member, value", [
    ("execution_receipts", "execution_status", "done"), ("execution_receipts", "execution_status", 1),
    ("outcome_records", "outcome_status", "partial"), ("crm_sync_records", "sync_status", "synced"),
    ("crm_sync_records", "sync_direction", "sideways"), ("crm_sync_records", "sync_direction", None),
])
def test_a_status_outside_its_closed_set_leaves_the_fast_path(part, member, value):
    assert fast(part, receipt(part, **{member: value})) is False


def test_a_record_member_both_sides_lack_is_skipped_and_the_ones_after_it_still_compared():
    record = {k: v for k, v in RECORD.items() if k != "action"}
    assert fast("outcome_records", receipt("outcome_records", decision_action=None), record) is True
    edited = receipt("outcome_records", decision_action=None, policy_id="another_policy")
    assert fast("outcome_records", edited, record) is False


def test_record_members_must_be_equal_text_on_both_sides():
    record = dict(RECORD, policy_version=7)
    assert fast("crm_sync_records", receipt("crm_sync_records", policy_version=7), record) is False


def test_an_execution_receipts_binding_must_be_an_object_with_its_hash_and_match():
    part = "execution_receipts"
    assert fast(part, receipt(part, action_binding=["x"])) is False
    assert fast(part, receipt(part, action_binding_hash="0" * 64)) is False
    assert fast(part, receipt(part, action_binding_match=False)) is False
    assert fast(part, receipt(part, action_binding_match=1)) is False
    # A binding the record does not match: the gate states match false, and so must the receipt.
    other = {"proposed_action": "refund", "target_system": "billing"}
    bindings = _BindingCache(RECORD)
    digest, match = bindings.get(other)
    assert match is False
    item = receipt(part, action_binding=other, action_binding_hash=digest, action_binding_match=False)
    assert fast(part, item) is True
    assert fast(part, reseal(part, dict(item, action_binding_match=True))) is False


def test_an_outcome_records_binding_must_be_the_records():
    part = "outcome_records"
    assert fast(part, receipt(part, action_binding=["x"])) is False
    assert fast(part, receipt(part, action_binding=dict(RECORD["action_binding"], actor="someone"))) is False
    record = {k: v for k, v in RECORD.items() if k != "action_binding"}
    assert fast(part, receipt(part), record) is False


def test_the_binding_cache_keys_flat_text_bindings_by_value_and_others_by_canonical_text():
    bindings = _BindingCache(RECORD)
    assert bindings.record_binding == RECORD["action_binding"]
    assert bindings.record_binding_text == canonical_text(RECORD["action_binding"])
    flat = dict(BASE.packet["execution_receipts"][0]["action_binding"])
    first = bindings.get(flat)
    assert first == (sha256_hex(flat), True)
    assert bindings.get(dict(flat)) == first and len(bindings.items) == 1
    nested = {"proposed_action": "apply_discount", "limits": {"max": 15}}
    assert bindings.get(nested)[0] == sha256_hex(nested)
    assert bindings.get({"proposed_action": True})[0] == sha256_hex({"proposed_action": True})
    assert bindings.get({"proposed_action": 1})[0] == sha256_hex({"proposed_action": 1})
    assert len(bindings.items) == 4
    assert bindings.get({"proposed_action": float("nan")}) is None
    assert _BindingCache({"action_binding": "not an object"}).record_binding_text is None


def test_packet_text_composes_the_canonical_text_even_when_a_listed_part_is_not_a_list():
    packet = copy.deepcopy(BASE.packet)
    packet["outcome_records"] = {"b": 1, "a": [2]}
    texts = _ReceiptTexts()
    assert _packet_text(packet, texts) == canonical_text({k: v for k, v in packet.items() if k != "packet_hash"})
    assert set(texts.by_part) == {"execution_receipts", "crm_sync_records"}
    assert texts.by_part["execution_receipts"] == [canonical_text(BASE.packet["execution_receipts"][0])]


def test_the_binding_cache_keeps_different_bindings_apart_and_computes_each_once(monkeypatch):
    import gate.packets.receipts_fast as receipts_fast

    calls = []
    real = receipts_fast.action_binding_match
    monkeypatch.setattr(receipts_fast, "action_binding_match",
                        lambda record_binding, binding: calls.append(binding) or real(record_binding, binding))
    bindings = _BindingCache(RECORD)
    one, other = {"proposed_action": "apply_discount"}, {"proposed_action": "refund"}
    nested = {"limits": {"max": 15}}  # no text value: keyed by its canonical text
    for binding in (one, other, nested, dict(one), dict(other), {"limits": {"max": 15}}):
        assert bindings.get(binding)[0] == sha256_hex(binding)
    assert calls == [one, other, nested]


def test_a_record_member_that_is_not_plain_text_leaves_the_fast_path():
    class Text(str):
        pass

    record = dict(RECORD, verdict=Text(RECORD["verdict"]))
    assert fast("crm_sync_records", receipt("crm_sync_records"), record) is False


@pytest.mark.parametrize("part", PARTS)
def test_a_second_copy_of_the_stated_hash_inside_a_member_leaves_the_fast_path(part):
    item = copy.deepcopy(BASE.packet[part][0])
    member = {"execution_receipts": "executor", "outcome_records": "observed_metrics",
              "crm_sync_records": "field_mapping"}[part]
    item[member] = dict(item[member], **{HASH[part]: item[HASH[part]]})
    assert fast(part, item) is False


def test_the_hash_member_is_never_first_so_the_cut_takes_the_comma_before_it():
    for part in PARTS:
        text = canonical_text(BASE.packet[part][0])
        assert 1 <= text.index('"decision_protocol_version":') < text.index('"' + HASH[part] + '":')
