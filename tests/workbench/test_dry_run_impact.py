"""`dry_run.impact` on a hand-checked history (issue 21, item 1): failures caught, successes lost
(blocked or sent to review), unobservable new approvals, immature flips (open, unreported or younger
than the horizon), the review load change and the expected net effect, each with its interval.

Twelve decisions of `refunds`, three days apart from T0 (the last on T0 + 33 days). The stored
rulebook approves amounts up to 100 and blocks above; the draft blocks above 50, approves up to 20
and sends the rest to review:

    #  amount  old  draft   outcome (latest)          class
    0  10      yes  yes     succeeded                 (no flip)
    1  30      yes  review  failed                    caught (to review)
    2  60      yes  no      failed                    caught (blocked)
    3  70      yes  no      succeeded                 lost (blocked)
    4  40      yes  review  succeeded                 lost (to review)
    5  45      yes  review  (none reported)           immature
    6  80      yes  no      open (pending)            immature
    7  150     no   no      -                         (no flip)
    8  25      yes  review  failed, but 9 days old    immature (young: horizon 10 days)
    9  35      yes  review  succeeded, 6 days old     immature (young)
   10  15      yes  yes     -                         (no flip)
   11  5       yes  yes     failed                    (no flip)

Plus one decision blocked in history that the draft approves (`no` -> `yes`) is impossible here (the
draft blocks a superset); a second history below checks that figure.
"""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from dryrun_support import T0, decide, rule, rulebook, write_dataset

from workbench.migration import dry_run
from workbench.migration.impact import CostModel, wilson

NOW = "2026-11-24T00:00:00.000Z"
OLD = rulebook([rule("big", {"field": "amount", "operator": "gt", "value": 100}, "no", "TOO_BIG"),
                rule("fine", {"field": "amount", "operator": "lte", "value": 100}, "yes", "FINE")])
DRAFT = rulebook([rule("big", {"field": "amount", "operator": "gt", "value": 50}, "no", "TOO_BIG"),
                  rule("small", {"field": "amount", "operator": "lte", "value": 20}, "yes", "SMALL")],
                 version="2.0.0")
AMOUNTS = [10, 30, 60, 70, 40, 45, 80, 150, 25, 35, 15, 5]
OUTCOMES = [(0, "succeeded"), (1, "failed"), (2, "failed"), (3, "succeeded"), (4, "succeeded"), (6, "pending"),
            (8, "failed"), (9, "succeeded"), (11, "failed")]
COST = CostModel(failure=100.0, review=2.0, lost_success=10.0, outcome_horizon_days=10)


def _history(tmp_path, amounts, outcomes):
    decisions = decide(OLD, [{"amount": a} for a in amounts])
    rows = [{"decision_id": f"d{index:05d}", "status": status, "receipt_id": f"o{index}",
             "reported_at": decisions[index]["created_at"] + timedelta(hours=1)} for index, status in outcomes]
    return write_dataset(tmp_path / "ds", decisions, rows)


def test_each_impact_figure_by_hand(tmp_path):
    root = _history(tmp_path, AMOUNTS, OUTCOMES)
    impact = dry_run(DRAFT, "refunds", scope="acme", dataset=root, created_at=NOW, cost=COST).result["impact"]
    n = 12
    assert impact["decisions_replayed"] == n
    assert impact["as_of"] == (T0 + timedelta(days=33)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    assert impact["failures_caught"] == {"count": 2, "rate": round(2 / n, 6), "interval_95": wilson(2, n)}
    assert impact["successes_lost"]["count"] == 2
    assert (impact["successes_lost"]["blocked"], impact["successes_lost"]["to_review"]) == (1, 1)
    assert impact["immature"]["count"] == 4  # 5 (none), 6 (open), 8 and 9 (younger than 10 days)
    assert impact["new_approvals_unobservable"]["count"] == 0
    # Into review: 1, 4, 5, 8, 9 (5 decisions); out of review: none.
    review = impact["review_load_change"]
    assert (review["count"], review["into_review"], review["out_of_review"]) == (5, 5, 0)
    rate = 5 / n
    half = 1.959964 * math.sqrt((5 / n - rate * rate) / n)
    assert review["interval_95"] == [round(rate - half, 6), round(rate + half, 6)]
    # Net effect per decision: (100*2 - 10*2 - 2*5) / 12, multinomial standard error.
    net = impact["expected_net_effect"]
    mean = (100 * 2 - 10 * 2 - 2 * 5) / n
    second = (100 ** 2 * 2 + 10 ** 2 * 2 + 2 ** 2 * 5) / n
    half = 1.959964 * math.sqrt((second - mean * mean) / n)
    assert net["per_decision"] == round(mean, 6) and net["total"] == round(mean * n, 6)
    assert net["interval_95"] == [round(mean - half, 6), round(mean + half, 6)]
    assert impact["cost_model"] == COST.to_dict()


def test_young_decisions_are_never_counted_as_successes_or_failures(tmp_path):
    root = _history(tmp_path, AMOUNTS, OUTCOMES)
    wide = CostModel(outcome_horizon_days=365)  # every flip is younger than a year before the newest decision
    impact = dry_run(DRAFT, "refunds", scope="acme", dataset=root, created_at=NOW, cost=wide).result["impact"]
    assert impact["failures_caught"]["count"] == 0 and impact["successes_lost"]["count"] == 0
    assert impact["immature"]["count"] == 8
    none = CostModel(outcome_horizon_days=0)  # only open or unreported flips are immature
    impact = dry_run(DRAFT, "refunds", scope="acme", dataset=root, created_at=NOW, cost=none).result["impact"]
    assert impact["failures_caught"]["count"] == 3 and impact["successes_lost"]["count"] == 3
    assert impact["immature"]["count"] == 2


def test_blocked_decisions_the_draft_approves_are_unobservable(tmp_path):
    root = _history(tmp_path, [150, 200, 10], [(2, "succeeded")])
    lenient = rulebook([rule("any", {"field": "amount", "operator": "gte", "value": 0}, "yes", "ANY")],
                       version="3.0.0")
    impact = dry_run(lenient, "refunds", scope="acme", dataset=root, created_at=NOW).result["impact"]
    assert impact["new_approvals_unobservable"] == {"count": 2, "rate": round(2 / 3, 6), "interval_95": wilson(2, 3)}
    assert impact["failures_caught"]["count"] == 0


@pytest.mark.parametrize("body", [{"failure": -1}, {"review": float("nan")}, {"outcome_horizon_days": 1.5},
                                  {"lost_success": True}, {"unknown": 1}])
def test_a_bad_cost_model_is_refused(body):
    with pytest.raises(ValueError, match="cost model"):
        CostModel.from_dict(body)


def test_wilson_interval_by_hand():
    low, high = wilson(2, 12)
    p, z = 2 / 12, 1.959964
    centre = (p + z * z / 24) / (1 + z * z / 12)
    margin = z * math.sqrt(p * (1 - p) / 12 + z * z / (4 * 144)) / (1 + z * z / 12)
    assert (low, high) == (round(centre - margin, 6), round(centre + margin, 6))
    assert wilson(0, 0) is None and wilson(0, 5)[0] == 0.0
