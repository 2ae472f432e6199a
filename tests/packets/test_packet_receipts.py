"""Step 3 (receipts) and the two speed-ups of `verify_packet`.

* `_packet_text` composes the canonical packet text member by member so each receipt is
  canonicalised once; it must equal `canonical_text` of the packet without `packet_hash`.
* `_fast_receipt_ok` accepts a receipt without calling `gate.receipts.verify_receipt_links`
  only when that function would find nothing wrong: checked here on valid receipts and on
  hypothesis-mutated ones (fast-accepted ⇒ no failure from the receipts module).
"""

from __future__ import annotations

import contextlib
import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packet_support import anchors, scenario

from gate.packets import (
    _BindingCache,
    _fast_receipt_ok,
    _packet_text,
    _ReceiptTexts,
    verify_packet,
)
from gate.protocol.canonical import canonical_text
from gate.receipts import (
    execution_hash_of,
    outcome_hash_of,
    sync_hash_of,
    verify_receipt_links,
)

BASE = scenario(n_exec=12, execution_limit=12, n_out=6, outcome_limit=6, n_crm=4)
RECORD = BASE.packet["decision_record"]
PARTS = ("execution_receipts", "outcome_records", "crm_sync_records")
HASH_OF = {"execution_receipts": execution_hash_of, "outcome_records": outcome_hash_of, "crm_sync_records": sync_hash_of}
SLOT = {"execution_receipts": "executions", "outcome_records": "outcomes", "crm_sync_records": "syncs"}


def module_failures(part, receipt):
    return verify_receipt_links(RECORD, **{SLOT[part]: [receipt]})


def fast(part, receipt, record=RECORD):
    try:
        text = canonical_text(receipt)
    except Exception:  # noqa: BLE001
        text = None
    return _fast_receipt_ok(part, receipt, text, record, _BindingCache(record))


def test_packet_text_is_the_canonical_text():
    packet = BASE.packet
    texts = _ReceiptTexts()
    assert _packet_text(packet, texts) == canonical_text({k: v for k, v in packet.items() if k != "packet_hash"})
    assert [len(texts.by_part[p]) for p in PARTS] == [12, 6, 4]


def test_valid_receipts_take_the_fast_path():
    for part in PARTS:
        for receipt in BASE.packet[part]:
            assert module_failures(part, receipt) == []
            assert fast(part, receipt), (part, receipt)


def test_receipt_failures_are_the_receipts_modules():
    packet = copy.deepcopy(BASE.packet)
    packet["execution_receipts"][4]["mutation"] = "discount.delete"
    packet["outcome_records"][2]["decision_verdict"] = "no"
    packet["crm_sync_records"][0]["sync_status"] = "synced"
    result = verify_packet(packet, anchors=anchors())
    expected = set()
    for part in PARTS:
        for index, receipt in enumerate(packet[part]):
            expected |= {f"{part}[{index}].{f.check}" for f in module_failures(part, receipt)}
    assert expected == {name for name in result.failed_checks if "[" in name}
    assert {"execution_receipts[4].execution_hash", "outcome_records[2].decision_verdict",
            "crm_sync_records[0].sync_status"} <= expected


def test_legacy_shaped_receipts_go_to_the_receipts_module():
    """Null, "" and {} members are compacted away by the hash rule; the fast path leaves them
    to the receipts module, which accepts them when the hash still matches."""
    receipt = copy.deepcopy(BASE.packet["execution_receipts"][0])
    receipt["external_ref"] = ""
    receipt["execution_result"] = {}
    receipt["state_before_ref"] = None
    assert not fast("execution_receipts", receipt)
    assert module_failures("execution_receipts", receipt) == []


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10) | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(max_size=6),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=6,
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fast_acceptance_implies_the_receipts_module_accepts(data):
    part = data.draw(st.sampled_from(PARTS), label="part")
    receipt = copy.deepcopy(data.draw(st.sampled_from(BASE.packet[part]), label="receipt"))
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        member = data.draw(st.sampled_from(sorted(receipt) + ["note", "execution_hash", "action_binding"]), label="member")
        action = data.draw(st.sampled_from(["value", "delete", "nested_hash"]), label="action")
        if action == "delete":
            receipt.pop(member, None)
        elif action == "nested_hash":
            receipt[member] = {"execution_hash": receipt.get("execution_hash"), "outcome_hash": receipt.get("outcome_hash")}
        else:
            receipt[member] = data.draw(JSON_VALUES, label="value")
    if data.draw(st.booleans(), label="reseal"):
        hash_member = {"execution_receipts": "execution_hash", "outcome_records": "outcome_hash",
                       "crm_sync_records": "sync_hash"}[part]
        with contextlib.suppress(Exception):  # unhashable content stays as it is
            receipt[hash_member] = HASH_OF[part](receipt)
    if fast(part, receipt):
        assert module_failures(part, receipt) == [], receipt
