"""Rule order, combinators and trace, needs_input, outcomes, caching and robustness."""

from __future__ import annotations

import copy
import math
import threading

import pytest

from gate.errors import RulebookInvalid
from gate.protocol.canonical import sha256_hex
from gate.rulebook import CompiledRulebook, Evaluation, get_evaluator
from gate.rulebook.cache import CACHE_SIZE, clear_cache

# --------------------------------------------------------------------------- order


def _matched(build, evaluate, rules, facts=None):
    return evaluate(build.rulebook(rules), facts or {"x": 1}).matched_rule_id


def _always(build, rule_id, priority=None):
    return build.rule(rule_id, build.leaf("x", "exists"), priority=priority, verdict=rule_id.upper().replace(".", "_").replace("-", "_").replace(":", "_"))


def test_higher_priority_wins_over_rule_listed_first(build, evaluate):
    rules = [_always(build, "approve", 1), _always(build, "block", 2)]
    assert _matched(build, evaluate, rules) == "block"


def test_missing_priority_is_zero(build, evaluate):
    assert _matched(build, evaluate, [_always(build, "neg", -1), _always(build, "zero")]) == "zero"
    assert _matched(build, evaluate, [_always(build, "zero"), _always(build, "pos", 1)]) == "pos"


@pytest.mark.parametrize(
    "ids, winner",
    [
        (["a1", "a_b"], "a_b"),  # "_" sorts before digits in collation (code-point order says a1)
        (["ab", "a1"], "a1"),  # digits before letters
        (["a0", "a-b"], "a-b"),  # punctuation before digits
        (["b_rule", "a_rule"], "a_rule"),
        (["rule.10", "rule.9"], "rule.10"),  # character by character, not numeric
    ],
)
def test_ties_broken_by_rule_id_in_collation_order(build, evaluate, ids, winner):
    rules = [_always(build, rule_id, 7) for rule_id in ids]
    assert _matched(build, evaluate, rules) == winner
    assert _matched(build, evaluate, list(reversed(rules))) == winner


def test_first_match_stops_evaluation(build, evaluate):
    rules = [_always(build, "first", 2), build.rule("second", build.leaf("y", "exists"), priority=1)]
    evaluation = evaluate(build.rulebook(rules), {"x": 1, "y": 1})
    assert evaluation.matched_rule_id == "first"
    assert [c["rule_id"] for c in evaluation.checks] == ["first"]


def test_outcome_fields_of_matched_rule(build, evaluate):
    rule = build.rule("bind", build.leaf("x", "exists"), decision="no", verdict="BIND_READY", action="hold it", reason_code="R_42")
    evaluation = evaluate(build.rulebook([rule]), {"x": 1})
    assert evaluation == Evaluation(
        status="ok", decision="no", application_verdict="BIND_READY", action="hold it", reason_code="R_42",
        matched_rule_id="bind", matched=True,
        checks=({"rule_id": "bind", "field": "x", "operator": "exists", "passed": True},),
    )


def test_default_outcome(build, evaluate):
    default = build.outcome("review", "DEFER", "wait_for_owner", "NOTHING_MATCHED")
    rulebook = build.rulebook([_always(build, "only")], default=default)
    evaluation = evaluate(rulebook, {})
    assert (evaluation.status, evaluation.decision, evaluation.application_verdict) == ("ok", "review", "DEFER")
    assert (evaluation.action, evaluation.reason_code) == ("wait_for_owner", "NOTHING_MATCHED")
    assert evaluation.matched_rule_id is None and evaluation.matched is False
    assert evaluation.trace() == {"matched": False, "checks": [{"rule_id": "only", "field": "x", "operator": "exists", "passed": False}]}


# --------------------------------------------------------------------------- combinators and trace


def _trace(evaluation):
    return [(c["field"], c["passed"]) for c in evaluation.checks]


def test_all_short_circuits_at_first_false(build, evaluate):
    cond = {"all": [build.leaf("a", "exists"), build.leaf("b", "exists"), build.leaf("c", "exists")]}
    evaluation = evaluate(build.single(cond), {"a": 1, "c": 1})
    assert not evaluation.matched
    assert _trace(evaluation) == [("a", True), ("b", False)]


def test_any_short_circuits_at_first_true(build, evaluate):
    cond = {"any": [build.leaf("a", "exists"), build.leaf("b", "exists"), build.leaf("c", "exists")]}
    evaluation = evaluate(build.single(cond), {"b": 1})
    assert evaluation.matched
    assert _trace(evaluation) == [("a", False), ("b", True)]


def test_not_negates_and_traces_the_leaf_result(build, evaluate):
    for form in ({"not": build.leaf("a", "exists")}, {"not": [build.leaf("a", "exists")]}):
        evaluation = evaluate(build.single(form), {"a": 1})
        assert not evaluation.matched
        assert _trace(evaluation) == [("a", True)]
        evaluation = evaluate(build.single(form), {})
        assert evaluation.matched
        assert _trace(evaluation) == [("a", False)]


def test_nested_combinators(build, evaluate):
    cond = {
        "any": [
            {"all": [build.leaf("a", "eq", 1), {"not": {"any": [build.leaf("b", "eq", 1), build.leaf("c", "eq", 1)]}}]},
            build.leaf("d", "eq", 1),
        ]
    }
    rulebook = build.single(cond)
    assert evaluate(rulebook, {"a": 1}).matched
    assert _trace(evaluate(rulebook, {"a": 1})) == [("a", True), ("b", False), ("c", False)]
    assert _trace(evaluate(rulebook, {"a": 1, "b": 1})) == [("a", True), ("b", True), ("d", False)]
    assert _trace(evaluate(rulebook, {"a": 0, "d": 1})) == [("a", False), ("d", True)]
    assert evaluate(rulebook, {"a": 0, "d": 1}).matched


def test_depth_eight_evaluates(build, evaluate):
    node = build.leaf("a", "eq", 1)
    for wrapper in ("any", "all", "not", "any", "all", "not", "all"):  # 7 wrappers + leaf = depth 8
        node = {"not": node} if wrapper == "not" else {wrapper: [node]}
    rulebook = build.single(node)
    assert evaluate(rulebook, {"a": 1}).matched
    assert not evaluate(rulebook, {"a": 2}).matched


def test_trace_is_json_ready(build, evaluate):
    import json

    evaluation = evaluate(build.single({"all": [build.leaf("a", "exists"), build.leaf("b", "gt", 1)]}), {"a": 1, "b": 2})
    assert json.loads(json.dumps(evaluation.trace())) == {
        "matched": True,
        "checks": [
            {"rule_id": "r_one", "field": "a", "operator": "exists", "passed": True},
            {"rule_id": "r_one", "field": "b", "operator": "gt", "passed": True},
        ],
    }


# --------------------------------------------------------------------------- needs_input


def _typed(build, kind, required=True):
    schema = {"properties": {"v": {"type": kind}}}
    if required:
        schema["required"] = ["v"]
    return build.rulebook([_always(build, "go")], input_schema=schema)


TYPE_CASES = [
    ("number", 1, True), ("number", 1.5, True), ("number", -0.0, True), ("number", True, False),
    ("number", "1", False), ("number", None, False), ("number", math.inf, False), ("number", math.nan, False),
    ("integer", 10, True), ("integer", 10.0, True), ("integer", -3, True), ("integer", 10.5, False),
    ("integer", True, False), ("integer", "10", False), ("integer", math.inf, False),
    ("string", "", True), ("string", "x", True), ("string", 1, False), ("string", None, False),
    ("boolean", True, True), ("boolean", False, True), ("boolean", 0, False), ("boolean", "true", False),
    ("array", [], True), ("array", [1], True), ("array", {}, False), ("array", "[]", False),
    ("object", {}, True), ("object", {"a": 1}, True), ("object", [], False), ("object", None, False),
    ("null", None, True), ("null", 0, False), ("null", "", False), ("null", False, False),
]


@pytest.mark.parametrize("kind, value, valid", TYPE_CASES)
def test_input_types(build, evaluate, kind, value, valid):
    evaluation = evaluate(_typed(build, kind), {"v": value, "x": 1})
    if valid:
        assert evaluation.status == "ok" and evaluation.matched_rule_id == "go"
    else:
        assert evaluation == Evaluation(
            status="needs_input", decision="review", application_verdict="NEEDS_INPUT",
            action="collect_required_input", reason_code="INPUT_SCHEMA_FAILED",
            matched_rule_id=None, matched=False, checks=(), missing_fields=(), invalid_fields=("v",),
        )


def test_missing_required_input(build, evaluate):
    evaluation = evaluate(_typed(build, "number"), {"x": 1})
    assert evaluation.status == "needs_input"
    assert evaluation.missing_fields == ("v",) and evaluation.invalid_fields == ()
    assert evaluation.checks == () and evaluation.matched_rule_id is None and not evaluation.matched


def test_optional_declared_input(build, evaluate):
    rulebook = _typed(build, "number", required=False)
    assert evaluate(rulebook, {"x": 1}).status == "ok"
    assert evaluate(rulebook, {"x": 1, "v": 2}).status == "ok"
    assert evaluate(rulebook, {"x": 1, "v": "2"}).invalid_fields == ("v",)


def test_required_without_declared_type_accepts_any_value(build, evaluate):
    rulebook = build.rulebook([_always(build, "go")], input_schema={"required": ["v"]})
    assert evaluate(rulebook, {"x": 1, "v": None}).status == "ok"
    assert evaluate(rulebook, {"x": 1}).missing_fields == ("v",)


def test_missing_fields_sorted_in_collation_order(build, evaluate):
    names = ["zeta", "a1", "a_b", "B", "b"]
    rulebook = build.rulebook([_always(build, "go")], input_schema={"required": names})
    assert evaluate(rulebook, {}).missing_fields == ("a_b", "a1", "b", "B", "zeta")


def test_nested_required_input(build, evaluate):
    rulebook = build.rulebook(
        [_always(build, "go")],
        input_schema={"required": ["customer.id"], "properties": {"customer.id": {"type": "string"}}},
    )
    assert evaluate(rulebook, {"customer": {"id": "c"}, "x": 1}).status == "ok"
    assert evaluate(rulebook, {"customer": ["c"]}).missing_fields == ("customer.id",)
    assert evaluate(rulebook, {"customer": {"id": 3}}).invalid_fields == ("customer.id",)


def test_empty_input_schema(build, evaluate):
    rulebook = build.rulebook([_always(build, "go")], input_schema={})
    assert evaluate(rulebook, {"x": 1}).matched_rule_id == "go"


# --------------------------------------------------------------------------- robustness


WEIRD_FACTS = [
    None, 0, 1.5, "x", True, [], [1, {"x": 1}], {"x": None}, {"x": [[[[]]]]},
    {"a": {"b": {"c": {"d": {}}}}}, {"x": float("inf")}, {"x": {"x": {"x": "x"}}},
    {"a": "b" * 10_000}, {"f": [{"a": [1, 2, {"b": None}]}] * 50},
]


def _everything(build):
    leaves = []
    for op, value in [
        ("exists", None), ("not_exists", None), ("eq", [1, {"a": None}]), ("neq", "x"), ("gt", 1),
        ("gte", 1.5), ("lt", -1), ("lte", 0), ("in", [1, "x", None, [1]]), ("not_in", ["x"]),
        ("contains", {"a": 1}), ("not_contains", "b"), ("eq", {"a": [1]}), ("in", "not-a-list"),
        ("gt", "not-a-number"), ("contains", "x"),
    ]:
        for field in ("x", "a.b", "f", "a.b.c.d"):
            leaves.append(build.leaf(field, op, value))
    rules = [build.rule(f"r_{i:02d}", {"any": [{"not": leaf}, leaf]}) for i, leaf in enumerate(leaves[:32])]
    rules += [build.rule(f"s_{i:02d}", {"all": leaves[32 + i * 8: 40 + i * 8]}) for i in range(4)]
    return build.rulebook(rules[:100], input_schema={"properties": {"x": {"type": "number"}}})


@pytest.mark.parametrize("facts", WEIRD_FACTS, ids=range(len(WEIRD_FACTS)))
def test_evaluate_never_raises(build, evaluate, facts):
    evaluation = evaluate(_everything(build), facts)
    assert isinstance(evaluation, Evaluation)
    assert evaluation.status in ("ok", "needs_input")


def test_deeply_nested_facts_do_not_exhaust_the_stack(build, evaluate):
    deep = [1]
    for _ in range(10_000):
        deep = [deep]
    rulebook = build.single({"any": [build.leaf("f", "eq", [[1]]), build.leaf("f", "contains", [1])]})
    assert evaluate(rulebook, {"f": deep}).matched is False


def test_evaluation_does_not_share_mutable_state(build, evaluate):
    rulebook = build.single(build.leaf("x", "exists"))
    first = evaluate(rulebook, {"x": 1})
    first.checks[0]["passed"] = "tampered"
    assert evaluate(rulebook, {"x": 1}).checks[0]["passed"] is True


def test_caller_mutation_after_compile_has_no_effect(build):
    rulebook = build.single(build.leaf("x", "in", ["a"]))
    compiled = get_evaluator(rulebook, sha256_hex(rulebook))
    rulebook["rules"][0]["condition"]["value"].append("b")
    rulebook["rules"][0]["rule_id"] = "changed"
    assert compiled.evaluate({"x": "b"}).matched is False
    assert compiled.evaluate({"x": "a"}).matched_rule_id == "r_one"


def test_fast_constructor_builds_equal_evaluations():
    from gate.rulebook.compile import _MAKE_EVALUATION

    args = ("ok", "yes", "APPROVE", "go", "OK_CODE", "r_one", True, ({"x": 1},), (), ())
    made = _MAKE_EVALUATION(*args)
    assert made == Evaluation(*args) and hash(made.status) == hash("ok")
    assert repr(made) == repr(Evaluation(*args))
    with pytest.raises(AttributeError):
        made.status = "changed"


# --------------------------------------------------------------------------- code generation safety


HOSTILE = "x'); __import__('os').system('echo pwned'); ('"


def test_generated_source_contains_no_rulebook_strings(build):
    rule = build.rule("r_hostile", {"all": [build.leaf("f_hostile_field", "eq", HOSTILE), build.leaf("g", "in", [HOSTILE, 1.25])]},
                      verdict="HOSTILE_VERDICT", action=HOSTILE, reason_code="HOSTILE_REASON")
    rulebook = build.rulebook([rule], rulebook_id="hostile_book")
    compiled = get_evaluator(rulebook, sha256_hex(rulebook))
    for text in (HOSTILE, "f_hostile_field", "r_hostile", "HOSTILE_VERDICT", "HOSTILE_REASON", "1.25", "hostile_book"):
        assert text not in compiled.source
    evaluation = compiled.evaluate({"f_hostile_field": HOSTILE, "g": 1.25})
    assert evaluation.matched and evaluation.action == HOSTILE


# --------------------------------------------------------------------------- cache


def test_same_hash_returns_same_object(build):
    rulebook = build.single(build.leaf("x", "exists"))
    digest = sha256_hex(rulebook)
    first = get_evaluator(rulebook, digest)
    assert isinstance(first, CompiledRulebook)
    assert get_evaluator(copy.deepcopy(rulebook), digest) is first
    assert (first.rulebook_id, first.version, first.rulebook_hash) == ("test_rulebook", "1.0.0", digest)


def test_different_rulebooks_get_different_evaluators(build):
    one = build.single(build.leaf("x", "exists"))
    two = build.single(build.leaf("y", "exists"))
    assert get_evaluator(one, sha256_hex(one)) is not get_evaluator(two, sha256_hex(two))


def test_invalid_rulebook_raises_with_all_errors(build):
    rulebook = build.single({"function": "return 1"})
    rulebook["schema_version"] = "rulebook_v0"
    with pytest.raises(RulebookInvalid) as caught:
        get_evaluator(rulebook, sha256_hex(rulebook))
    assert caught.value.code == "RULEBOOK_INVALID"
    assert [(e["field"], e["code"]) for e in caught.value.details["errors"]] == [
        ("rulebook.schema_version", "unsupported_version"),
        ("rulebook.rules[0].condition.function", "unknown_field"),
        ("rulebook.rules[0].condition", "invalid_condition"),
    ]


def test_hash_must_match_the_rulebook(build):
    rulebook = build.single(build.leaf("x", "exists"))
    with pytest.raises(ValueError):
        get_evaluator(rulebook, "0" * 64)


def test_cache_is_bounded_lru(build):
    clear_cache()
    books = [build.single(build.leaf(f"f{i}", "exists")) for i in range(CACHE_SIZE + 1)]
    first = get_evaluator(books[0], sha256_hex(books[0]))
    for book in books[1:CACHE_SIZE]:
        get_evaluator(book, sha256_hex(book))
    assert get_evaluator(books[0], sha256_hex(books[0])) is first  # refreshed: now most recent
    get_evaluator(books[CACHE_SIZE], sha256_hex(books[CACHE_SIZE]))  # evicts books[1]
    assert get_evaluator(books[0], sha256_hex(books[0])) is first
    from gate.rulebook import cache

    assert len(cache._cache) == CACHE_SIZE
    assert sha256_hex(books[1]) not in cache._cache
    clear_cache()


def test_concurrent_get_evaluator_returns_one_object(build):
    rulebook = build.single(build.leaf("concurrent", "exists"))
    digest = sha256_hex(rulebook)
    clear_cache()
    results, barrier = [], threading.Barrier(8)

    def worker():
        barrier.wait()
        compiled = get_evaluator(rulebook, digest)
        results.append((compiled, compiled.evaluate({"concurrent": 1}).matched))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(c) for c, _ in results}) == 1 and all(m for _, m in results)


@pytest.mark.parametrize("wrap", [lambda leaf: leaf, lambda leaf: {"not": leaf}, lambda leaf: {"any": [leaf]}])
def test_the_compiler_refuses_an_operator_it_does_not_know(build, wrap):
    # Issue 12 gap 7: validation keeps unknown operators out, but if one ever reached the
    # compiler it must fail loudly; a silently false leaf would make `not(leaf)` true.
    from gate.rulebook.compile import compile_rulebook, generate

    rulebook = build.single(wrap({"field": "f", "operator": "regex", "value": ".*"}))
    with pytest.raises(ValueError, match="unsupported operator 'regex'"):
        generate(rulebook)
    with pytest.raises(ValueError, match="unsupported operator"):
        compile_rulebook(rulebook, "0" * 64)
