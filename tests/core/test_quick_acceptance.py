"""The quick acceptance of a body (`gate.bodies.accepts`) agrees with the validator, for every body
schema and every event type: a body it takes has no error, and one it refuses has one. A quick
check that took what the validator refuses would let a bad body through unnamed (fail open), so
the bodies are drawn close to each schema: its own enums, members and shapes, and values at the
edges of every rule (blank and padded text, UTF-16 limits, safe integers, hashes, URLs, dates)."""

from __future__ import annotations

from importlib import resources
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gate import bodies

HASH = "0123456789abcdef" * 4
TEXTS = ["", " ", "x", " padded\t", "\ufeff", "\u3000x\u3000", "\x1c", "é", "\U0001F600" * 80, "\U0001F600" * 80 + "x",
         "x" * 160, "x" * 161, "x" * 300, "x" * 301, HASH, HASH.upper(), "sha256:ab/c=", "a b",
         "2026-05-21T00:00:00Z", "2026-02-29T00:00:00Z", " 2024-02-29T23:59:59.5+00:00 ", "2026-05-21",
         "https://crm.example/r/1", "ftp://crm.example", "https://", "http://h:99999", "HTTPS://H", "refund", "US", "default"]
NUMBERS = [0, 1, -1, 5.0, 1.5, 2 ** 53 - 1, 2 ** 53, -(2 ** 53), 1e300, 36500, 36501, 64, 65, float("nan"), float("inf")]
SCALARS = [None, True, False, *NUMBERS, *TEXTS]


def _names() -> list[str]:
    return sorted(entry.name.removesuffix(".schema.json") for entry in resources.files("gate.bodies").iterdir()
                  if entry.name.endswith(".schema.json") and entry.name != f"{bodies.EVENT_DATA}.schema.json")


def _node(root: dict[str, Any], node: Any) -> Any:
    while isinstance(node, dict) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#/$defs/"):
        node = {**root["$defs"][node["$ref"].removeprefix("#/$defs/")], **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _value(root: dict[str, Any], node: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values near what `node` takes: its own enum and members, and the edges of every rule."""
    node = _node(root, node)
    anything = st.sampled_from(SCALARS) | st.just([]) | st.just({})
    if not isinstance(node, dict) or depth > 3:
        return anything
    choices = [anything]
    for keyword in ("enum", "examples"):
        if node.get(keyword):
            choices.append(st.sampled_from(node[keyword]))
    if "const" in node:
        choices.append(st.just(node["const"]))
    for keyword in ("anyOf", "oneOf", "allOf"):
        choices += [_value(root, part, depth + 1) for part in node.get(keyword, ())]
    properties = node.get("properties", {})
    if properties:
        members = {name: _value(root, child, depth + 1) for name, child in properties.items()}
        required = [name for name in node.get("required", ()) if name in members]
        choices.append(st.fixed_dictionaries({name: members[name] for name in required},
                                              optional={name: value for name, value in members.items()
                                                        if name not in required}))
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        choices.append(st.dictionaries(st.sampled_from(["k", "order_id", "1bad", " ", "rate.x", "x" * 161]),
                                       _value(root, extra, depth + 1), max_size=4))
    if isinstance(node.get("items"), dict):
        choices.append(st.lists(_value(root, node["items"], depth + 1), max_size=4))
    return st.one_of(*choices)


NOT_QUICK = {"decide"}  # its facts are a recursive JSON value: the validator alone


def _agrees(name: str, body: Any) -> None:
    quick = bodies.accepts(name)
    assert (quick is None) == (name in NOT_QUICK), name
    if quick is not None:  # every keyword is exact: it takes exactly what the validator takes
        errors = list(bodies.validator(name).iter_errors(body))
        assert quick(body) == (not errors), (name, body, [error.message for error in errors][:3])


@pytest.mark.parametrize("name", _names())
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_the_quick_acceptance_of_a_body_is_the_validator_s(name, data):
    root = dict(bodies.schema(name))
    _agrees(name, data.draw(_value(root, root)))


@pytest.mark.parametrize("event_type", bodies.event_types())
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_quick_acceptance_of_an_event_s_data_is_the_validator_s(event_type, data):
    root = dict(bodies.schema(bodies.EVENT_DATA))
    node = dict(bodies._event_node(event_type))
    body = data.draw(_value(root, node))
    quick = bodies.quick_event_check(event_type)
    assert quick is not None, event_type
    errors = list(bodies.event_validator(event_type).iter_errors(body))
    assert quick(body) == (not errors), (event_type, body)


def test_a_keyword_the_quick_check_does_not_know_leaves_the_validator_alone():
    assert bodies._quick(bodies._Compiling({}), {"type": "object"})({}) is True
    with pytest.raises(bodies._NotQuick):
        bodies._quick(bodies._Compiling({}), {"contains": {"type": "string"}})


@pytest.mark.parametrize(("node", "values"), [
    ({"enum": [1, "a", None, [1, {"b": True}]]}, [1, 1.0, True, "a", "b", None, 0, [1, {"b": True}], [1.0, {"b": 1}]]),
    ({"not": {"enum": [1]}}, [1, 1.0, True, "1"]),
    ({"const": False}, [False, 0, None]),
    ({"uniqueItems": True}, [[1, 1.0], [1, True], [{"a": 1}, {"a": 1.0}], [[1], [True]], ["a", "a"], ["a", "b"]]),
    ({"not": {"uniqueItems": True}}, [[1, 1.0], [1, True]]),
    ({"oneOf": [{"enum": [1]}, {"type": "number"}]}, [1, 2, True]),
    ({"if": {"enum": [1]}, "then": {"type": "integer"}, "else": {"type": "string"}}, [1, 1.0, "x", True]),
    ({"$defs": {"n": {"type": "number"}}, "$ref": "#/$defs/n", "maximum": 3}, [2, 4, "x"]),
])
def test_the_quick_check_is_exact_where_it_stands_under_not_or_in_a_choice(node, values):
    """A check that said False when unsure would turn into True under `not`, in a `oneOf` or as an
    `if`: every keyword is exact (JSON's equality for enums, consts and unique items; a reference
    and its siblings both apply), so each answer is the validator's."""
    quick = bodies._quick(bodies._Compiling(node), node)
    strict = bodies._Validator(node)
    for value in values:
        assert quick(value) == strict.is_valid(value), (node, value)


def test_a_recursive_shape_leaves_the_validator_alone():
    node = {"$defs": {"value": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"$ref": "#/$defs/value"}}]}},
            "$ref": "#/$defs/value"}
    with pytest.raises(bodies._NotQuick):
        bodies._quick(bodies._Compiling(node), node)  # a recursive shape
