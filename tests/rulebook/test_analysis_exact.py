"""The semantic diff's witness check and its report, to the exact value (issue 22, item 5: a
mutation pass found the witness check unpinned).

Every exact difference is confirmed by running its witness through both scalar evaluators; a
witness that does not give the reported old -> new labels is a bug in the analysis and raises
instead of being reported.
"""

from __future__ import annotations

import pytest
from rulebook_support import Build

from gate.rulebook.analysis import diff, semantic_diff
from gate.rulebook.analysis.common import Region, evaluator, label_of, region
from gate.rulebook.analysis.sampling import samples
from gate.rulebook.analysis.space import Space

leaf, rule = Build.leaf, Build.rule
BLOCK = {"decision": "no", "verdict": "BLOCK", "action": "block", "reason_code": "TOO_DEEP"}


def pricing(threshold):
    return Build.rulebook([rule("block", leaf("discount", "gt", threshold), priority=100, **BLOCK)],
                          input_schema={"required": ["discount"], "properties": {"discount": {"type": "number"}}},
                          version=str(threshold))


def _with_witness(monkeypatch, witness_of):
    real = diff.region

    def moved(space, cube):
        found = real(space, cube)
        return None if found is None else Region(found.space, found.cube, witness_of(found.witness))
    monkeypatch.setattr(diff, "region", moved)


@pytest.mark.parametrize("witness", [
    {"discount": 10},    # same result under both: old and new both allow it
    {"discount": 99},    # blocked by both
    {},                  # needs input under both
])
def test_a_witness_outside_its_region_raises_instead_of_being_reported(monkeypatch, witness):
    _with_witness(monkeypatch, lambda _found: dict(witness))
    with pytest.raises(AssertionError, match="diff witness"):
        semantic_diff(pricing(25), pricing(30))


@pytest.mark.parametrize("witness", [
    {"discount": 31},    # the old side agrees (blocked), the new side does not (blocked too)
    {"discount": 5},     # the new side agrees (allowed), the old side does not (allowed too)
])
def test_a_witness_that_agrees_on_one_side_only_raises(monkeypatch, witness):
    _with_witness(monkeypatch, lambda _found: dict(witness))
    with pytest.raises(AssertionError, match="diff witness"):
        semantic_diff(pricing(25), pricing(30))


def test_the_check_passes_an_other_witness_inside_the_region(monkeypatch):
    _with_witness(monkeypatch, lambda _found: {"discount": 30})
    (difference,) = semantic_diff(pricing(25), pricing(30)).differences
    assert difference.witness == {"discount": 30}


def test_each_reported_witness_gives_the_reported_labels():
    old, new = pricing(25), pricing(30)
    report = semantic_diff(old, new)
    assert report.exact and len(report.differences) == 1
    (difference,) = report.differences
    assert label_of(evaluator(old), difference.witness) == difference.old
    assert label_of(evaluator(new), difference.witness) == difference.new
    assert (difference.old.rule_id, difference.new.rule_id) == ("block", None)
    assert report.region_of(difference.witness) is difference
    assert report.region_of({"discount": 25}) is None and report.region_of({"discount": 31}) is None
    assert difference.to_json()["witness"] == difference.witness and "samples" not in difference.to_json()


def test_report_verdicts_and_json():
    same = semantic_diff(pricing(25), pricing(25))
    assert (same.verdict, same.equivalent, same.exact, same.samples) == ("equivalent", True, True, None)
    body = same.to_json()
    assert (body["kind"], body["method"], body["difference_count"], body["differences"]) == \
        ("rulebook_semantic_diff", "exact", 0, [])
    assert body["old"] == {"rulebook_id": same.old_ref["rulebook_id"], "version": "25"}
    assert body["compare"] == "outcome"
    sampled = semantic_diff(pricing(25), pricing(30), budget=3, sample_count=400)
    assert (sampled.exact, sampled.equivalent, sampled.verdict) == (False, False, "different")
    assert sampled.samples == 400 and sampled.to_json()["method"] == "sampling"
    (difference,) = sampled.differences
    assert difference.region is None and not difference.contains(difference.witness)
    assert 25 < difference.witness["discount"] <= 30
    shown = difference.to_json()
    assert (shown["where"], shown["text"], shown["samples"]) == (None, None, difference.count)
    assert difference.count >= 1
    nothing = semantic_diff(pricing(25), pricing(25), budget=3, sample_count=50)
    assert (nothing.verdict, nothing.equivalent, nothing.samples) == ("no_difference_found", False, 50)


def _sampled_by_hand(old, new, count):
    """The sampled comparison done by hand: (old label, new label) -> how many samples."""
    tally: dict = {}
    for facts in samples(Space([old, new]), count):
        pair = (label_of(evaluator(old), facts), label_of(evaluator(new), facts))
        if pair[0].outcome_key() != pair[1].outcome_key():
            tally[pair] = tally.get(pair, 0) + 1
    return tally


def test_sampled_differences_are_counted_per_pair_of_results():
    old = pricing(25)
    new = Build.rulebook([rule("block", leaf("discount", "gt", 30), priority=100, **BLOCK),
                          rule("small", leaf("discount", "lte", 10), priority=5)],
                         input_schema=old["input_schema"], version="new")
    report = semantic_diff(old, new, budget=3, sample_count=300)
    assert report.samples == 300 and not report.exact
    assert report.inexact[-1]["field"] is None and report.inexact[-1]["operators"] == []
    assert set(report.inexact[-1]) == {"field", "operators", "reason"}
    expected = _sampled_by_hand(old, new, 300)
    assert len(expected) == 2 and all(n > 1 for n in expected.values())
    assert {(d.old, d.new): d.count for d in report.differences} == expected
    for difference in report.differences:
        shown = difference.to_json()
        assert set(shown) == {"old", "new", "where", "text", "witness", "samples"}
        assert (shown["old"], shown["new"]) == (difference.old.to_json(), difference.new.to_json())
        assert shown["witness"] == difference.witness and shown["samples"] == difference.count
    body = report.to_json()
    assert body["new"] == {"rulebook_id": new["rulebook_id"], "version": "new"}
    assert body["old"] == {"rulebook_id": old["rulebook_id"], "version": "25"}
    assert body["difference_count"] == 2


def test_exact_difference_json_names_old_new_and_witness():
    (difference,) = semantic_diff(pricing(25), pricing(30)).differences
    shown = difference.to_json()
    assert set(shown) == {"old", "new", "where", "text", "witness"}
    assert shown["old"]["rule_id"] == "block" and shown["new"]["rule_id"] is None


@pytest.mark.parametrize("value", [["a", "b"], {"k": 1}])
def test_a_witness_is_the_callers_own_copy(value):
    """Witnesses of array and object values are copies: changing one (or its JSON) changes
    neither the analysis' own values nor the next witness of the same region."""
    old = Build.rulebook([rule("r1", leaf("tags", "eq", value), **BLOCK)])
    new = Build.rulebook([rule("r1", leaf("tags", "eq", "never"), **BLOCK)], version="2")
    found = next(d for d in semantic_diff(old, new).differences if d.old.rule_id == "r1").region
    first = region(found.space, found.cube)
    first.witness["tags"].clear()
    assert region(found.space, found.cube).witness == {"tags": value}
    shown = found.to_json()
    shown["witness"]["tags"].clear()
    assert found.witness == {"tags": value} and found.to_json()["witness"] == {"tags": value}


def test_label_json_members():
    (difference,) = semantic_diff(pricing(25), pricing(30)).differences
    assert difference.old.to_json() == {"status": "ok", "rule_id": "block", "decision": "no", "verdict": "BLOCK",
                                        "action": "block", "reason_code": "TOO_DEEP"}
    assert set(difference.new.to_json()) == {"status", "rule_id", "decision", "verdict", "action", "reason_code"}
