"""Bounded evaluation cost (issue 6, defect 5), through POST /api/decide.

The probe: 8 rules × 31 `contains` leaves over one 460,000-element array in a 936 KB body took
26 s of a worker. Now the facts and the work are bounded before evaluating: 422, nothing stored.
"""

from __future__ import annotations

import json
import time

import pytest

from gate.protocol.fact_limits import MAX_FACT_ARRAY_LENGTH, MAX_FACT_STRING_LENGTH, MAX_FACT_VALUES
from gate.rulebook.budget import MAX_EVALUATION_WORK


def _rulebook(rules: int = 8, leaves: int = 31, needle=None) -> dict:
    return {
        "schema_version": "rulebook_v1", "rulebook_id": "contains_storm", "version": "1",
        "rules": [{
            "rule_id": f"r{r:02d}",
            "condition": {"any": [{"field": "items", "operator": "contains",
                                   "value": needle if needle is not None else f"needle-{r}-{i}"}
                                  for i in range(leaves)]},
            "outcome": {"decision": "no", "verdict": "BLOCK", "action": "stop", "reason_code": "FOUND"},
        } for r in range(rules)],
        "default_outcome": {"decision": "yes", "verdict": "APPROVE", "action": "go", "reason_code": "CLEAR"},
    }


def _decide(client, key, rulebook, inputs):
    body = json.dumps({"mode": "rulebook", "rulebook": rulebook, "context": {"inputs": inputs}},
                      separators=(",", ":"))
    started = time.perf_counter()
    response = client.post("/api/decide", data=body, headers={"x-api-key": key, "content-type": "application/json"})
    return response, time.perf_counter() - started, len(body)


def _stored(app) -> int:
    from sqlalchemy import func, select

    from gate.ledger.tables import decisions

    with app.extensions["gate"].ledger.engine.connect() as connection:
        return connection.execute(select(func.count()).select_from(decisions)).scalar()


def test_the_probe_body_is_refused_fast_and_stores_nothing(app, client, api_key):
    response, seconds, size = _decide(client, api_key, _rulebook(), {"items": [0] * 460_000})
    assert 900_000 < size < 1_000_000  # the probe's 936 KB body, under the 1 MiB body limit
    assert response.status_code == 422, response.json
    body = response.json
    assert body["error"] == "EVALUATION_INPUT_TOO_LARGE" and body["c"] == "unclear"
    assert body["limit"] == "array_length" and body["maximum"] == MAX_FACT_ARRAY_LENGTH
    assert seconds < 5, seconds  # 26 s of a worker before; about 0.2 s on an idle machine
    assert _stored(app) == 0


def test_work_beyond_the_budget_is_refused_under_the_size_limits(app, client, api_key):
    response, _, _ = _decide(client, api_key, _rulebook(), {"items": [0] * MAX_FACT_ARRAY_LENGTH})
    assert response.status_code == 422
    body = response.json
    assert body["error"] == "EVALUATION_TOO_COSTLY" and body["maximum"] == MAX_EVALUATION_WORK
    assert body["work"] == 8 * 31 * (1 + MAX_FACT_ARRAY_LENGTH)
    assert _stored(app) == 0


def test_contains_within_the_budget_evaluates_as_before(client, api_key):
    # 3 leaves over 2,000 elements: 6,003 units. The needle is the last element.
    items = [f"sku-{i}" for i in range(2_000)]
    rulebook = _rulebook(rules=1, leaves=3, needle="sku-1999")
    response, _, _ = _decide(client, api_key, rulebook, {"items": items})
    assert response.status_code == 200, response.json
    assert response.json["verdict"] == "no" and response.json["matched_rule_id"] == "r00"
    response, _, _ = _decide(client, api_key, rulebook, {"items": items[:-1]})
    assert response.status_code == 200 and response.json["verdict"] == "yes"


@pytest.mark.parametrize("inputs, limit", [
    ({"s": "x" * (MAX_FACT_STRING_LENGTH + 1)}, "string_length"),
    ({"x" * (MAX_FACT_STRING_LENGTH + 1): 1}, "string_length"),
    ({"rows": [[0] * 50 for _ in range(MAX_FACT_VALUES // 50 + 1)]}, "values"),
])
def test_each_input_limit_is_a_422_naming_it(client, api_key, sample_request, inputs, limit):
    body = dict(sample_request, context={"inputs": {**sample_request["context"]["inputs"], **inputs}})
    response = client.post("/api/decide", json=body, headers={"x-api-key": api_key})
    assert response.status_code == 422, response.json
    assert response.json["error"] == "EVALUATION_INPUT_TOO_LARGE" and response.json["limit"] == limit


def test_inputs_at_the_limits_are_accepted(client, api_key, sample_request):
    extra = {"s": "x" * MAX_FACT_STRING_LENGTH, "a": [1] * MAX_FACT_ARRAY_LENGTH}
    body = dict(sample_request, context={"inputs": {**sample_request["context"]["inputs"], **extra}})
    response = client.post("/api/decide", json=body, headers={"x-api-key": api_key})
    assert response.status_code == 200, response.json
