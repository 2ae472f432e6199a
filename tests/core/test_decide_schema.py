"""The decide body's JSON Schema (gate/bodies/decide.schema.json) against the decide path's own checks.

The decide path does not read the schema: its checks are hand-written for speed and answer the
spec's codes (gate.protocol.requests, gate.advisory.request, the adapter invocation's and the
rulebook_ref's shape). This holds the two equal: over generated bodies and a corpus at the limits,
the schema accepts a body exactly when those checks do; what the schema cannot say is named in
its description and shown here as the one difference.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.openapi import SCHEMAS
from gate import bodies
from gate import vocabulary as C
from gate.adapters import _HASH, _VERSION, validate_invocation
from gate.adapters.manifest import ADAPTER_ID
from gate.advisory.request import MAX_QUESTION, RULEBOOK_ONLY, is_advisory_body, prepare_advisory_request
from gate.errors import GateError
from gate.protocol import fact_limits
from gate.protocol.canonical import MAX_JSON_DEPTH
from gate.protocol.fact_limits import MAX_FACT_ARRAY_LENGTH, MAX_FACT_STRING_LENGTH, MAX_FACT_VALUES
from gate.protocol.requests import prepare_decision_request
from gate.rulebook.patterns import load_patterns
from gate.services.release_routing import checked_ref

PATTERNS = load_patterns()
PATTERN = PATTERNS.patterns[0].pattern_id
DEFS = bodies.schema("decide")["$defs"]
ADAPTER = {"adapter_id": "refund_facts", "version": "1.0.0", "manifest_hash": "a" * 64, "input": {"amount": 3}}


def fast_path_accepts(body: Any) -> bool:
    """Whether the decide path's checks before any hash or lookup take `body` (advisory modes on,
    as `DecisionService.decide` orders them)."""
    try:
        if is_advisory_body(body):
            prepare_advisory_request(body, PATTERNS)
            return True
        if isinstance(body, dict) and "rulebook_ref" in body:
            checked_ref(body)  # then the inline path with the published version's rulebook
            body = {**{key: value for key, value in body.items() if key != "rulebook_ref"}, "rulebook": {}}
        prepared = prepare_decision_request(body)
        if prepared.adapter is not None:
            validate_invocation(prepared.adapter)
    except GateError:
        return False
    return True


def schema_accepts(body: Any) -> bool:
    return bodies.first_error("decide", body) is None


def test_the_schema_states_the_vocabulary_and_the_limits_of_the_code():
    document = bodies.schema("decide")
    assert document["properties"]["mode"]["enum"] == [C.MODE_RULEBOOK, *C.LEGACY_MODES, None]
    assert document["properties"]["response_view"]["enum"] == [*C.VIEWS, None]
    assert [each["required"][0] for each in document["not"]["anyOf"]] == list(C.RESPONSE_ONLY_FIELDS)
    assert DEFS["fact"]["propertyNames"]["not"]["enum"] == list(C.RESPONSE_ONLY_FIELDS)
    assert [each["required"][0] for each in DEFS["advisory_mode"]["not"]["anyOf"]] == list(RULEBOOK_ONLY)
    assert DEFS["rulebook_mode"]["properties"]["binding_mode"]["enum"] == [*C.SUPPORTED_BINDING_MODES, None]
    for bounded in (DEFS["fact"], DEFS["bounded"]):
        assert bounded["maxLength"] == bounded["propertyNames"]["maxLength"] == MAX_FACT_STRING_LENGTH
        assert bounded["maxItems"] == MAX_FACT_ARRAY_LENGTH
    assert DEFS["advisory_mode"]["properties"]["question"]["maxLength"] == MAX_QUESTION
    members = DEFS["adapter"]["properties"]
    assert (members["adapter_id"]["pattern"], members["version"]["pattern"], members["manifest_hash"]["pattern"]) \
        == (ADAPTER_ID.pattern, _VERSION.pattern, _HASH.pattern)
    # What no JSON Schema keyword says is named where a reader of the schema looks.
    assert f"at most {MAX_FACT_VALUES} JSON values" in document["description"]
    assert f"nests at most {MAX_JSON_DEPTH} levels" in document["description"]
    assert "GATE_MAX_BODY_BYTES" in document["description"] and "policy-patterns" in document["description"]


def test_the_openapi_document_serves_the_schema_with_its_references_inside_the_component():
    served = SCHEMAS["DecisionRequest"]
    assert served["$defs"].keys() == DEFS.keys() and "$schema" not in served
    assert served["then"] == {"$ref": "#/components/schemas/DecisionRequest/$defs/rulebook_mode"}
    assert served["$defs"]["fact"]["items"] == {"$ref": "#/components/schemas/DecisionRequest/$defs/fact"}


CORPUS: list[tuple[Any, bool]] = [
    ({"mode": "rulebook", "rulebook": {}}, True),
    ({"mode": "rulebook", "rulebook": {}, "question": 7, "extra": [1]}, True),  # question: metadata in rulebook mode
    ({"mode": "rulebook", "rulebook": {}, "context": None, "response_view": None, "binding_mode": None}, True),
    ({"mode": "rulebook", "rulebook": {}, "adapter": ADAPTER}, True),
    ({"mode": "rulebook", "rulebook": {}, "adapter": ADAPTER, "binding_mode": C.BINDING_ADAPTER}, True),
    ({"mode": "rulebook", "rulebook": {}, "adapter": ADAPTER, "binding_mode": C.BINDING_DIRECT}, False),
    ({"mode": "rulebook", "rulebook": {}, "adapter": ADAPTER, "context": {"inputs": {}}}, False),
    ({"mode": "rulebook", "rulebook": {}, "adapter": None, "context": {"inputs": None}}, True),
    ({"mode": "rulebook", "rulebook": {}, "adapter": {**ADAPTER, "version": "1.0"}}, False),
    ({"mode": "rulebook", "rulebook": {}, "adapter": {**ADAPTER, "more": 1}}, False),
    ({"mode": "rulebook", "rulebook": {}, "binding_mode": "customer_executable_rulebook"}, False),
    ({"mode": "rulebook", "rulebook": None}, False),
    ({"mode": "rulebook"}, False),
    ({"mode": "rulebook", "rulebook_ref": {"rulebook_id": "refunds"}}, True),
    ({"mode": "rulebook", "rulebook_ref": {"rulebook_id": "refunds", "version": "2.0.0"}}, True),
    ({"mode": "rulebook", "rulebook_ref": {"rulebook_id": "refunds"}, "rulebook": {}}, False),
    ({"mode": "rulebook", "rulebook_ref": {"rulebook_id": "refunds", "version": None}}, False),
    ({"mode": "rulebook", "rulebook": {}, "action": None}, False),
    ({"mode": "rulebook", "rulebook": {}, "context": {"inputs": {"a": [{"decision_contract": 1}]}}}, False),
    ({"mode": "rulebook", "rulebook": {}, "context": {"note": "x" * (MAX_FACT_STRING_LENGTH + 1)}}, True),
    ({"mode": "rulebook", "rulebook": {}, "context": {"inputs": {"s": "x" * MAX_FACT_STRING_LENGTH}}}, True),
    ({"mode": "rulebook", "rulebook": {}, "context": {"inputs": {"s": "x" * (MAX_FACT_STRING_LENGTH + 1)}}}, False),
    ({"mode": "rulebook", "rulebook": {}, "context": {"inputs": {"k" * (MAX_FACT_STRING_LENGTH + 1): 1}}}, False),
    ({"mode": "rulebook", "rulebook": {}, "context": {"inputs": {"a": [0] * MAX_FACT_ARRAY_LENGTH}}}, True),
    ({"mode": "rulebook", "rulebook": {}, "context": {"inputs": {"a": [[0] * (MAX_FACT_ARRAY_LENGTH + 1)]}}}, False),
    ({"mode": "RULEBOOK", "rulebook": {}}, False),
    ({"question": "q"}, True),
    ({"question": "q", "mode": None, "context": None, "rulebook_ref": 5}, True),  # advisory: an unknown member
    ({"question": " q ", "mode": "multi", "context": {"policy_pattern": PATTERN}}, True),
    ({"question": "x" * MAX_QUESTION}, True),
    ({"question": "x" * (MAX_QUESTION + 1)}, False),
    ({"question": " \t\n\u2003"}, False),
    ({"question": "q", "mode": "runtime", "context": {"inputs": {"a": 1}}}, True),
    ({"question": "q", "mode": "runtime", "context": {"inputs": {}}}, False),
    ({"question": "q", "mode": "runtime"}, False),
    ({"question": "q", "adapter": None}, False),
    ({"question": "q", "context": {"policy_pattern": 5}}, False),
    ({"question": "q", "context": {"workflow": "x" * (MAX_FACT_STRING_LENGTH + 1)}}, False),
    ({"question": "q", "context": {"inputs": {"application_verdict": "allow"}}}, False),
    ({"question": "q", "context": {"application_verdict": "allow"}}, True),  # only inputs is walked for it
    ({"question": "q", "response_view": "huge"}, False),
    ([], False),
    ("decide", False),
    (None, False),
]


@pytest.mark.parametrize("body, accepted", CORPUS, ids=range(len(CORPUS)))
def test_the_schema_and_the_decide_path_agree_on_the_corpus(body, accepted):
    assert fast_path_accepts(body) is accepted
    assert schema_accepts(body) is accepted


SMALL_LIMIT = 40  # the count of values, lowered for speed: the schema has no keyword that counts them


@pytest.mark.parametrize("body", [
    {"mode": "rulebook", "rulebook": {}, "context": {"inputs": {"values": [0] * (SMALL_LIMIT - 2)}}},
    {"question": "q", "context": {"values": [0] * (SMALL_LIMIT - 2)}},
], ids=["facts", "advisory-context"])
def test_the_count_of_values_is_the_decide_paths_alone(monkeypatch, body):
    """At most MAX_FACT_VALUES JSON values (the object, the array and its items count one each):
    no JSON Schema keyword counts the values of a document (its description says so), so only
    the decide path refuses one value more. Shown at a lowered limit: the schema's answer does not
    depend on the count, and 100,000 values take the schema's validator seconds."""
    monkeypatch.setattr(fact_limits, "MAX_FACT_VALUES", SMALL_LIMIT)
    assert fast_path_accepts(body) and schema_accepts(body)
    inner = body["context"].get("inputs", body["context"])
    inner["values"].append(0)
    assert schema_accepts(body) and not fast_path_accepts(body)


def test_the_pattern_registry_is_the_decide_paths_alone():
    body = {"question": "q", "context": {"policy_pattern": "no-such-pattern"}}
    assert schema_accepts(body) and not fast_path_accepts(body)


# Bodies near the boundary: a well-formed body of each kind, then at most two members set to a value
# of another member, of another type, or removed; the corpus above holds the limits.
_FACT = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["a", "b", "inputs", "action"]), inner, max_size=2),
    max_leaves=6)
_INPUTS = st.dictionaries(st.sampled_from(["amount", "risk", "adapter_facts"]), _FACT, max_size=2)
_CONTEXT = st.none() | st.fixed_dictionaries({}, optional={
    "inputs": st.none() | _INPUTS, "workflow": st.just("refund"), "policy_pattern": st.sampled_from([PATTERN, 5])})
_VIEW = st.sampled_from([*C.VIEWS, None])
_RULEBOOK_MODE = st.fixed_dictionaries({"mode": st.just("rulebook"), "rulebook": st.just({})}, optional={
    "binding_mode": st.sampled_from([*C.SUPPORTED_BINDING_MODES, None]), "adapter": st.sampled_from([None, ADAPTER, {**ADAPTER, "extra": 1}]),
    "context": _CONTEXT | st.just({"inputs": {"amount": 1}}), "response_view": _VIEW, "question": st.sampled_from(["q", 3, None])})
_BY_REFERENCE = st.fixed_dictionaries({"mode": st.just("rulebook"), "rulebook_ref": st.sampled_from(
    [{"rulebook_id": "r"}, {"rulebook_id": "r", "version": "1.0.0"}])}, optional={"context": _CONTEXT,
                                                                                   "response_view": _VIEW})
_ADVISORY = st.fixed_dictionaries({"question": st.sampled_from(["q", " q\n", " \u2003"]),
                                   "mode": st.sampled_from([None, *C.LEGACY_MODES])}, optional={
    "context": _CONTEXT, "response_view": _VIEW, "rulebook_ref": st.just(5)})
_MEMBERS = ["mode", "question", "rulebook", "rulebook_ref", "binding_mode", "adapter", "context", "response_view",
            "action", "trusted_adapter", "note"]
_VALUES = st.sampled_from([
    None, "", " ", "x", 5, 1.5, True, [], {}, "rulebook", "runtime", "single", "full", "huge",
    *C.SUPPORTED_BINDING_MODES, "customer_executable_rulebook", ADAPTER, {**ADAPTER, "version": "1.0"},
    {**ADAPTER, "extra": 1}, {"adapter_id": "r"}, {"rulebook_id": "r"}, {"rulebook_id": 5},
    {"rulebook_id": "r", "version": None}, {"inputs": {}}, {"inputs": {"a": 1}}, {"inputs": "x"},
    {"inputs": {"a": {"trusted_adapter": 1}}}, {"inputs": {"a": 1}, "policy_pattern": 5},
    {"policy_pattern": PATTERN}, {"policy_pattern": "refund_approval"}, "x" * (MAX_QUESTION + 1)])
_CHANGE = st.tuples(st.sampled_from(_MEMBERS), st.none() | _VALUES.map(lambda value: (value,)))


def _changed(body: dict[str, Any], changes: list[tuple[str, tuple[Any] | None]]) -> dict[str, Any]:
    for member, value in changes:
        if value is None:
            body.pop(member, None)
        else:
            body[member] = value[0]
    return body


_BODY = st.builds(_changed, _RULEBOOK_MODE | _BY_REFERENCE | _ADVISORY, st.lists(_CHANGE, max_size=2)) \
    | st.sampled_from([[], "decide", None, 1])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_BODY)
def test_the_schema_accepts_exactly_what_the_decide_path_accepts(body):
    assert schema_accepts(body) is fast_path_accepts(body), bodies.first_error("decide", body)
