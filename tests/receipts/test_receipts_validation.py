"""Request validation: every problem path with its exact field and code, all problems at once."""

from __future__ import annotations

import pytest
from receipts_support import RECORD, crm_body, execution_body, outcome_body, problems

from gate.errors import GateError
from gate.receipts import (
    validate_crm_sync_request,
    validate_execution_request,
    validate_outcome_request,
)

EXE, OUT, CRM = validate_execution_request, validate_outcome_request, validate_crm_sync_request
HASH = RECORD["record_hash"]
LONG = "x" * 301


CASES = [
    # --- body shape and closed objects
    (EXE, [1, 2], [("$", "invalid_type")]),
    (OUT, "text", [("$", "invalid_type")]),
    (CRM, None, [("$", "invalid_type")]),
    (EXE, execution_body(extra=1), [("extra", "unknown_field")]),
    (OUT, outcome_body(action_binding={"a": "b"}), [("action_binding", "unknown_field")]),
    (CRM, crm_body(sync_id="s1"), [("sync_id", "unknown_field")]),
    (EXE, execution_body(executor={"type": "agent", "id": "a1", "name": "x"}), [("executor.name", "unknown_field")]),
    # --- required members
    (EXE, {}, [("execution_status", "missing_field"), ("decision_record_hash", "missing_field"),
               ("decision_receipt_hash", "missing_field")]),
    (EXE, execution_body(execution_status=None), [("execution_status", "missing_field")]),
    (EXE, execution_body(execution_status="  "), [("execution_status", "missing_field")]),
    (OUT, {}, [("outcome_status", "missing_field")]),
    (CRM, {}, [("sync_status", "missing_field"), ("crm_provider", "missing_field")]),
    (CRM, {"sync_status": "written", "crm_provider": "hubspot"}, [("crm_object_id", "missing_field")]),
    # a written sync's object id that is already refused is not also reported missing
    (CRM, crm_body(crm_object_id=5), [("crm_object_id", "invalid_type")]),
    (CRM, crm_body(crm_object_id="i" * 301), [("crm_object_id", "too_long")]),
    (EXE, execution_body(executor={}), [("executor.type", "missing_field"), ("executor.id", "missing_field")]),
    (EXE, execution_body(executor={"type": " ", "id": None}), [("executor.type", "missing_field"),
                                                             ("executor.id", "missing_field")]),
    # --- closed value sets
    (EXE, execution_body(execution_status="done"), [("execution_status", "invalid_value")]),
    (EXE, execution_body(execution_status="Executed"), [("execution_status", "invalid_value")]),
    (OUT, outcome_body(outcome_status="partial"), [("outcome_status", "invalid_value")]),
    (CRM, crm_body(sync_status="synced"), [("sync_status", "invalid_value")]),
    (CRM, crm_body(sync_direction="bidirectional"), [("sync_direction", "invalid_value")]),
    (CRM, crm_body(decision_verdict="approved"), [("decision_verdict", "invalid_value")]),
    (EXE, execution_body(execution_status=1), [("execution_status", "invalid_type")]),
    # --- types
    (EXE, execution_body(action_taken=5), [("action_taken", "invalid_type")]),
    (EXE, execution_body(executor="svc"), [("executor", "invalid_type")]),
    (EXE, execution_body(executor={"type": 1, "id": 2}), [("executor.type", "invalid_type"), ("executor.id", "invalid_type")]),
    (EXE, execution_body(action_binding=["a"]), [("action_binding", "invalid_type")]),
    (EXE, execution_body(action_binding={"system": 3}), [("action_binding.system", "invalid_type")]),
    (EXE, execution_body(evidence_refs="ref"), [("evidence_refs", "invalid_type")]),
    (EXE, execution_body(evidence_refs=["ok", 7, ""]), [("evidence_refs[1]", "invalid_type"),
                                                         ("evidence_refs[2]", "invalid_value")]),
    (EXE, execution_body(execution_result=12), [("execution_result", "invalid_type")]),
    (EXE, execution_body(execution_result={"a": [1]}), [("execution_result.a", "invalid_type")]),
    (EXE, execution_body(execution_result={"a": ""}), [("execution_result.a", "invalid_value")]),
    (EXE, execution_body(execution_result={"bad name": 1}), [("execution_result.bad name", "invalid_format")]),
    # Infinity and NaN are no JSON numbers (a caller in process could pass them; the parser of a
    # request's text refuses them first), so they are the wrong type, as any other non-number.
    (EXE, execution_body(execution_result={"n": float("inf")}), [("execution_result.n", "invalid_type")]),
    (OUT, outcome_body(action_executed="yes"), [("action_executed", "invalid_type")]),
    (OUT, outcome_body(observed_metrics=[1]), [("observed_metrics", "invalid_type")]),
    (OUT, outcome_body(observed_metrics={"m": "1"}), [("observed_metrics.m", "invalid_type")]),
    (OUT, outcome_body(observed_metrics={"m": True}), [("observed_metrics.m", "invalid_type")]),
    (OUT, outcome_body(observed_metrics={"m": float("nan")}), [("observed_metrics.m", "invalid_type")]),
    (OUT, outcome_body(observed_metrics={"m": 2**53}), [("observed_metrics.m", "invalid_value")]),
    (OUT, outcome_body(observed_metrics={"9lives": 1, "a b": 2}), [("observed_metrics.9lives", "invalid_format"),
                                                                  ("observed_metrics.a b", "invalid_format")]),
    (CRM, crm_body(field_mapping="a=b"), [("field_mapping", "invalid_type")]),
    (CRM, crm_body(field_mapping={"a": 1}), [("field_mapping.a", "invalid_type")]),
    (CRM, crm_body(field_mapping={"a": " "}), [("field_mapping.a", "invalid_value")]),
    (CRM, crm_body(field_mapping={"": "x"}), [("field_mapping.", "invalid_value")]),
    # --- formats
    (EXE, execution_body(decision_record_hash="sha256:" + HASH), [("decision_record_hash", "invalid_format")]),
    (EXE, execution_body(decision_receipt_hash=HASH.upper()), [("decision_receipt_hash", "invalid_format")]),
    (EXE, execution_body(decision_record_hash=HASH + "\n"), [("decision_record_hash", "invalid_format")]),
    (EXE, execution_body(executed_at="\u0662\u0660\u0662\u0666-05-21T00:00:00Z"), [("executed_at", "invalid_format")]),
    (OUT, outcome_body(observed_metrics={"revenue\n": 1}), [("observed_metrics.revenue\n", "invalid_format")]),
    (EXE, execution_body(action_binding={"system\n": "x"}), [("action_binding.system\n", "invalid_format")]),
    (OUT, outcome_body(decision_record_hash=123), [("decision_record_hash", "invalid_type")]),
    (EXE, execution_body(state_before_hash="sha256: with space"), [("state_before_hash", "invalid_format")]),
    (EXE, execution_body(executed_at="2026-05-21 00:00:00Z"), [("executed_at", "invalid_format")]),
    (EXE, execution_body(executed_at="2026-05-21T00:00:00+02:00"), [("executed_at", "invalid_format")]),
    (OUT, outcome_body(executed_at="2026-02-30T00:00:00Z"), [("executed_at", "invalid_format")]),
    (CRM, crm_body(synced_at="yesterday"), [("synced_at", "invalid_format")]),
    (EXE, execution_body(action_binding={"bad-name": "x"}), [("action_binding.bad-name", "invalid_format")]),
    (CRM, crm_body(crm_record_url="ftp://crm.example/x"), [("crm_record_url", "invalid_value")]),
    (CRM, crm_body(crm_record_url="javascript:alert(1)"), [("crm_record_url", "invalid_format")]),
    (CRM, crm_body(crm_record_url="/relative/path"), [("crm_record_url", "invalid_format")]),
    (CRM, crm_body(crm_record_url="https://crm.example/a b"), [("crm_record_url", "invalid_format")]),
    (CRM, crm_body(crm_record_url="https://crm.example:99999/"), [("crm_record_url", "invalid_format")]),
    (CRM, crm_body(crm_record_url="https://[::1/"), [("crm_record_url", "invalid_format")]),
    # --- lengths and counts
    (EXE, execution_body(target_object_id=LONG), [("target_object_id", "too_long")]),
    (EXE, execution_body(action_taken="a" * 161), [("action_taken", "too_long")]),
    (EXE, execution_body(state_after_ref="s" * 801), [("state_after_ref", "too_long")]),
    (EXE, execution_body(state_after_hash="h" * 201), [("state_after_hash", "too_long")]),
    (EXE, execution_body(execution_result="r" * 501), [("execution_result", "too_long")]),
    (EXE, execution_body(executor={"type": "t" * 161, "id": "i" * 301}), [("executor.type", "too_long"),
                                                                          ("executor.id", "too_long")]),
    (EXE, execution_body(decision_id="d" * 601), [("decision_id", "too_long")]),
    (EXE, execution_body(action_taken="😀" * 81), [("action_taken", "too_long")]),  # 162 UTF-16 units
    (EXE, execution_body(evidence_refs=["r"] * 33), [("evidence_refs", "too_many")]),
    (EXE, execution_body(action_binding={f"m{i}": "v" for i in range(33)}), [("action_binding", "too_many")]),
    (EXE, execution_body(execution_result={f"m{i}": 1 for i in range(33)}), [("execution_result", "too_many")]),
    (OUT, outcome_body(observed_metrics={f"m{i}": i for i in range(65)}), [("observed_metrics", "too_many")]),
    (CRM, crm_body(field_mapping={f"f{i}": "x" for i in range(101)}), [("field_mapping", "too_many")]),
    (CRM, crm_body(field_mapping={"k" * 161: "x"}), [("field_mapping." + "k" * 161, "too_long")]),
    (CRM, crm_body(field_mapping={"k": "v" * 161}), [("field_mapping.k", "too_long")]),
    (CRM, crm_body(crm_record_url="https://crm.example/" + "p" * 781), [("crm_record_url", "too_long")]),
]


@pytest.mark.parametrize("validator, body, expected", CASES)
def test_every_problem_has_its_exact_field_and_code(validator, body, expected):
    assert problems(validator, body) == expected


def test_all_problems_are_listed_unknown_members_first():
    body = {"zzz": 1, "execution_status": "nope", "action_taken": 3, "aaa": 2,
            "executor": {"type": "svc"}, "decision_receipt_hash": "x"}
    assert problems(EXE, body) == [
        ("aaa", "unknown_field"),  # sorted: the same refusal whatever order the body was written in
        ("zzz", "unknown_field"),
        ("execution_status", "invalid_value"),
        ("action_taken", "invalid_type"),
        ("executor.id", "missing_field"),
        ("decision_record_hash", "missing_field"),
        ("decision_receipt_hash", "invalid_format"),
    ]


def test_error_message_counts_problems_and_names_the_first():
    from gate.errors import GateError

    with pytest.raises(GateError) as caught:
        EXE({"execution_status": "x"})
    assert caught.value.message.startswith("execution receipt request is invalid (3 problems)")
    assert "execution_status" in caught.value.message


def test_outcome_messages_name_the_outcome_request():
    from gate.errors import GateError

    with pytest.raises(GateError) as caught:
        OUT({"outcome_status": "succeeded", "extra": 1})
    assert caught.value.message == (
        "outcome request is invalid (1 problem); first: extra: extra is not a member of the outcome request")


@pytest.mark.parametrize("validator, body", [
    (EXE, execution_body(action_taken="a" * 160, target_object_id="i" * 300, state_after_ref="s" * 800,
                         state_after_hash="h" * 200, execution_result="r" * 500,
                         evidence_refs=["r"] * 32, action_binding={f"m{i}": "v" for i in range(32)},
                         decision_id="d" * 600, executed_at="2024-02-29T23:59:59.123456789Z")),
    (EXE, execution_body(action_taken="😀" * 80)),  # exactly 160 UTF-16 units
    (OUT, outcome_body(observed_metrics={f"m{i}": i for i in range(64)}, executed_at="2026-05-21T00:00:00+00:00")),
    (CRM, crm_body(field_mapping={f"f{i}": "x" * 160 for i in range(100)},
                   crm_record_url="https://crm.example/" + "p" * 780)),
])
def test_values_at_the_limits_are_accepted(validator, body):
    # Accepted means kept: every value at its limit comes back unchanged (issue 12 gap 7); the
    # only addition is the CRM default direction.
    defaults = {"sync_direction": "writeback"} if validator is CRM else {}
    assert validator(body) == {**defaults, **body}


def test_normalization_trims_text_and_drops_absent_members():
    fields = EXE(execution_body(action_taken="  apply_discount\u00a0", target_system="", mutation=None,
                                executor={"type": " service ", "id": "w1"}, evidence_refs=[" a "]))
    assert fields["action_taken"] == "apply_discount"
    assert "target_system" not in fields and "mutation" not in fields
    assert fields["executor"] == {"type": "service", "id": "w1"}
    assert fields["evidence_refs"] == ["a"]
    assert EXE(execution_body(action_binding={}, execution_result={})).keys() == execution_body().keys()


def test_crm_sync_direction_defaults_to_writeback_and_object_id_is_optional_unless_written():
    assert CRM(crm_body())["sync_direction"] == "writeback"
    assert CRM(crm_body(sync_direction="inbound"))["sync_direction"] == "inbound"
    fields = CRM({"sync_status": "failed", "crm_provider": "salesforce"})
    assert "crm_object_id" not in fields


def test_outcome_and_crm_record_hashes_are_optional_execution_ones_are_not():
    assert OUT({"outcome_status": "pending"}) == {"outcome_status": "pending"}
    assert ("decision_record_hash", "missing_field") in problems(EXE, {"execution_status": "executed"})


def test_metrics_accept_integers_floats_and_negative_numbers():
    fields = OUT(outcome_body(observed_metrics={"a": 1, "b": -2.5, "c.d": 0, "e:f-g_h": 1e-7}))
    assert fields["observed_metrics"] == {"a": 1, "b": -2.5, "c.d": 0, "e:f-g_h": 1e-7}


LINK_ID, LINK_HASH = "exr_0123456789abcdef", "e" * 64


def _link_problems(body) -> list[dict[str, str]]:
    with pytest.raises(GateError) as caught:
        OUT(body)
    return caught.value.details["errors"]


def test_an_outcome_names_its_execution_by_both_members_or_by_neither():
    """Issue 41, item 7: execution_receipt_id and execution_hash together, or neither; one alone
    is `missing_field` for the other, with the message that says why."""
    both = OUT(outcome_body(execution_receipt_id=LINK_ID, execution_hash=LINK_HASH))
    assert (both["execution_receipt_id"], both["execution_hash"]) == (LINK_ID, LINK_HASH)
    neither = OUT(outcome_body())
    assert "execution_receipt_id" not in neither and "execution_hash" not in neither
    assert _link_problems(outcome_body(execution_receipt_id=LINK_ID)) == [{
        "field": "execution_hash", "code": "missing_field",
        "message": "execution_hash is required with execution_receipt_id: a link names the execution receipt by both"}]
    assert _link_problems(outcome_body(execution_hash=LINK_HASH)) == [{
        "field": "execution_receipt_id", "code": "missing_field",
        "message": "execution_receipt_id is required with execution_hash: a link names the execution receipt by both"}]


def test_a_malformed_link_member_is_named_once_not_also_missing():
    assert problems(OUT, outcome_body(execution_receipt_id=LINK_ID, execution_hash="E" * 64)) == [
        ("execution_hash", "invalid_format")]
    assert problems(OUT, outcome_body(execution_receipt_id=5, execution_hash=LINK_HASH)) == [
        ("execution_receipt_id", "invalid_type")]
    assert problems(OUT, outcome_body(execution_receipt_id=None, execution_hash=LINK_HASH)) == [
        ("execution_receipt_id", "missing_field")]
