"""Exact answers of the advisory request checks (`gate.advisory.request`) over `POST /api/decide`.

Each refusal is read to its field and code, each accepted edge to the record it makes; every test
builds its own requests on its own ledger.
"""

from __future__ import annotations

import pytest

from gate.advisory.request import prepare_advisory_request
from gate.errors import GateError
from gate.protocol.canonical import sha256_hex
from gate.protocol.records import MINIMAL_VIEW_MEMBERS
from gate.rulebook.patterns import load_patterns
from tests.advisory.test_advisory_http import advisory_body, decide, stored_count


@pytest.mark.parametrize("body, field, code", [
    ({"mode": "single"}, "question", "required"),
    ({"question": "   "}, "question", "invalid_value"),
    ({"question": 7}, "question", "invalid_value"),
    ({"question": "x" * 2001}, "question", "too_long"),
    ({"question": "q", "context": "inputs"}, "context", "invalid_type"),
    ({"question": "q", "context": {"inputs": "x"}}, "context.inputs", "invalid_type"),
    ({"question": "q", "mode": "runtime", "context": {"inputs": {}}}, "context.inputs", "required"),
    ({"question": "q", "context": {"policy_pattern": "nope"}}, "context.policy_pattern", "invalid_value"),
    ({"question": "q", "context": {"policy_pattern": 5}}, "context.policy_pattern", "invalid_value"),
    ({"question": "q", "response_view": "huge"}, "response_view", "invalid_value"),
    ({"question": "q", "rulebook": {}}, "rulebook", "unknown_field"),
    ({"question": "q", "binding_mode": "direct_declarative_rulebook"}, "binding_mode", "unknown_field"),
    ({"question": "q", "adapter": {"adapter_id": "x"}}, "adapter", "unknown_field"),
    ({"question": "q", "adapter": {}, "rulebook": {}}, "rulebook", "unknown_field"),
])
def test_each_refusal_names_its_field_and_code(client, api_key, app, body, field, code):
    response = decide(client, api_key, body)
    assert response.status_code == 400, response.json
    body = response.json
    assert body["error"] == "REQUEST_INVALID"
    assert [(e["field"], e["code"]) for e in body["errors"]] == [(field, code)]
    # One message, the same at the top and in the error entry (the shape every refusal shares).
    assert sorted(body["errors"][0]) == ["code", "field", "message"]
    assert isinstance(body["message"], str) and body["message"] == body["errors"][0]["message"]
    assert stored_count(app) == 0


def test_response_only_material_is_named_member_by_member(client, api_key):
    body = advisory_body(inputs={"discount_percent": 5, "trusted_adapter": {}})
    body["action"] = "apply_discount"
    response = decide(client, api_key, body)
    assert response.status_code == 422, response.json
    assert response.json["error"] == "RULEBOOK_OUTPUT_MATERIAL_FORBIDDEN"
    assert response.json["forbidden_fields"] == ["action", "context.inputs.trusted_adapter"]


def test_a_question_of_exactly_the_limit_is_accepted(client, api_key):
    response = decide(client, api_key, {"question": "q" * 2000})
    assert response.status_code == 200, response.json
    assert response.json["advisory"]["question"] == "q" * 2000


def test_a_null_context_is_an_empty_one(client, api_key):
    response = decide(client, api_key, {"question": "Rename the workspace?", "context": None})
    assert response.status_code == 200, response.json
    record = response.json
    assert record["policy_id"] == "advisory.general" and record["advisory_verdict"] == "review"
    assert record["input_hash"] == sha256_hex({"question": "Rename the workspace?", "context": None})


def test_the_response_view_shapes_the_answer_and_is_not_hashed(client, api_key):
    body = advisory_body()
    response = decide(client, api_key, dict(body, response_view="minimal"))
    assert response.status_code == 200, response.json
    answer = response.json
    assert set(answer) <= MINIMAL_VIEW_MEMBERS and "advisory" not in answer
    stored = client.get(f"/api/decision/{answer['decision_id']}", headers={"x-api-key": api_key}).json
    assert stored["input_hash"] == sha256_hex(body)  # the request without its response_view
    full = decide(client, api_key, dict(body, response_view="full")).json
    assert full["input_hash"] == sha256_hex(body) and full["advisory"]["mode"] == "single"


def test_a_body_that_is_not_an_object_is_not_taken_for_an_advisory_request(client, api_key):
    response = decide(client, api_key, ["question"])
    assert response.status_code == 400, response.json
    assert response.json["error"] == "REQUEST_INVALID"


def test_the_advisory_checks_refuse_a_rulebook_request_given_to_them():
    with pytest.raises(GateError) as raised:
        prepare_advisory_request({"mode": "rulebook", "question": "q"}, load_patterns())
    assert raised.value.code == "REQUEST_INVALID"
    assert [(e["field"], e["code"]) for e in raised.value.details["errors"]] == [("mode", "invalid_value")]
