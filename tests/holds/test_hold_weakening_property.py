"""What weakens the hold policy, as a property (issue 64, docs/holds.md, "Changing the hold policy").

A model of what a policy lets through, written apart from `gate.holds.policy`: a held record of a
class (its policy and rule) reaches the queue its first matching route (or the default queue) names
and the queues its escalations move it to; a hold already in a queue reaches that queue's
escalations. Each queue approves a set of distinct holders, with or without a note, when its quorum
says so; its channels tell a set of recipients. A change that lets any held record be approved by
fewer or other holders (some voters and note the policy before never took, through any queue the
record reaches), or reach a recipient it did not reach, must be named by `weakenings`; a change
that only strengthens queues (more approvals, more members, a note required, fewer channels) never is.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gate.holds.policy import HoldPolicy, weakenings

NAMES = ("default", "q1", "q2", "q3")
PEOPLE = ("a", "b", "c", "d")
HOLDERS = (*PEOPLE, "x")  # x: a holder no queue names
EMAILS = ("one@x.example", "two@x.example")
CLASSES = (("P1", "r1"), ("P1", "r2"), ("P2", "r1"), ("P3", "r1"))  # P3: no route names it
VOTERS = [frozenset(c) for n in range(1, len(HOLDERS) + 1) for c in combinations(HOLDERS, n)]


@st.composite
def queues(draw: Any, index: int) -> dict[str, Any]:
    quorum = draw(st.sampled_from(("any", "two", "all")))
    members = sorted(draw(st.sets(st.sampled_from(PEOPLE), min_size=2, max_size=4))) if quorum == "all" else []
    later = NAMES[index + 1:]
    to = draw(st.none() | st.sampled_from(later)) if later else None
    emails = draw(st.sets(st.sampled_from(EMAILS)))
    out = {"deadline_seconds": 3600, "quorum": quorum, "members": members,
           "require_justification": draw(st.booleans()), "escalate_after_seconds": None if to is None else 600,
           "escalate_to": to}
    if emails:
        out["notify"] = {"email": sorted(emails), "every_seconds": 0}
    return out


@st.composite
def policies(draw: Any) -> dict[str, Any]:
    names = [n for n in NAMES if n == "default" or draw(st.booleans())]
    stated = {n: draw(queues(NAMES.index(n))) for n in names}
    for spec in stated.values():  # an escalation names a queue of this policy
        if spec["escalate_to"] not in stated:
            spec["escalate_to"] = spec["escalate_after_seconds"] = None
    routes = draw(st.lists(st.fixed_dictionaries({
        "policy_id": st.sampled_from(("P1", "P2")), "rule_id": st.sampled_from((None, "r1", "r2")),
        "queue": st.sampled_from(names), "priority": st.just("normal")}), max_size=3))
    return {"default_queue": draw(st.sampled_from(names)), "four_eyes": True, "queues": stated, "routes": routes}


# -- the model ------------------------------------------------------------------------------------

def _approves(spec: dict[str, Any], voters: frozenset[str], noted: bool) -> bool:
    needed = {"any": 1, "two": 2}.get(spec["quorum"], len(spec["members"]))
    return (len(voters) >= needed and (spec["quorum"] != "all" or set(spec["members"]) <= voters)
            and (noted or not spec["require_justification"]))


def _path(body: dict[str, Any], name: str | None) -> list[dict[str, Any]]:
    out = []
    while name is not None and name in body["queues"]:
        out.append(body["queues"][name])
        name = body["queues"][name]["escalate_to"]
    return out


def _entry(body: dict[str, Any], policy_id: str, rule_id: str) -> str:
    return next((r["queue"] for r in body["routes"] if r["policy_id"] == policy_id
                 and r["rule_id"] in (None, rule_id)), body["default_queue"])


def _lets_through(path: list[dict[str, Any]]) -> tuple[set[tuple[frozenset[str], bool]], set[str]]:
    approved = {(v, n) for v in VOTERS for n in (False, True) if any(_approves(q, v, n) for q in path)}
    told = {e for q in path for e in q.get("notify", {}).get("email", [])}
    return approved, told


def _lets_more_through(before: dict[str, Any], after: dict[str, Any]) -> bool:
    paths = [(_path(before, _entry(before, *c)), _path(after, _entry(after, *c))) for c in CLASSES]
    paths += [(_path(before, n), _path(after, n)) for n in before["queues"] if n in after["queues"]]
    for was, now in paths:
        (took, told), (takes, tells) = _lets_through(was), _lets_through(now)
        if takes - took or tells - told:
            return True
    return False


# -- the properties -------------------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(policies(), policies())
def test_a_change_that_lets_any_hold_through_more_is_a_weakening(before, after):
    if _lets_more_through(before, after):
        assert weakenings(HoldPolicy.from_json(before), HoldPolicy.from_json(after)) != ()


@st.composite
def strengthened(draw: Any, before: dict[str, Any]) -> dict[str, Any]:
    """`before` with each queue's guard as strict or stricter and its channels as few or fewer."""
    stated = {}
    for name, was in before["queues"].items():
        spec = dict(was)
        if spec["quorum"] == "any" and draw(st.booleans()):
            spec["quorum"] = "two"
        if spec["quorum"] == "two" and draw(st.booleans()):
            spec["quorum"], spec["members"] = "all", sorted(draw(st.sets(st.sampled_from(PEOPLE), min_size=2)))
        elif spec["quorum"] == "all":
            spec["members"] = sorted(set(spec["members"]) | draw(st.sets(st.sampled_from(PEOPLE))))
        spec["require_justification"] = spec["require_justification"] or draw(st.booleans())
        if "notify" in spec:
            kept = draw(st.sets(st.sampled_from(spec["notify"]["email"])))
            spec.pop("notify")
            if kept:
                spec["notify"] = {"email": sorted(kept), "every_seconds": 0}
        stated[name] = spec
    return {**before, "queues": stated}


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_pure_strengthening_is_not_a_weakening(data):
    before = data.draw(policies())
    after = data.draw(strengthened(before))
    assert not _lets_more_through(before, after)  # the model agrees: nothing more gets through
    assert weakenings(HoldPolicy.from_json(before), HoldPolicy.from_json(after)) == ()


def test_the_three_weakenings_of_issue_64_are_named():
    two = {"deadline_seconds": 3600, "quorum": "two", "members": [], "require_justification": False,
           "escalate_after_seconds": None, "escalate_to": None}
    any_ = {**two, "quorum": "any"}
    ext = {**any_, "notify": {"email": ["ext-desk@partner.example"], "every_seconds": 0}}
    base = {"default_queue": "default", "four_eyes": True, "queues": {"default": any_, "two": two, "ext": ext},
            "routes": [{"policy_id": "P1", "rule_id": None, "queue": "two", "priority": "normal"}]}
    escalating = {**base, "queues": {**base["queues"], "two": {**two, "escalate_after_seconds": 5,
                                                               "escalate_to": "default"}}}
    board = {**two, "quorum": "all", "members": ["person:bob", "person:carol"]}
    to_ext = {**base, "routes": [{**base["routes"][0], "queue": "ext"}]}
    assert weakenings(HoldPolicy.from_json(base), HoldPolicy.from_json(escalating)) == ("queues.two.escalate_to",)
    assert weakenings(HoldPolicy.from_json({**base, "queues": {**base["queues"], "two": board}}),
                      HoldPolicy.from_json(base)) == ("queues.two.members",)
    assert weakenings(HoldPolicy.from_json(base), HoldPolicy.from_json(to_ext)) == ("routes[P1/*]",)
    assert weakenings(HoldPolicy.from_json(base), HoldPolicy.from_json({**base, "default_queue": "ext"})) == (
        "default_queue",)
