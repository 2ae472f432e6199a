"""Property tests: compiled evaluation equals a small independent reference interpreter.

The interpreter below is written straight from reference facts §2 (recursive, no code
generation, its own equality and collation calls) and shares no code with `gate.rulebook`
except nothing: it sorts with `pyuca` directly. Random rulebooks mix every declared operator
(the names, and which take an array or no value, from `gate.rulebook.operators`; the meaning is
the interpreter's own) and combinator, ties in priority, collation-sensitive ids, typed inputs
and nested facts.
"""

from __future__ import annotations

import copy
import json
import math

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyuca import Collator

from gate.protocol.canonical import sha256_hex
from gate.rulebook import get_evaluator, schema_bytes, validate_rulebook
from gate.rulebook import operators as operator_table
from tests.rulebook.test_rulebook_operators import REF_MISSING as _MISSING
from tests.rulebook.test_rulebook_operators import ref_is_number, ref_leaf

# --------------------------------------------------------------------------- reference interpreter

_COLLATOR = Collator()


def ref_resolve(facts, path):
    current = facts
    for part in path.split("."):
        if not isinstance(current, dict) or part not in current:
            return _MISSING
        current = current[part]
    return current


def ref_condition(node, facts, rule_id, trace):
    if "all" in node:
        return all(ref_condition(child, facts, rule_id, trace) for child in node["all"])  # lazy: short-circuits
    if "any" in node:
        return any(ref_condition(child, facts, rule_id, trace) for child in node["any"])
    if "not" in node:
        child = node["not"][0] if isinstance(node["not"], list) else node["not"]
        return not ref_condition(child, facts, rule_id, trace)
    passed = ref_leaf(node["operator"], ref_resolve(facts, node["field"]), node.get("value"))
    trace.append({"rule_id": rule_id, "field": node["field"], "operator": node["operator"], "passed": passed})
    return passed


def ref_type_ok(kind, value):
    if kind == "string":
        return isinstance(value, str)
    if kind == "number":
        return ref_is_number(value) and math.isfinite(value)
    if kind == "integer":
        return ref_is_number(value) and math.isfinite(value) and float(value).is_integer()
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return value is None


def _outcome(outcome, status="ok", rule_id=None, trace=(), missing=(), invalid=()):
    return {
        "status": status, "decision": outcome["decision"], "application_verdict": outcome["verdict"],
        "action": outcome["action"], "reason_code": outcome["reason_code"], "matched_rule_id": rule_id,
        "matched": rule_id is not None, "checks": list(trace), "missing_fields": list(missing),
        "invalid_fields": list(invalid),
    }


def ref_evaluate(rulebook, facts):
    schema = rulebook.get("input_schema", {})
    required, properties = schema.get("required", []), schema.get("properties", {})
    missing, invalid = [], []
    for name in set(required) | set(properties):
        value = ref_resolve(facts, name)
        if value is _MISSING:
            if name in required:
                missing.append(name)
        elif name in properties and not ref_type_ok(properties[name]["type"], value):
            invalid.append(name)
    if missing or invalid:
        order = lambda name: _COLLATOR.sort_key(name)  # noqa: E731
        needs = {"decision": "review", "verdict": "NEEDS_INPUT", "action": "collect_required_input", "reason_code": "INPUT_SCHEMA_FAILED"}
        return _outcome(needs, "needs_input", missing=sorted(missing, key=order), invalid=sorted(invalid, key=order))
    rules = sorted(rulebook["rules"], key=lambda r: (-r.get("priority", 0), _COLLATOR.sort_key(r["rule_id"])))
    trace = []
    for rule in rules:
        if ref_condition(rule["condition"], facts, rule["rule_id"], trace):
            return _outcome(rule["outcome"], rule_id=rule["rule_id"], trace=trace)
    return _outcome(rulebook["default_outcome"], trace=trace)


def as_dict(evaluation):
    return {
        "status": evaluation.status, "decision": evaluation.decision,
        "application_verdict": evaluation.application_verdict, "action": evaluation.action,
        "reason_code": evaluation.reason_code, "matched_rule_id": evaluation.matched_rule_id,
        "matched": evaluation.matched, "checks": [dict(c) for c in evaluation.checks],
        "missing_fields": list(evaluation.missing_fields), "invalid_fields": list(evaluation.invalid_fields),
    }


# --------------------------------------------------------------------------- strategies

FIELDS = ["a", "b", "c", "a.b", "a.b.c", "b.a", "c.x"]
KEYS = ["a", "b", "c", "x"]
RULE_IDS = ["a1", "a_b", "ab", "a-b", "a.b", "a:b", "ba", "rule.9", "rule.10", "zeta", "a0"]
# Every declared operator (the reference interpreter above refuses one it does not know).
OPERATORS = [operator.name for operator in operator_table.OPERATORS]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.0, 1.0, -1.5, 2.5, 3.0]),
    st.sampled_from(["", "a", "ab", "vip", "x", "1"]),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(KEYS), inner, max_size=3)),
    max_leaves=6,
)
leaf_values = st.one_of(scalars, scalars, json_values, st.lists(scalars, max_size=4))


@st.composite
def leaves(draw):
    operator = draw(st.sampled_from(OPERATORS))
    node = {"field": draw(st.sampled_from(FIELDS)), "operator": operator}
    operand = operator_table.BY_NAME[operator].operand
    if operand is operator_table.Operand.OPTIONS and draw(st.integers(0, 4)):
        node["value"] = draw(st.lists(st.one_of(scalars, json_values), max_size=4))
    elif operand is not operator_table.Operand.NONE or draw(st.booleans()):
        node["value"] = draw(leaf_values)
    return node


def _conditions(depth):
    if depth == 1:
        return leaves()
    sub = _conditions(depth - 1)
    return st.one_of(
        leaves(),
        st.builds(lambda c: {"all": c}, st.lists(sub, min_size=1, max_size=3)),
        st.builds(lambda c: {"any": c}, st.lists(sub, min_size=1, max_size=3)),
        st.builds(lambda c: {"not": c}, sub),
        st.builds(lambda c: {"not": [c]}, sub),
    )


conditions = _conditions(4)
outcomes = st.builds(
    lambda d, v, a, r: {"decision": d, "verdict": v, "action": a, "reason_code": r},
    st.sampled_from(["yes", "no", "review"]),
    st.sampled_from(["APPROVE", "BLOCK", "REVIEW", "BIND_READY"]),
    st.sampled_from(["go", "stop", "hold for review"]),
    st.sampled_from(["R_ONE", "R_TWO", "NO_MATCH"]),
)


@st.composite
def rulebooks(draw):
    ids = draw(st.lists(st.sampled_from(RULE_IDS), min_size=1, max_size=6, unique=True))
    rules = []
    for rule_id in ids:
        rule = {"rule_id": rule_id, "condition": draw(conditions), "outcome": draw(outcomes)}
        priority = draw(st.sampled_from([None, -1, 0, 1, 5]))
        if priority is not None:
            rule["priority"] = priority
        rules.append(rule)
    book = {"schema_version": "rulebook_v1", "rulebook_id": "prop_book", "version": "1", "rules": rules,
            "default_outcome": draw(outcomes)}
    if draw(st.integers(0, 3)) == 0:
        props = draw(st.dictionaries(st.sampled_from(FIELDS), st.sampled_from(["string", "number", "integer", "boolean", "array", "object", "null"]).map(lambda t: {"type": t}), max_size=3))
        required = draw(st.lists(st.sampled_from(FIELDS), max_size=2, unique=True))
        book["input_schema"] = {"required": required, "properties": props}
    return book


facts_strategy = st.one_of(
    st.dictionaries(
        st.sampled_from(KEYS),
        st.one_of(json_values, st.dictionaries(st.sampled_from(KEYS), json_values, max_size=3)),
        max_size=4,
    ),
    json_values,
)

def _leaves_of(node):
    if "all" in node or "any" in node:
        for child in node.get("all", node.get("any")):
            yield from _leaves_of(child)
    elif "not" in node:
        yield from _leaves_of(node["not"][0] if isinstance(node["not"], list) else node["not"])
    else:
        yield node


def look_alikes(value):
    """`value` and values a coercing implementation would confuse with it."""
    if isinstance(value, bool):
        return [value, int(value), float(value), str(value).lower()]
    if ref_is_number(value):
        alikes = [value, float(value), -value, value + 0.5, str(value)]
        return alikes + ([bool(value)] if value in (0, 1) else [])
    if isinstance(value, str):
        return [value, value + "x", "x" + value, value[:1], [value], {value: 1} if value else {}]
    if value is None:
        return [None, 0, False, "", []]
    if isinstance(value, list):
        variants = [[_nth_alike(v, i) for v in value] for i in (1, 2, 3)]
        members = [alike for v in value for alike in look_alikes(v)]
        return [value, value[::-1], value[:-1], value + [None]] + variants + members
    variants = [{k: _nth_alike(v, i) for k, v in value.items()} for i in (1, 2, 3)]
    return [value, list(value), dict(value, extra=1)] + variants


def _nth_alike(value, index):
    alikes = look_alikes(value)
    return alikes[min(index, len(alikes) - 1)]


def _set_path(facts, path, value):
    parts = path.split(".")
    target = facts
    for part in parts[:-1]:
        if not isinstance(target.get(part), dict):
            target[part] = {}
        target = target[part]
    target[parts[-1]] = value


@st.composite
def targeted_facts(draw, rulebook):
    """Facts that give the rulebook's own fields its own values and their look-alikes."""
    leaves = [leaf for rule in rulebook["rules"] for leaf in _leaves_of(rule["condition"])]
    facts = {}
    for leaf in draw(st.lists(st.sampled_from(leaves), max_size=6)):
        candidates = look_alikes(leaf.get("value"))
        _set_path(facts, leaf["field"], copy.deepcopy(draw(st.sampled_from(candidates))))
    for path in draw(st.lists(st.sampled_from(FIELDS), max_size=2)):
        _set_path(facts, path, draw(json_values))
    if draw(st.integers(0, 9)) == 0:  # sometimes break a path with a scalar or list in the middle
        facts[draw(st.sampled_from(KEYS))] = draw(st.sampled_from([1, "a", [{"b": 1}], None]))
    schema = rulebook.get("input_schema", {})
    for name in schema.get("required", []) + sorted(schema.get("properties", {})):
        if draw(st.integers(0, 9)) and ref_resolve(facts, name) is _MISSING:  # mostly satisfy input_schema
            kind = schema.get("properties", {}).get(name, {}).get("type", "null")
            _set_path(facts, name, copy.deepcopy(draw(st.sampled_from(TYPE_EXAMPLES[kind]))))
    return facts


TYPE_EXAMPLES = {
    "string": ["", "a", "vip"], "number": [0, 1.5, -2], "integer": [0, 3, 10.0], "boolean": [True, False],
    "array": [[], [1]], "object": [{}, {"a": 1}], "null": [None],
}


SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------- properties


@SETTINGS
@given(rulebooks(), st.lists(facts_strategy, max_size=2), st.data())
def test_compiled_evaluation_equals_reference(rulebook, facts_list, data):
    assert validate_rulebook(rulebook) == []
    compiled = get_evaluator(rulebook, sha256_hex(rulebook))
    facts_list = facts_list + data.draw(st.lists(targeted_facts(rulebook), min_size=1, max_size=4))
    for facts in facts_list:
        first = compiled.evaluate(facts)
        assert as_dict(first) == ref_evaluate(rulebook, facts)
        assert compiled.evaluate(copy.deepcopy(facts)) == first  # deterministic


@SETTINGS
@given(leaves(), st.data())
def test_single_leaf_equals_reference(leaf, data):
    rulebook = {
        "schema_version": "rulebook_v1", "rulebook_id": "leaf_book", "version": "1",
        "rules": [{"rule_id": "only", "condition": leaf, "outcome": {"decision": "yes", "verdict": "HIT", "action": "go", "reason_code": "HIT"}}],
        "default_outcome": {"decision": "no", "verdict": "MISS", "action": "stop", "reason_code": "MISS"},
    }
    compiled = get_evaluator(rulebook, sha256_hex(rulebook))
    for value in look_alikes(leaf.get("value")) + [data.draw(json_values)]:
        facts = {}
        _set_path(facts, leaf["field"], value)
        assert as_dict(compiled.evaluate(facts)) == ref_evaluate(rulebook, facts)


@SETTINGS
@given(rulebooks())
def test_key_order_does_not_change_the_evaluator(rulebook):
    def reverse(value):
        if isinstance(value, dict):
            return {k: reverse(value[k]) for k in reversed(list(value))}
        if isinstance(value, list):
            return [reverse(v) for v in value]
        return value

    reordered = reverse(rulebook)
    assert sha256_hex(reordered) == sha256_hex(rulebook)
    assert get_evaluator(reordered, sha256_hex(reordered)) is get_evaluator(rulebook, sha256_hex(rulebook))


_SCHEMA = jsonschema.Draft202012Validator(json.loads(schema_bytes()))

MUTATIONS = [
    lambda b, d: b.__setitem__(d.sampled_from(["code", "function", "notes", "wasm"]), "x"),
    lambda b, d: b["rules"][0].__setitem__(d.sampled_from(["script", "handler", "name"]), "x"),
    lambda b, d: b["rules"][0]["condition"].__setitem__(d.sampled_from(["source", "javascript", "extra"]), 1),
    lambda b, d: b["rules"][-1]["outcome"].__setitem__("decision", d.sampled_from(["YES", "unclear", "", "No"])),
    lambda b, d: b["default_outcome"].__setitem__("verdict", d.sampled_from(["approve", "A", "1AB", "A-B"])),
    lambda b, d: b["rules"][0].__setitem__("priority", d.sampled_from([1001, -1001, 1.5, "1", True])),
    lambda b, d: b["rules"][0].__setitem__("condition", d.sampled_from([{}, {"all": []}, {"not": []}, {"field": "a", "operator": "matches", "value": 1}, {"field": "9a", "operator": "exists"}, {"field": "a", "operator": "eq"}])),
    lambda b, d: b.__setitem__("schema_version", d.sampled_from(["rulebook_v2", "", 1])),
    lambda b, d: b["rules"].clear(),
    lambda b, d: b.pop(d.sampled_from(["rulebook_id", "version", "rules", "default_outcome"])),
]


@SETTINGS
@given(rulebooks(), st.sampled_from(range(len(MUTATIONS))), st.data())
def test_validator_and_json_schema_agree_on_random_rulebooks(rulebook, mutation, data):
    assert _SCHEMA.is_valid(rulebook)

    class Draw:
        @staticmethod
        def sampled_from(options):
            return data.draw(st.sampled_from(options))

    broken = copy.deepcopy(rulebook)
    MUTATIONS[mutation](broken, Draw)
    assert validate_rulebook(broken) != []
    assert not _SCHEMA.is_valid(broken)
