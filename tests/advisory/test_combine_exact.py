"""The advisory panel's combining rules at their exact boundaries (issue 22, item 5: a mutation
pass found them unpinned).

`unanimous_yes_majority_no_v1`: yes only when every advisor answered yes; otherwise no when more
than half of ALL advisors (failed ones included) answered no; otherwise review. A failed advisor
is tallied as failed, never as its stated decision. `single_advisor_v1`: the one vote, review
when it failed; anything but one vote is a programming error.
"""

from __future__ import annotations

import pytest

from gate.advisory.advisors import MULTI_RULE, SINGLE_RULE, Vote, combine


def _vote(decision: str, status: str = "ok", error: str | None = None) -> Vote:
    return Vote("a", "test", status, decision, "why", ("CODE",), error=error)


def _votes(spec: str) -> list[Vote]:
    """y, n, r: ok votes; f: a failed advisor (whose stated decision is no, to catch miscounting)."""
    return [_vote("no", "failed", "UPSTREAM") if c == "f" else _vote({"y": "yes", "n": "no", "r": "review"}[c])
            for c in spec]


@pytest.mark.parametrize(("spec", "decision", "tally"), [
    ("yyy", "yes", (3, 0, 0, 0)),
    ("y", "yes", (1, 0, 0, 0)),
    ("yyr", "review", (2, 0, 1, 0)),
    ("yyf", "review", (2, 0, 0, 1)),     # a failed advisor breaks unanimity
    ("nnyy", "review", (2, 2, 0, 0)),    # exactly half is not more than half
    ("nnny", "no", (1, 3, 0, 0)),
    ("nny", "no", (1, 2, 0, 0)),
    ("nf", "review", (0, 1, 0, 1)),      # half of all advisors, failed ones count in the total
    ("nnf", "no", (0, 2, 0, 1)),
    ("ff", "review", (0, 0, 0, 2)),      # failed votes are never counted as their stated no
    ("n", "no", (0, 1, 0, 0)),
    ("r", "review", (0, 0, 1, 0)),
    ("", "review", (0, 0, 0, 0)),        # no votes: never a unanimous yes
])
def test_multi_rule_boundaries(spec, decision, tally):
    combined = combine(MULTI_RULE, _votes(spec))
    assert combined.rule == MULTI_RULE
    assert combined.decision == decision
    assert combined.tally == dict(zip(("yes", "no", "review", "failed"), tally, strict=True))


@pytest.mark.parametrize(("spec", "decision", "tally"), [
    ("y", "yes", (1, 0, 0, 0)),
    ("n", "no", (0, 1, 0, 0)),
    ("r", "review", (0, 0, 1, 0)),
    ("f", "review", (0, 0, 0, 1)),
])
def test_single_rule_is_the_one_vote_or_review_when_it_failed(spec, decision, tally):
    combined = combine(SINGLE_RULE, _votes(spec))
    assert (combined.rule, combined.decision) == (SINGLE_RULE, decision)
    assert combined.tally == dict(zip(("yes", "no", "review", "failed"), tally, strict=True))


@pytest.mark.parametrize("spec", ["", "yy", "yf"])
def test_single_rule_refuses_anything_but_one_vote(spec):
    with pytest.raises(ValueError, match="exactly one vote"):
        combine(SINGLE_RULE, _votes(spec))


@pytest.mark.parametrize("rule", ["", "majority", MULTI_RULE.upper(), SINGLE_RULE + " "])
def test_unknown_rule_is_refused(rule):
    with pytest.raises(ValueError, match="unknown combining rule"):
        combine(rule, _votes("y"))


def test_vote_record_carries_the_error_only_when_there_is_one():
    ok = Vote("adv", "kind", "ok", "yes", "fine", ("E1", "E2"), details={"extra": 1})
    assert ok.to_record() == {"advisor_id": "adv", "kind": "kind", "status": "ok", "decision": "yes",
                              "rationale": "fine", "evidence": ["E1", "E2"], "extra": 1}
    failed = _vote("review", "failed", "TIMEOUT").to_record()
    assert failed["error"] == "TIMEOUT" and failed["status"] == "failed" and failed["evidence"] == ["CODE"]
    assert "error" not in _vote("review", "failed", "").to_record()
