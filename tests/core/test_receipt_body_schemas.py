"""The receipts' body schemas (gate/bodies/execution, outcome and crm-sync) against their hand checks.

The server checks a receipt body by hand (`gate.receipts.validation`): it lists every problem in
the spec's order and normalizes the members, which one `jsonschema` failure cannot do. The
files are the bodies' one home in the document; this holds each to accept exactly the bodies its
hand check accepts, over generated bodies whose members are drawn from values at the edges of
each check (null, blank and padded text, wrong types, hashes of the wrong case or length). What
the schemas state only in words is kept out of the draws and named in
`test_what_the_schemas_state_in_words`: text limits in UTF-16 code units after trimming, and the
CRM sync's credential scan.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gate import bodies
from gate.errors import GateError
from gate.protocol.records import _JS_WHITESPACE
from gate.receipts import fields as F
from gate.receipts import validation as V

HASH = "0123456789abcdef" * 4
# Per check: values it takes (null and blank among them where an optional member reads them as
# absent), then values it refuses.
TEXT = ([None, "x", " padded\t", "", " \u3000"], [7, True, ["x"]])
VALUES: dict[Any, tuple[list[Any], list[Any]]] = {
    F.identifier: TEXT, F.label: TEXT, F.reference: TEXT, F.decision_id: TEXT,
    F.hex64: ([None, HASH], [HASH.upper(), HASH[:-1], "", " " + HASH, 64]),
    F.boolean: ([None, True, False], ["true", 0]),
    F.opaque_hash: ([None, "sha256:ab/c=", " ab ", ""], ["a b", "é", 3]),
    F.timestamp: ([None, "2026-05-21T00:00:00Z", " 2026-05-21T00:00:00.123+00:00 ", ""],
                  ["2026-13-01T00:00:00Z", "2026-05-21", "2026-05-21T00:00:00+01:00", 1]),
    F.executor: ([None, {"type": "agent", "id": "a1"}],
                 [{"type": " ", "id": "a1"}, {"type": "agent"}, {"type": "agent", "id": "a1", "x": 1}, "agent",
                  {"type": 1, "id": "a"}]),
    F.action_binding: ([None, {}, {"order_id": "o1"}], [{"order-id": "o1"}, {"order_id": ""}, {"n": 1}, []]),
    F.observed_metrics: ([None, {}, {"rate.x": 1.5}], [{"1bad": 1}, {"m": "1"}, {"m": True}, [1]]),
    F.field_mapping: ([None, {}, {"Name": "name"}], [{" ": "name"}, {"a": ""}, {"a": 1}, "a"]),
    F.evidence_refs: ([None, [], ["ev1"]], [[""], [" "], [1], "ev1", ["ev1"] * 33]),
    F.http_url: ([None, "https://crm.example/r/1", " http://crm.example:8080 ", "", "HTTPS://CRM.example/r/1"],
                 ["ftp://crm.example", "https://", "https://crm .example", 5]),
    F.result_text_or_object: ([None, "done", "", {"rows": 3}, {"ok": True, "id": "x"}],
                              [{"id": ""}, {"1x": 1}, {"a": None}, [1], 2]),
}
KINDS: dict[str, tuple[dict[str, F.Check], Callable[[Any], object]]] = {
    "execution": (V.EXECUTION_REQUEST_MEMBERS, V.validate_execution_request),
    "outcome": (V.OUTCOME_REQUEST_MEMBERS, V.validate_outcome_request),
    "crm-sync": (V.CRM_SYNC_REQUEST_MEMBERS, V.validate_crm_sync_request),
}

REQUIRED = {"execution": V.REQUIRED_EXECUTION_MEMBERS, "outcome": V.REQUIRED_OUTCOME_MEMBERS,
            "crm-sync": V.REQUIRED_CRM_SYNC_MEMBERS}


def _values(check: F.Check) -> tuple[list[Any], list[Any]]:
    allowed = next((cell.cell_contents for cell in getattr(check, "__closure__", None) or ()
                    if isinstance(cell.cell_contents, tuple)), None)
    if allowed is not None:  # a `one_of` check
        return [None, *allowed], [allowed[0].upper(), " " + allowed[0], "", 1]
    return VALUES[check]


@st.composite
def _body(draw: st.DrawFn, kind: str) -> Any:
    members, _check = KINDS[kind]
    if draw(st.integers(0, 30)) == 0:
        return draw(st.sampled_from([None, [], "body", 1]))
    chosen = set(draw(st.lists(st.sampled_from(list(members)), unique=True, max_size=len(members))))
    if draw(st.integers(0, 4)):  # mostly with the required members, so that many bodies pass
        chosen |= set(REQUIRED[kind])
    wrong = set(draw(st.lists(st.sampled_from(list(members)), max_size=2)))  # mostly one or none
    body = {name: draw(st.sampled_from(_values(members[name])[name in wrong])) for name in members if name in chosen}
    if draw(st.integers(0, 10)) == 0:
        body["unknown_member"] = "x"
    return body


def hand_accepts(kind: str, body: Any) -> bool:
    try:
        KINDS[kind][1](body)
    except GateError:
        return False
    return True


def schema_accepts(kind: str, body: Any) -> bool:
    return bodies.first_error(kind, body) is None


@pytest.mark.parametrize("kind", list(KINDS))
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_schema_accepts_exactly_what_the_hand_check_accepts(kind, data):
    body = data.draw(_body(kind))
    assert schema_accepts(kind, body) == hand_accepts(kind, body), body


@pytest.mark.parametrize(("kind", "body"), [
    ("execution", {"execution_status": "executed", "decision_record_hash": HASH, "decision_receipt_hash": HASH}),
    ("outcome", {"outcome_status": "succeeded", "execution_receipt_id": "e1", "execution_hash": HASH}),
    ("outcome", {"outcome_status": "succeeded", "execution_receipt_id": " ", "execution_hash": None}),
    ("crm-sync", {"sync_status": "written", "crm_provider": "hubspot", "crm_object_id": "c1"}),
    ("crm-sync", {"sync_status": "pending", "crm_provider": "hubspot"}),
])
def test_bodies_both_accept(kind, body):
    assert schema_accepts(kind, body) and hand_accepts(kind, body)


@pytest.mark.parametrize(("kind", "body"), [
    ("execution", {"execution_status": "executed", "decision_record_hash": HASH}),
    ("outcome", {"outcome_status": "succeeded", "execution_receipt_id": "e1"}),
    ("outcome", {"outcome_status": "succeeded", "execution_hash": HASH, "execution_receipt_id": ""}),
    ("crm-sync", {"sync_status": "written", "crm_provider": "hubspot"}),
    ("crm-sync", {"sync_status": "written", "crm_provider": " ", "crm_object_id": "c1"}),
])
def test_bodies_both_refuse(kind, body):
    assert not schema_accepts(kind, body) and not hand_accepts(kind, body)


def test_what_the_schemas_state_in_words():
    execution = {"execution_status": "executed", "decision_record_hash": HASH, "decision_receipt_hash": HASH}
    too_long = {**execution, "action_taken": "x" * (F.MAX_LABEL + 1)}
    assert schema_accepts("execution", too_long) and not hand_accepts("execution", too_long)
    assert f"at most {F.MAX_LABEL} UTF-16" in bodies.schema("execution")["properties"]["action_taken"]["anyOf"][0][
        "description"]
    with_secret = {"sync_status": "pending", "crm_provider": "hubspot", "field_mapping": {"api_key": "secret"}}
    assert schema_accepts("crm-sync", with_secret)
    with pytest.raises(GateError) as refused:
        V.validate_crm_sync_request(with_secret)
    assert refused.value.code == V.CREDENTIALS_FORBIDDEN
    assert "credential" in bodies.schema("crm-sync")["description"]


def test_the_schemas_blank_is_javascripts_trim():
    blank = "".join(f"\\u{ord(char):04x}" for char in _JS_WHITESPACE)
    required = bodies.schema("crm-sync")["properties"]["crm_provider"]
    assert required["pattern"] == f"[^{blank}]"
