"""Route bodies checked by their schemas alone (issue 66, item 1): the verification routes'
(gate/bodies/{exported-record,record,packet}-verification.schema.json, whose `x-refusal` and
`x-error` give the refusals the hand-written checks gave: message, field, code, in the same order)
and the event subscription's status and rotation bodies. Each row posts a body that fails its
schema to the route, over HTTP.
"""

from __future__ import annotations

import json

import pytest

from api.routes import decisions, events, packets

NOT_AN_OBJECT = ("body must be a JSON object {record, input?, public_key?}", [("$", "invalid_type", "object expected")])
PACKET = ("body must be {packet, input?} with packet a JSON object", [("packet", "invalid_type", "object required")])
INPUT = ("input must be a JSON object", [("input", "invalid_type", "object expected")])


def _record_rows(required: bool) -> list:
    rows = [
        ([1], NOT_AN_OBJECT),
        ("text", NOT_AN_OBJECT),
        ({"b": 1, "a": 2, "record": 1}, ("unknown member(s): a, b", [("a", "unknown_field", "not accepted"),
                                                                      ("b", "unknown_field", "not accepted")])),
        ({"record": 1, "input": 1}, ("record must be a JSON object", [("record", "invalid_type", "object expected")])),
        ({"record": None}, ("record must be a JSON object", [("record", "invalid_type", "object expected")])),
        ({"record": {}, "input": None}, INPUT),
        ({"record": {}, "public_key": 3}, ("public_key must be a PEM string",
                                           [("public_key", "invalid_type", "string expected")])),
    ]
    if required:
        missing = ("record is required", [("record", "missing_field", "required")])
        rows += [({}, missing), ({"input": {}}, missing), (None, missing)]
    return rows


def _packet_rows() -> list:
    return [([], PACKET), ({}, PACKET), ({"packet": 1}, PACKET), ({"packet": {}, "x": 1}, PACKET),
            ({"input": None}, PACKET), ({"packet": {}, "input": None}, INPUT), ({"packet": {}, "input": [1]}, INPUT)]


def _refused(response, message: str, errors: list) -> None:
    assert response.status_code == 400, response.json
    body = response.json
    assert (body["error"], body["message"]) == ("REQUEST_INVALID", message), body
    assert [(item["field"], item["code"], item["message"]) for item in body["errors"]] == errors, body


@pytest.mark.parametrize(("body", "refusal"), _record_rows(required=True))
def test_an_exported_record_body_is_refused_by_its_schema(client, body, refusal):
    _refused(client.post("/api/decision/verify", data=json.dumps(body), content_type="application/json"), *refusal)


@pytest.mark.parametrize(("body", "refusal"), _packet_rows())
def test_a_packet_verification_body_is_refused_by_its_schema(client, body, refusal):
    _refused(client.post("/api/decision/packet/verify", data=json.dumps(body), content_type="application/json"),
             *refusal)


def test_a_stored_record_verification_body_is_refused_by_its_schema_before_any_lookup(client, issue_key):
    key = issue_key()["api_key"]
    for body, refusal in _record_rows(required=False):
        _refused(client.post("/api/decision/dec_unknown/verify", data=json.dumps(body),
                             content_type="application/json", headers={"x-api-key": key}), *refusal)
    absent = client.post("/api/decision/dec_unknown/verify", data="{}", content_type="application/json",
                         headers={"x-api-key": key})
    assert absent.status_code == 404 and absent.json["error"] == "DECISION_NOT_FOUND"  # {} passes its schema


def test_the_routes_check_no_body_member_by_hand():
    """The verification routes name no body member outside the schema call (a hand check would)."""
    import inspect

    for function in (decisions.verify_exported, decisions.verify_stored, decisions._body_fields,
                     packets.verify_exported_packet, events.subscription, events.rotate):
        source = inspect.getsource(function)
        assert "isinstance" not in source and "errors=[" not in source, function.__name__


STATUS = 'the body is {"status": "active" | "disabled", "skip_pruned"?: true | false}'
ROTATION = 'the body is {"overlap_seconds": n} or empty'


@pytest.mark.parametrize(("method", "path", "body", "message"), [
    ("patch", "", [1], STATUS), ("patch", "", {}, STATUS), ("patch", "", {"status": "active", "x": 1}, STATUS),
    ("patch", "", {"status": "paused"}, 'status must be "active" or "disabled"'),
    ("patch", "", {"status": None, "x": 1}, STATUS),
    ("patch", "", {"status": "active", "skip_pruned": 1}, "skip_pruned is true or false"),
    ("post", "/rotate", [], ROTATION), ("post", "/rotate", {"overlap": 1}, ROTATION),
    ("post", "/rotate", {"overlap_seconds": -1}, "overlap_seconds must be a whole number from 0 to 604800"),
    ("post", "/rotate", {"overlap_seconds": 60.0}, "overlap_seconds must be a whole number from 0 to 604800"),
    ("post", "/rotate", {"overlap_seconds": 604_801}, "overlap_seconds must be a whole number from 0 to 604800"),
])
def test_an_event_subscription_body_is_refused_by_its_schema_before_any_lookup(client, issue_key, method, path,
                                                                                body, message):
    key = issue_key(permissions="admin")["api_key"]
    response = getattr(client, method)(f"/api/events/subscriptions/sub_unknown{path}", data=json.dumps(body),
                                       content_type="application/json", headers={"x-api-key": key})
    assert response.status_code == 400, response.json
    assert (response.json["error"], response.json["message"]) == ("EVENT_SUBSCRIPTION_INVALID", message)


def test_an_event_subscription_body_that_passes_its_schema_reaches_the_lookup(client, issue_key):
    key = issue_key(permissions="admin")["api_key"]
    for method, path, body in (("patch", "", {"status": "disabled"}), ("post", "/rotate", {"overlap_seconds": None})):
        response = getattr(client, method)(f"/api/events/subscriptions/sub_unknown{path}", data=json.dumps(body),
                                           content_type="application/json", headers={"x-api-key": key})
        assert response.status_code == 404 and response.json["error"] == "EVENT_SUBSCRIPTION_NOT_FOUND", response.json
