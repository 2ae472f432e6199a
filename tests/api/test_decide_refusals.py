"""Issue 12 gaps 1 and 6: request checks of `gate.protocol.requests` that no test pinned.

Each test fails when its guarded check is removed: the exact error code is asserted (another
refusal further down would not do), and nothing may be stored.
"""

from __future__ import annotations

import pytest

from gate import vocabulary as C
from gate.errors import GateError
from gate.protocol.requests import prepare_decision_request
from tests.api.test_decide import count_decisions, post

ADAPTER = {"adapter_id": "crm.enrich", "version": "1.0.0", "manifest_hash": "a" * 64, "input": {"account": "acme"}}


@pytest.mark.parametrize("binding_mode", [None, C.BINDING_ADAPTER, C.BINDING_DIRECT])
def test_both_fact_sources_in_one_request_are_refused(app, client, api_key, sample_request, binding_mode):
    # Gap 1: with the adapter's binding mode the caller's own facts would otherwise be evaluated
    # while the record claims adapter facts.
    body = dict(sample_request, adapter=ADAPTER)
    if binding_mode is not None:
        body["binding_mode"] = binding_mode
    response = post(client, body, api_key)
    assert response.status_code == 422
    assert response.json["error"] == "RULEBOOK_BINDING_MODE_CONFLICT" and response.json["c"] == "unclear"
    assert response.json["inferred_binding_mode"] == C.BINDING_ADAPTER
    assert "never both" in response.json["message"]
    assert count_decisions(app) == 0


def test_both_fact_sources_are_refused_before_any_adapter_is_resolved(sample_request):
    with pytest.raises(GateError) as raised:
        prepare_decision_request(dict(sample_request, adapter=ADAPTER, binding_mode=C.BINDING_ADAPTER))
    assert raised.value.code == "RULEBOOK_BINDING_MODE_CONFLICT"
    assert raised.value.details["binding_mode"] == C.BINDING_ADAPTER


@pytest.mark.parametrize("view", ["bogus", "FULL", "", 3, ["full"], {"view": "full"}, True])
def test_a_bad_response_view_in_the_body_is_400_and_stores_nothing(app, client, api_key, sample_request, view):
    # Gap 6: without the check the decision would be stored and its response would then fail.
    response = post(client, dict(sample_request, response_view=view), api_key)
    assert response.status_code == 400
    body = response.json
    assert body["error"] == "REQUEST_INVALID" and body["c"] == "unclear"
    assert body["errors"] == [{"field": "response_view", "code": "invalid_value",
                               "message": "response_view must be one of minimal, standard, full"}]
    assert count_decisions(app) == 0


@pytest.mark.parametrize("view", [None, *C.VIEWS])
def test_every_documented_response_view_is_accepted(client, api_key, sample_request, view):
    body = dict(sample_request) if view is None else dict(sample_request, response_view=view)
    response = post(client, body, api_key)
    assert response.status_code == 200
    assert ("integrity" in response.json) is (view in (None, C.VIEW_FULL))
