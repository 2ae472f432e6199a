"""The compiler's fast paths: each specialised test agrees with the reference semantics and is
the one the module documents; the fast Evaluation constructor builds the same value."""

from __future__ import annotations

import dataclasses

import pytest
from rulebook_support import Build

from gate.protocol.evaluation import Evaluation
from gate.rulebook import compile as compiler
from gate.rulebook.compile import compile_rulebook
from gate.rulebook.semantics import strict_equal

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


@pytest.mark.parametrize(("operator", "value", "fragment"), [
    ("in", ["a", "b"], "_str) and x in _k"),
    ("in", [1, 2.5], "_int or _type(x) is _float) and x in _k"),
    ("in", ["a", 1], "_member("),
    ("in", [], "_member("),
    ("contains", "ab", "in x if _isinstance("),
    ("contains", 1, "_contains("),
])
def test_membership_and_contains_fast_paths_agree_with_the_reference(operator, value, fragment):
    from gate.rulebook.semantics import contains, member

    compiled = compile_rulebook(Build.single(Build.leaf("f", operator, value)), "0" * 64)
    assert fragment in compiled.source
    reference = member if operator == "in" else contains
    for fact in FACTS + ["xaby", ["ab"], [1, 2], 2.5]:
        assert compiled.evaluate({"f": fact}).matched is bool(reference(fact, value)), (value, fact)


def test_repeated_strings_share_one_constant():
    rulebook = Build.single({"all": [Build.leaf("f", "eq", "same"), Build.leaf("g", "eq", "same")]})
    compiled = compile_rulebook(rulebook, "0" * 64)
    assert compiled.source.count("== _k") == 2
    names = {part.split()[0] for part in compiled.source.split("== ")[1:]}
    assert len(names) == 1  # both leaves compare with the same generated name


def test_the_fast_constructor_steps_aside_for_a_class_it_cannot_fill(monkeypatch):
    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        status: str

        def __post_init__(self):
            pass

    @dataclasses.dataclass(frozen=True)
    class Unslotted:
        status: str

    for cls in (Checked, Unslotted):
        monkeypatch.setattr(compiler, "Evaluation", cls)
        assert compiler._evaluation_factory() is cls


def test_repr_names_the_rulebook_and_a_hash_prefix():
    compiled = compile_rulebook(Build.single(Build.leaf("f", "eq", "a")), "0123456789abcdef" * 4)
    assert repr(compiled) == "CompiledRulebook('test_rulebook', '1.0.0', 0123456789ab…)"
