"""`gate.bodies`: each request body declared once as a JSON Schema (package data), validated at the
boundary with a bounded refusal, and the same schema served in the OpenAPI document."""

from __future__ import annotations

from importlib import resources

import pytest

from api.openapi import SCHEMAS
from gate import bodies
from gate.errors import GateError
from gate.governance.table import EVENT_SETTINGS, HOLD_POLICY
from gate.holds.policy import DEADLINE_RANGE, MAX_MEMBERS, PRIORITIES, QUORUMS, HoldPolicy
from gate.releases.governance import RELEASE_POLICY
from gate.services.governance import APPROVAL, approval_members, check_reason

QUEUE = {"deadline_seconds": 3600, "quorum": "any", "members": [], "require_justification": False,
         "escalate_after_seconds": None, "escalate_to": None}
POLICY = {"default_queue": "default", "four_eyes": True, "queues": {"default": QUEUE}, "routes": []}


def test_every_schema_file_is_a_valid_schema_read_as_package_data():
    names = [entry.name.removesuffix(".schema.json") for entry in resources.files("gate.bodies").iterdir()
             if entry.name.endswith(".schema.json")]
    assert "hold-policy" in names
    for name in names:
        assert bodies.validator(name) is bodies.validator(name)  # cached, and check_schema passed


def test_the_openapi_document_serves_the_schema_itself():
    served = SCHEMAS["HoldPolicy"]
    assert served == bodies.openapi_schema("hold-policy")
    assert served["properties"]["queues"]["additionalProperties"]["required"] == \
        bodies.schema("hold-policy")["properties"]["queues"]["additionalProperties"]["required"]
    assert "x-refusal" not in str(served) and "$schema" not in served


def test_the_policy_bounds_are_the_schemas():
    queue = bodies.schema("hold-policy")["properties"]["queues"]["additionalProperties"]["properties"]
    assert QUORUMS == ("any", "two", "all") and PRIORITIES == ("low", "normal", "high", "urgent")
    assert (queue["deadline_seconds"]["minimum"], queue["deadline_seconds"]["maximum"]) == DEADLINE_RANGE
    assert MAX_MEMBERS == queue["members"]["maxItems"] == 50


@pytest.mark.parametrize("value", [60.0, True, "60", None])
def test_a_whole_number_is_an_integer_without_a_fraction(value):
    body = {**POLICY, "queues": {"default": {**QUEUE, "deadline_seconds": value}}}
    with pytest.raises(GateError) as refused:
        HoldPolicy.from_json(body)
    assert refused.value.message == "queues.default.deadline_seconds must be a whole number of seconds from 5 to 2592000"


def test_the_refusal_names_the_place_and_the_first_failure_in_schema_order():
    body = {**POLICY, "four_eyes": "yes", "routes": "none"}
    with pytest.raises(GateError) as refused:
        HoldPolicy.from_json(body)
    assert refused.value.code == "HOLD_POLICY_INVALID" and refused.value.message == "four_eyes must be true or false"
    with pytest.raises(GateError) as refused:
        HoldPolicy.from_json({**POLICY, "queues": {"Bad Name": QUEUE}})
    assert refused.value.message == "queues: a queue name must match ^[a-z][a-z0-9_-]{0,63}$"
    with pytest.raises(GateError) as refused:
        HoldPolicy.from_json([])
    assert refused.value.message == "the hold policy must be a JSON object"


def test_a_failure_under_no_refusal_is_jsonschemas_own_words_bounded(monkeypatch):
    bodies.schema.cache_clear()
    bodies.validator.cache_clear()
    plain = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 3}}}
    monkeypatch.setattr(bodies, "schema", lambda name: plain)
    monkeypatch.setattr(bodies, "validator", lambda name: bodies._Validator(plain))
    with pytest.raises(GateError) as refused:
        bodies.check("plain", {"name": "x" * 10_000}, "REQUEST_INVALID")
    message = refused.value.message
    assert refused.value.code == "REQUEST_INVALID" and message.startswith("name: 'xxx")
    assert len(message) == bodies.MAX_MESSAGE and message.endswith("…")
    assert bodies.first_error("plain", {"name": "abc"}) is None


def test_paths_read_as_members_and_positions():
    assert bodies.path_text(["routes", 1, "priority"]) == "routes[1].priority"
    assert bodies.path_text(["queues", "default", "members", 0]) == "queues.default.members[0]"
    assert bodies.path_text([]) == ""


def test_the_event_subscription_names_at_most_every_type_once_and_the_wildcard():
    from gate.events.cloudevent import EVENT_TYPES
    assert bodies.schema("event-subscription")["properties"]["event_types"]["maxItems"] == len(EVENT_TYPES) + 1


@pytest.mark.parametrize(("name", "component"), [
    ("hold-policy", "HoldPolicy"), ("hold-reassign", "HoldReassign"), ("hold-resolution", "HoldResolution"),
    ("release-policy", "ReleasePolicy"), ("event-settings", "EventSettings"),
    ("event-subscription", "EventSubscription")])
def test_each_body_schema_is_the_openapi_component(name, component):
    assert SCHEMAS[component] == bodies.openapi_schema(name)


def test_a_release_policy_patch_is_the_whole_schema_without_its_required_members():
    whole, patch = SCHEMAS["ReleasePolicy"], SCHEMAS["ReleasePolicyPatch"]
    assert patch["properties"] == whole["properties"] and "required" not in patch and patch["minProperties"] == 1


@pytest.mark.parametrize("name", ["default\n", "default\r\n", "\ndefault"])
def test_a_pattern_ends_at_the_end_of_the_text_as_in_ecma_262(name):
    with pytest.raises(GateError) as refused:
        HoldPolicy.from_json({**POLICY, "queues": {name: QUEUE}})
    assert refused.value.message.startswith("queues: a queue name must match")
    refused_route = {**POLICY, "routes": [{"policy_id": "refunds\n", "rule_id": None, "queue": "default",
                                           "priority": "normal"}]}
    with pytest.raises(GateError, match=r"^routes\[0\]\.policy_id must be a policy id$"):
        HoldPolicy.from_json(refused_route)
    with pytest.raises(GateError, match=r"^reason_code must match"):
        bodies.check("hold-resolution", {"decision": "approve", "reason_code": "OK\n"}, "HOLD_RESOLUTION_INVALID")


@pytest.mark.parametrize("setting, code", [(RELEASE_POLICY, "RELEASE_POLICY_INVALID"),
                                           (HOLD_POLICY, "GOVERNANCE_REQUEST_INVALID"),
                                           (EVENT_SETTINGS, "GOVERNANCE_REQUEST_INVALID")])
def test_an_approval_body_of_another_shape_is_refused_with_its_settings_code(setting, code):
    for body in ([], "1", None, {"request_seq": 1, "extra": 1}, {"request_seq": "x", "reason": 7, "why": 1}):
        with pytest.raises(GateError) as refused:
            approval_members(setting, body)
        assert (refused.value.code, refused.value.message) == (code, "the body is {request_seq, reason?}"), body
    # Its members' values wait for the approver's permission (GovernanceService.approve).
    assert approval_members(setting, {"request_seq": "x", "reason": 7}) == ("x", 7)
    assert approval_members(setting, {}) == (None, None)


SEQ = "request_seq must be a positive integer"
REASON = "reason must be a string of 1 to 500 characters"


@pytest.mark.parametrize("members, message", [
    ({"request_seq": 0}, SEQ), ({"request_seq": True}, SEQ), ({"request_seq": "1"}, SEQ),
    ({"request_seq": 1.0}, SEQ), ({"request_seq": None}, SEQ), ({}, SEQ),
    ({"request_seq": 1, "reason": ""}, REASON), ({"request_seq": 1, "reason": "x" * 501}, REASON),
    ({"request_seq": 1, "reason": 7}, REASON), ({"request_seq": 0, "reason": ""}, REASON),  # reason first
    ({"request_seq": 1, "reason": None}, None), ({"request_seq": 2**70, "reason": "x" * 500}, None),
])
def test_an_approvals_members_are_refused_in_the_order_of_the_hand_written_checks(members, message):
    error = bodies.first_error(APPROVAL, members)
    assert (None if error is None else bodies.refusal(APPROVAL, error)) == message


def test_a_changes_reason_has_the_approval_bodys_bounds():
    check_reason(RELEASE_POLICY, "x" * 500)
    for reason in ("", "x" * 501, 7):
        with pytest.raises(GateError) as refused:
            check_reason(HOLD_POLICY, reason)
        assert (refused.value.code, refused.value.message) == ("GOVERNANCE_REQUEST_INVALID", REASON)


def test_the_openapi_document_serves_the_approval_body():
    assert SCHEMAS["SettingApproval"] == bodies.openapi_schema(APPROVAL)
    assert SCHEMAS["ReleasePolicyApproval"]["properties"] == SCHEMAS["SettingApproval"]["properties"]
