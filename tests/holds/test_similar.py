"""The closed holds most like an open one (gate.holds.similar, HoldService.similar): same scope,
policy and rule, nearest by the numeric facts, at most five of the newest 2,000, each with how it
closed; over a real ledger written through the decide service."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from gate.holds.similar import distance, nearest, numeric_facts, spreads
from gate.ledger.tables import holds as holds_table
from gate.principals import Principal
from tests.workbench.ledger_support import LedgerWriter, at

REVIEWER = Principal.person("password-file", "rita", "Rita Reviewer")
RESOLVE = frozenset({"read", "resolve"})


def test_numeric_facts_are_finite_top_level_numbers_only():
    facts = {"margin": 12, "ratio": 0.5, "owner": True, "tier": "annual", "nested": {"a": 1}, "nan": float("nan"),
             "inf": float("inf")}
    assert numeric_facts(facts) == {"margin": 12.0, "ratio": 0.5}
    assert numeric_facts(["margin", 12]) == {} and numeric_facts(None) == {}


def test_distance_is_the_mean_gap_over_each_facts_spread_and_a_missing_fact_counts_one():
    target = {"margin": 10.0, "discount": 20.0}
    others = [{"margin": 10.0, "discount": 20.0}, {"margin": 20.0, "discount": 20.0}, {"margin": 15.0}]
    spread = spreads(target, others)
    assert spread == {"margin": 10.0, "discount": 0.0}
    assert [distance(target, other, spread) for other in others] == [0.0, 0.5, 0.75]
    assert distance({}, {"margin": 3.0}, {}) == 0.0  # nothing to compare: all alike
    assert distance({"x": 1.0}, {"x": 2.0}, {"x": 0.0}) == 1.0  # a zero spread with a gap cannot happen but is far


def test_nearest_keeps_the_limit_nearest_first_and_ties_go_to_the_newer():
    candidates = [{"m": 14}, {"m": 11}, {"m": 19}, {"m": 11, "tier": "x"}, {"tier": "only"}, {"m": 30}]
    picked = nearest({"m": 11, "tier": "annual"}, candidates, limit=3)
    assert [index for index, _ in picked] == [1, 3, 0]  # 1 and 3 tie at 0: the newer (earlier) first
    assert [round(score, 3) for _, score in picked] == [0.0, 0.0, round(3 / 19, 3)]
    assert nearest({"m": 1}, candidates, limit=0) == [] and len(nearest({"m": 1}, candidates, limit=99)) == 6
    assert [index for index, _ in nearest({}, candidates, limit=2)] == [0, 1]  # no numbers: the newest


@pytest.fixture
def written(tmp_path):
    from gate.services.root import hold_service

    writer = LedgerWriter(f"sqlite:///{tmp_path / 'gate.db'}", tmp_path / "signing-keys.json")
    service = hold_service(writer.ledger, writer.service.signing, writer.clock)
    yield writer, service
    writer.close()


def _held(writer, day: int, margin: float, discount: float = 15, scope: str = "acme", rulebook_id=None) -> str:
    record = writer.decide(scope, at(1, day), discount=discount, margin=margin, rulebook_id=rulebook_id)
    assert record["verdict"] == "review"
    return record["decision_id"]


def test_the_nearest_closed_holds_of_the_same_policy_and_rule_with_how_they_closed(written):
    writer, service = written
    closed = {}
    for day, margin in enumerate((10, 12, 14, 16, 18, 19, 11), start=1):  # each resolved before its deadline
        closed[margin] = _held(writer, day, margin)
        body = {"decision": "deny" if margin < 13 else "approve", "reason_code": f"M{margin}",
                "note": f"<b>margin {margin}</b>"}
        service.resolve("acme", REVIEWER, RESOLVE, closed[margin], body)
    other_policy = _held(writer, 8, 13, rulebook_id="pricing_other")
    service.resolve("acme", REVIEWER, RESOLVE, other_policy, {"decision": "approve", "reason_code": "OTHER"})
    other_scope = _held(writer, 9, 13, scope="globex")
    service.resolve("globex", REVIEWER, RESOLVE, other_scope, {"decision": "approve", "reason_code": "OTHER"})
    still_open = _held(writer, 10, 17)
    target = _held(writer, 11, 13)

    similar = service.similar("acme", target)
    # margin 14 and 12 are one point away (14 is the newer), then 11, then 16 and 10 (16 the newer)
    assert [hold["decision_id"] for hold in similar] == [closed[m] for m in (14, 12, 11, 16, 10)]
    assert all(hold["policy_id"] == "pricing_exception" and hold["rule_id"] == "review_thin_margin"
               and hold["state"] in ("approved", "denied") for hold in similar)
    assert target not in {h["decision_id"] for h in similar} and still_open not in {h["decision_id"] for h in similar}
    first = similar[0]
    assert first["state"] == "approved" and first["distance"] == pytest.approx(1 / 9 / 2)  # margin 1 of 9; discount 0
    assert first["resolution"]["vote"] == "approve" and first["resolution"]["reason_code"] == "M14"
    assert first["resolution"]["note"] == "<b>margin 14</b>" and first["resolution"]["actor"] == REVIEWER.actor
    assert [h["state"] for h in similar] == ["approved", "denied", "denied", "approved", "denied"]

    # Bounded: only the newest `window` closed holds are candidates (the newest here is margin 11's).
    assert [h["decision_id"] for h in service.similar("acme", target, window=2)] == [closed[11], closed[19]]
    # Another rule of the same policy is not like it.
    with writer.ledger.write() as connection:
        connection.execute(update(holds_table).where(holds_table.c.decision_id == closed[12])
                           .values(rule_id="another_rule"))
    assert closed[12] not in {h["decision_id"] for h in service.similar("acme", target)}


def test_a_hold_with_nothing_closed_before_it_has_no_neighbours_and_other_scopes_see_none(written):
    writer, service = written
    target = _held(writer, 1, 13)
    assert service.similar("acme", target) == []
    from gate.errors import GateError

    with pytest.raises(GateError) as refused:
        service.similar("globex", target)
    assert refused.value.code == "HOLD_NOT_FOUND"
