"""The typed Rulebook v1 document (`gate.rulebook.shapes`) and its type guard (`checked_rulebook`):
the TypedDicts name exactly the contract's members, and the guard is the validator itself (same
object back when valid, the validator's own errors when not)."""

from __future__ import annotations

import copy

import pytest

from gate.errors import RulebookInvalid
from gate.protocol.canonical import sha256_hex
from gate.rulebook import checked_rulebook, get_evaluator, validate_rulebook
from gate.rulebook.cache import clear_cache
from gate.rulebook.contract import (
    CONDITION_MEMBERS,
    INPUT_PROPERTY_MEMBERS,
    INPUT_SCHEMA_MEMBERS,
    OUTCOME_MEMBERS,
    RULE_MEMBERS,
    RULE_REQUIRED,
    RULEBOOK_MEMBERS,
    RULEBOOK_REQUIRED,
)
from gate.rulebook.shapes import Condition, InputProperty, InputSchema, Outcome, Rule, RulebookDocument
from gate.vocabulary import VERDICTS


@pytest.mark.parametrize(("shape", "members", "required"), [
    (RulebookDocument, RULEBOOK_MEMBERS, RULEBOOK_REQUIRED),
    (Rule, RULE_MEMBERS, RULE_REQUIRED),
    (Outcome, OUTCOME_MEMBERS, OUTCOME_MEMBERS),
    (Condition, CONDITION_MEMBERS, ()),
    (InputSchema, INPUT_SCHEMA_MEMBERS, ()),
    (InputProperty, INPUT_PROPERTY_MEMBERS, INPUT_PROPERTY_MEMBERS),
])
def test_each_typed_shape_names_exactly_the_contract_members(shape, members, required):
    assert set(shape.__annotations__) == set(members)
    assert shape.__required_keys__ == frozenset(required)
    assert shape.__optional_keys__ == frozenset(members) - frozenset(required)


def test_an_outcome_decision_is_typed_as_the_verdict_vocabulary():
    assert set(Outcome.__annotations__["decision"].__args__) == set(VERDICTS)


def _invalid(build):
    book = build.single(build.leaf("amount", "gte", 10))
    book["rules"][0]["condition"]["operator"] = "between"  # unsupported operator
    del book["version"]  # missing member
    book["script"] = "x"  # executable-looking key
    return book


def test_checked_rulebook_returns_the_very_object_it_was_given(build):
    book = build.single(build.leaf("amount", "gte", 10))
    before = copy.deepcopy(book)
    assert checked_rulebook(book) is book
    assert book == before


def test_checked_rulebook_raises_the_validators_own_errors(build):
    book = _invalid(build)
    expected = validate_rulebook(book)
    assert len(expected) == 3
    with pytest.raises(RulebookInvalid) as raised:
        checked_rulebook(book)
    assert raised.value.code == "RULEBOOK_INVALID"
    assert raised.value.errors == expected
    assert raised.value.details["errors"] == expected
    assert str(raised.value) == f"Rulebook v1 validation failed: {expected[0]['message']}"


def test_checked_rulebook_keeps_the_callers_base_path(build):
    book = _invalid(build)
    with pytest.raises(RulebookInvalid) as raised:
        checked_rulebook(book, base_path="draft")
    assert raised.value.errors == validate_rulebook(book, base_path="draft")
    assert all(error["field"].startswith("draft") for error in raised.value.errors)


@pytest.mark.parametrize("value", [None, [], "rulebook", 7, {"schema_version": "rulebook_v1"}])
def test_checked_rulebook_refuses_what_is_not_a_rulebook(value):
    with pytest.raises(RulebookInvalid) as raised:
        checked_rulebook(value)
    assert raised.value.errors == validate_rulebook(value)


def test_get_evaluator_refuses_an_invalid_rulebook_with_the_same_errors(build):
    book = _invalid(build)
    with pytest.raises(RulebookInvalid) as raised:
        get_evaluator(book, sha256_hex(book))
    assert raised.value.errors == validate_rulebook(book)


def test_a_compiled_rulebook_holds_its_document_as_a_private_copy(build):
    clear_cache()
    book = build.single(build.leaf("amount", "gte", 10))
    compiled = get_evaluator(book, sha256_hex(book))
    assert compiled.document == book
    assert compiled.document is not book
    book["rules"][0]["condition"]["value"] = 99  # the caller's later edit reaches neither
    assert compiled.document["rules"][0]["condition"]["value"] == 10
    assert (compiled.rulebook_id, compiled.version) == (book["rulebook_id"], book["version"])
