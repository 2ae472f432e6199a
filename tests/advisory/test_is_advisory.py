"""One rule for "is this record advisory?" (issue 54, item 1): the record protocol's
`is_advisory` is the one the core's replay, the decide route's metric, `gate_client.client` and
`gate_client.routing` use, and every caller reaches the same answer on the same table of records."""

from __future__ import annotations

import pytest

import gate_client.client as client_module
import gate_client.routing as routing_module
from gate.protocol.advisory_record import ADVISORY_CONTRACT, carries_advisory_members, is_advisory
from gate_client.client import REVIEW, route_record
from gate_client.routing import route

BINDING_YES = {"verdict": "yes", "c": "yes", "status": "decided", "record_hash": "a" * 64}
PRODUCTION = {"authority": "declarative_rulebook", "production_verdict": True}

# (extra members on a verified binding `yes`, advisory?)
TABLE = [
    ({}, False),
    ({"decision_contract": PRODUCTION}, False),
    ({"decision_contract": {"authority": " Binding ", "production_verdict": True}}, False),
    ({"production_binding_required": False}, False),
    # the advisory variants the gate and the reference write
    ({"decision_contract": dict(ADVISORY_CONTRACT), "production_binding_required": True}, True),
    ({"decision_contract": dict(ADVISORY_CONTRACT)}, True),
    ({"production_binding_required": True}, True),
    ({"advisory": {"combined_decision": "yes"}}, True),
    ({"decision_contract": {"authority": "advisory_only", "production_verdict": True}}, True),
    ({"decision_contract": {"authority": " ADVISORY_ONLY", "production_verdict": True}}, True),
    ({"decision_contract": PRODUCTION, "production_binding_required": True}, True),
    ({"decision_contract": PRODUCTION, "advisory": None}, True),
    # malformed contracts count against the record (fail closed)
    ({"decision_contract": None}, True),
    ({"decision_contract": "advisory"}, True),
    ({"decision_contract": ["advisory_only"]}, True),
    ({"decision_contract": {}}, True),
    ({"decision_contract": {"authority": "binding"}}, True),
    ({"decision_contract": {"production_verdict": True}}, True),
    ({"decision_contract": {"authority": 1, "production_verdict": True}}, True),
    ({"decision_contract": {"authority": "binding", "production_verdict": "true"}}, True),
    ({"decision_contract": {"authority": "binding", "production_verdict": 1}}, True),
    ({"production_binding_required": None}, True),
    ({"production_binding_required": 0}, True),
    ({"production_binding_required": "false"}, True),
]


def test_the_clients_reuse_the_protocols_rule():
    assert client_module.is_advisory is is_advisory
    assert routing_module.is_advisory is is_advisory


@pytest.mark.parametrize("extra, advisory", TABLE)
def test_every_caller_agrees(extra, advisory):
    record = {**BINDING_YES, **extra}
    assert is_advisory(record) is advisory
    # `gate_client.routing`: a binding `yes` proceeds, an advisory one holds
    assert route(200, record) == ("review" if advisory else "proceed")
    # `gate_client.client`: even with a verification that passed
    routed = route_record(record, {"verified": True})
    assert (routed.route == REVIEW and "advisory" in routed.reason) if advisory else routed.proceed
    # the verifier checks every advisory record against the advisory member set
    assert carries_advisory_members(record) or not advisory


@pytest.mark.parametrize("value", [None, [], "record", 1])
def test_a_value_that_is_no_record_is_advisory(value):
    assert is_advisory(value) is True
    assert route(200, value) == "review"
    assert route_record(value, {"verified": True}).route == REVIEW


def test_blocking_stays_safe_for_advisory_records():
    record = {"verdict": "no", "c": "no", "decision_contract": dict(ADVISORY_CONTRACT)}
    assert is_advisory(record) and route(200, record) == "block"
