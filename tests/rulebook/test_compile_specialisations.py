"""The compiler's fast paths: each specialised test agrees with the reference semantics and is
the one the module documents; the fast Evaluation constructor builds the same value."""

from __future__ import annotations

import dataclasses

import pytest

from gate.rulebook import compile as compiler
from gate.rulebook.compile import compile_rulebook
from gate.rulebook.evaluation import Evaluation
from gate.rulebook.semantics import strict_equal

from rulebook_support import Build

FACTS = ["a", "", None, True, False, 0, 1, 1.0, 2, -0.0, [1], {"k": 1}, "True", "1"]


@pytest.mark.parametrize(("value", "fragment"), [
    ("a", " == _k"), (None, " is None"), (True, " is True"), (False, " is False"),
    (1, "_type(x) is not _bool"), (1.5, "_type(x) is not _bool"), ([1], "_deq("), ({"k": 1}, "_deq("),
])
def test_eq_is_specialised_by_the_type_of_its_constant_and_agrees_with_strict_equality(value, fragment):
    compiled = compile_rulebook(Build.single(Build.leaf("f", "eq", value)), "0" * 64)
    assert fragment in compiled.source
    for fact in FACTS:
        assert compiled.evaluate({"f": fact}).matched is strict_equal(fact, value), (value, fact)
    assert compiled.evaluate({}).matched is False


def test_the_fast_evaluation_constructor_builds_the_dataclass_value():
    make = compiler._evaluation_factory()
    assert make is not Evaluation  # Evaluation is slotted without __post_init__: the fast path is used
    values = ("ok", "yes", "APPROVE", "go", "RULE_MATCHED", "r1", True, ({"passed": True},), ("a",), ("b",))
    assert len(values) == len(dataclasses.fields(Evaluation))
    built = make(*values)
    assert type(built) is Evaluation
    assert built == Evaluation(*values)
    assert [getattr(built, f.name) for f in dataclasses.fields(Evaluation)] == list(values)


def test_generated_code_runs_without_builtins_and_keeps_the_rulebook_identity():
    rulebook = Build.single(Build.leaf("f", "eq", "a"))
    compiled = compile_rulebook(rulebook, "ab" * 32)
    assert compiled.evaluate.__globals__["__builtins__"] == {}
    assert (compiled.rulebook_id, compiled.version, compiled.rulebook_hash) == ("test_rulebook", "1.0.0", "ab" * 32)
    assert compiled.source.startswith("def _factory(")


def test_a_later_change_to_the_callers_rulebook_changes_nothing():
    rulebook = Build.single(Build.leaf("f", "eq", {"k": [1]}))
    compiled = compile_rulebook(rulebook, "0" * 64)
    rulebook["rules"][0]["condition"]["value"]["k"].append(2)
    rulebook["rules"][0]["outcome"]["verdict"] = "CHANGED"
    evaluation = compiled.evaluate({"f": {"k": [1]}})
    assert (evaluation.matched, evaluation.application_verdict) == (True, "APPROVE")
