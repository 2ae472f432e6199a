"""The receipts' bodies (gate/bodies/execution, outcome and crm-sync) checked by their schema alone.

Each member names a shared kind of value in its file's `$defs` (`label`, `hex64`, `timestamp`, …)
or states its own. Over generated bodies whose members are drawn from values at the edges of each
kind (null, blank and padded text, wrong types, hashes of the wrong case or length, UTF-16 limits),
a refusal names exactly the members drawn from the refused values, each once, in the body's order,
and an accepted body reads as its members trimmed with null and blank left out. What no schema
states (the CRM sync's credential scan) is named in `test_what_the_schemas_do_not_state`.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gate import bodies
from gate.bodies.text import JS_WHITESPACE, js_trim
from gate.errors import GateError
from gate.receipts import validation as V

HASH = "0123456789abcdef" * 4
TEXT = ([None, "x", " padded\t", "", " \u3000", "\U0001F600" * 80], [7, True, ["x"], "x" * 801])
# Per kind of value (a `$defs` name): values it takes (null and blank among them where an optional
# member reads them as absent), then values it refuses.
VALUES: dict[str, tuple[list[Any], list[Any]]] = {
    "label": ([*TEXT[0], "x" * 160], [*TEXT[1], "x" * 161, "\U0001F600" * 80 + "x"]),
    "identifier": ([*TEXT[0], "x" * 300], [*TEXT[1], "x" * 301]),
    "reference": ([*TEXT[0], "x" * 800], TEXT[1]),
    "decision-id": ([*TEXT[0], "x" * 600], [*TEXT[1], "x" * 601]),
    "label-required": (["x", " padded\t", "x" * 160], [None, "", " \u3000", 7, "x" * 161]),
    "hex64": ([None, HASH], [HASH.upper(), HASH[:-1], "", " " + HASH, 64]),
    "hex64-required": ([HASH], [None, "", HASH.upper(), 64]),
    "boolean": ([None, True, False], ["true", 0]),
    "opaque-hash": ([None, "sha256:ab/c=", " ab ", ""], ["a b", "é", 3, "x" * 201]),
    "timestamp": ([None, "2026-05-21T00:00:00Z", " 2026-05-21T00:00:00.123+00:00 ", "", "2024-02-29T00:00:00Z"],
                  ["2026-13-01T00:00:00Z", "2026-05-21", "2026-05-21T00:00:00+01:00", 1, "2026-02-29T00:00:00Z"]),
    "evidence-refs": ([None, [], ["ev1"], [" ev1 "]], [[""], [" "], [1], "ev1", ["ev1"] * 33]),
    "executor": ([None, {"type": "agent", "id": "a1"}],
                 [{"type": " ", "id": "a1"}, {"type": "agent"}, {"type": "agent", "id": "a1", "x": 1}, "agent"]),
    "action_binding": ([None, {}, {"order_id": "o1"}], [{"order-id": "o1"}, {"order_id": ""}, {"n": 1}, []]),
    "observed_metrics": ([None, {}, {"rate.x": 1.5}], [{"1bad": 1}, {"m": "1"}, {"m": True}, [1], {"m": 2 ** 53}]),
    "field_mapping": ([None, {}, {"Name": " name "}], [{" ": "name"}, {"a": ""}, {"a": 1}, "a", {"k" * 161: "v"}]),
    "crm_record_url": ([None, "https://crm.example/r/1", " http://crm.example:8080 ", "", "HTTPS://CRM.example/r/1"],
                       ["ftp://crm.example", "https://", "https://crm .example", 5]),
    "execution_result": ([None, "done", "", {"rows": 3}, {"ok": True, "id": " x "}],
                         [{"id": ""}, {"1x": 1}, {"a": None}, [1], 2, "x" * 501]),
}
KINDS = ("execution", "outcome", "crm-sync")
VALIDATE = {"execution": V.validate_execution_request, "outcome": V.validate_outcome_request,
            "crm-sync": V.validate_crm_sync_request}
# Members a rule across members may require (the outcome's link, the CRM write's object id), so a
# body with them drawn is left out of the exact comparison below.
ACROSS = {"execution_receipt_id", "execution_hash", "crm_object_id", "sync_status"}


def _kind_of(name: str, member: str) -> str:
    node = bodies.schema(name)["properties"][member]
    return node["$ref"].rsplit("/", 1)[1] if "$ref" in node else member


def _values(name: str, member: str) -> tuple[list[Any], list[Any]]:
    node = bodies.schema(name)["properties"][member]
    if "enum" in node:
        allowed = [value for value in node["enum"] if value is not None]
        required = member in bodies.schema(name)["required"]
        return ([*allowed] if required else [None, *allowed]), [allowed[0].upper(), " " + allowed[0], 1]
    return VALUES[_kind_of(name, member)]


@st.composite
def _body(draw: st.DrawFn, name: str) -> tuple[dict[str, Any], set[str]]:
    """A body and the members drawn from refused values (required members mostly present)."""
    members = [member for member in bodies.schema(name)["properties"] if member not in ACROSS]
    required = [member for member in bodies.schema(name)["required"] if member not in ACROSS]
    chosen = set(draw(st.lists(st.sampled_from(members), unique=True)))
    chosen |= set(required)
    wrong = set(draw(st.lists(st.sampled_from(sorted(chosen)), max_size=2)))
    body = {member: draw(st.sampled_from(_values(name, member)[member in wrong])) for member in members if member in chosen}
    if name == "crm-sync":
        body["sync_status"] = "pending"
    if name == "outcome":
        body.setdefault("outcome_status", "succeeded")
    return body, wrong


@pytest.mark.parametrize("name", KINDS)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_refusal_names_exactly_the_members_drawn_wrong_and_a_pass_reads_them_trimmed(name, data):
    body, wrong = data.draw(_body(name))
    if not wrong:
        stored = VALIDATE[name](body)
        for member, value in stored.items():
            assert value not in (None, "", [], {}), member
            if isinstance(body.get(member), str) and "x-js-max-length" in bodies.schema(name)["$defs"].get(
                    _kind_of(name, member), {}):
                assert value == js_trim(body[member])
        return
    with pytest.raises(GateError) as refused:
        VALIDATE[name](body)
    fields = [item["field"] for item in refused.value.details["errors"]]
    assert len(fields) == len(set(fields))
    assert {field.split(".")[0].split("[")[0] for field in fields} == wrong
    order = list(bodies.schema(name)["properties"])
    tops = [field.split(".")[0].split("[")[0] for field in fields]
    assert tops == sorted(tops, key=order.index)


def test_unknown_members_come_first_by_name_then_the_members_then_the_rules_across_them():
    body = {"zz": 1, "outcome_status": "succeeded", "execution_receipt_id": "e1", "aa": 2, "action_taken": 7,
            "observed_metrics": {"z": "1", "a": "2"}}
    expected = [("aa", "unknown_field"), ("zz", "unknown_field"), ("action_taken", "invalid_type"),
                ("observed_metrics.a", "invalid_type"), ("observed_metrics.z", "invalid_type"),
                ("execution_hash", "missing_field")]
    for ordered in (body, dict(reversed(body.items()))):  # the same refusal whatever order it was written in
        with pytest.raises(GateError) as refused:
            V.validate_outcome_request(ordered)
        assert [(item["field"], item["code"]) for item in refused.value.details["errors"]] == expected
    assert refused.value.details["errors"][-1]["message"] == (
        "execution_hash is required with execution_receipt_id: a link names the execution receipt by both")


@pytest.mark.parametrize(("body", "errors"), [
    ({"outcome_status": "succeeded", "execution_receipt_id": "e1", "execution_hash": "ABC"},
     [("execution_hash", "invalid_format")]),
    ({"outcome_status": "succeeded", "execution_receipt_id": " ", "execution_hash": HASH},
     [("execution_receipt_id", "missing_field")]),
    ({"outcome_status": "succeeded", "execution_receipt_id": "x" * 301, "execution_hash": None},
     [("execution_receipt_id", "too_long")]),
])
def test_a_link_names_the_missing_half_only_where_it_has_no_problem_of_its_own(body, errors):
    with pytest.raises(GateError) as refused:
        V.validate_outcome_request(body)
    assert [(item["field"], item["code"]) for item in refused.value.details["errors"]] == errors


def test_a_written_sync_names_its_object_and_a_direction_defaults_to_writeback():
    with pytest.raises(GateError) as refused:
        V.validate_crm_sync_request({"sync_status": "written", "crm_provider": "hubspot", "crm_object_id": " "})
    assert refused.value.details["errors"] == [{"field": "crm_object_id", "code": "missing_field",
                                                "message": "crm_object_id is required when sync_status is written"}]
    stored = V.validate_crm_sync_request({"sync_status": "written", "crm_provider": " hubspot ", "crm_object_id": "c1"})
    assert stored == {"sync_status": "written", "crm_provider": "hubspot", "crm_object_id": "c1",
                      "sync_direction": "writeback"}


@pytest.mark.parametrize("body", [None, [], "body", 1])
def test_a_body_that_is_not_an_object_is_one_problem(body):
    with pytest.raises(GateError) as refused:
        V.validate_execution_request(body)
    assert refused.value.details["errors"] == [
        {"field": "$", "code": "invalid_type", "message": "request body must be a JSON object"}]


def test_what_the_schemas_do_not_state():
    with_secret = {"sync_status": "pending", "crm_provider": "hubspot", "field_mapping": {"api_key": "secret"}}
    assert bodies.problems("crm-sync", with_secret) == []
    with pytest.raises(GateError) as refused:
        V.validate_crm_sync_request(with_secret)
    assert refused.value.code == V.CREDENTIALS_FORBIDDEN
    assert "credential" in bodies.schema("crm-sync")["description"]


def test_the_schemas_blank_is_javascripts_trim():
    blank = "".join(f"\\u{ord(char):04x}" for char in JS_WHITESPACE)
    for name in KINDS:
        nothing = bodies.schema(name)["$defs"]["nothing"]["anyOf"][1]
        assert nothing["pattern"] == f"^[{blank}]*$"


def test_the_served_receipt_bodies_keep_their_shared_kinds():
    served = bodies.openapi_schema("execution")
    assert served["properties"]["action_taken"] == {"$ref": "#/components/schemas/ExecutionRequest/$defs/label"}
    assert served["$defs"]["label"]["x-js-max-length"] == 160
    assert "x-error" not in served["$defs"]["label"]


def test_a_container_over_its_limit_is_named_whole_and_its_members_are_never_walked():
    """A hostile body's cost is bounded: `problems` does not look inside an array or an object over
    its own count limit (40,000 blank references were walked one by one, for one item)."""
    body = {"execution_status": "executed", "decision_record_hash": HASH, "decision_receipt_hash": HASH,
            "evidence_refs": [""] * 400, "action_binding": {f"-{index}": "" for index in range(400)}}
    assert len(list(bodies.validator("execution").iter_errors(body))) > 800  # what a plain walk meets
    listed = list(bodies.validator("execution", listing=True).iter_errors(body))
    assert sorted(error.validator for error in listed) == ["maxItems", "maxProperties"]
    with pytest.raises(GateError) as refused:
        V.validate_execution_request(body)
    assert [(item["field"], item["code"]) for item in refused.value.details["errors"]] == [
        ("action_binding", "too_many"), ("evidence_refs", "too_many")]
