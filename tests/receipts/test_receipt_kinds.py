"""The receipt kinds as values (`gate.receipts.kinds`): each TypedDict states its kind's members
in the preimage order, and every golden receipt, and one built with every member, fits it."""

from __future__ import annotations

import types
import typing

import pytest
from receipts_support import RECORD, REPORTED_AT, crm_body, execution_body, golden, outcome_body, record

from gate.receipts import (
    EXECUTION_HASH_MEMBERS,
    OUTCOME_HASH_MEMBERS,
    OUTCOME_LINK_MEMBERS,
    SYNC_HASH_MEMBERS,
    build_crm_sync_record,
    build_execution_receipt,
    build_outcome_record,
)
from gate.receipts.kinds import CrmSyncRecord, ExecutionReceipt, OutcomeRecord

SHAPES = {
    "execution": (ExecutionReceipt, (*EXECUTION_HASH_MEMBERS, "execution_hash")),
    "outcome": (OutcomeRecord, (*OUTCOME_HASH_MEMBERS, "outcome_hash", *OUTCOME_LINK_MEMBERS)),
    "crm_sync": (CrmSyncRecord, (*SYNC_HASH_MEMBERS, "sync_hash")),
}
ACTION = {"action_taken": "update_price", "target_system": "crm", "target_object_id": "deal-1", "mutation": "update",
          "external_ref": "ref-1", "executed_at": "2026-05-21T00:00:05.000Z", "evidence_refs": ["ev-1"]}


def _fits(value: object, hint: object) -> bool:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return any(_fits(value, arm) for arm in typing.get_args(hint))
    if typing.is_typeddict(hint):
        return isinstance(value, dict) and all(_fits(value[k], h) for k, h in typing.get_type_hints(hint).items()
                                               if k in value)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is list:
        return isinstance(value, list) and all(_fits(item, args[0]) for item in value)
    if origin is dict:
        return isinstance(value, dict) and all(_fits(k, args[0]) and _fits(v, args[1]) for k, v in value.items())
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)  # type: ignore[arg-type]


def _check(kind: str, receipt: dict) -> None:
    shape, _ = SHAPES[kind]
    hints = typing.get_type_hints(shape)
    assert shape.__required_keys__ <= set(receipt) <= set(hints)
    assert list(receipt) == [name for name in hints if name in receipt]  # the TypedDict's order
    for name, value in receipt.items():
        assert _fits(value, hints[name]), (name, value)


@pytest.mark.parametrize("kind", SHAPES)
def test_a_kind_states_its_preimage_members_in_order(kind):
    shape, members = SHAPES[kind]
    assert tuple(shape.__annotations__) == members


@pytest.mark.parametrize("name, kind", [("execution-receipt.json", "execution"),
                                        ("execution-receipt-unmatched.json", "execution"),
                                        ("outcome-record.json", "outcome"), ("crm-sync.json", "crm_sync")])
def test_every_golden_receipt_fits_its_kind(name, kind):
    _check(kind, golden(name)["receipt"])


def test_receipts_built_with_every_member_fit_their_kind():
    common = {"record": record(), "idempotency_key": "key-1", "reported_at": REPORTED_AT}
    execution = build_execution_receipt(
        body=execution_body(**ACTION, execution_result={"rows": 1, "ok": True}, execution_id="run-1",
                            executor={"type": "agent", "id": "bot-1"}, state_before_hash="a" * 64,
                            state_after_hash="b" * 64, state_before_ref="s-1", state_after_ref="s-2"),
        execution_receipt_id="exe_1", **common)
    _check("execution", execution)
    outcome = build_outcome_record(
        body=outcome_body(**ACTION, action_executed=True, observed_metrics={"revenue": 12.5, "count": 3},
                          decision_record_hash=RECORD["record_hash"], decision_receipt_hash=RECORD["receipt_hash"],
                          execution_receipt_id="exe_1", execution_hash=execution["execution_hash"]),
        outcome_id="out_1", execution_lookup=lambda _id: execution, **common)
    _check("outcome", outcome)
    sync = build_crm_sync_record(
        body=crm_body(crm_object_type="deal", crm_record_url="https://crm.example/deal/9912734",
                      field_mapping={"price": "amount"}, external_ref="ref-1", synced_at="2026-05-21T00:00:06.000Z"),
        sync_id="crm_1", **common)
    _check("crm_sync", sync)
    for receipt, (shape, _) in zip((execution, outcome, sync), SHAPES.values(), strict=True):
        assert set(receipt) == set(shape.__annotations__)  # every member stated, so every hint was checked
