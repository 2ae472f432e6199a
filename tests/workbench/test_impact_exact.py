"""`workbench.migration.impact` to the exact value (issue 22, item 5), straight from a flip tally.

The tally below has one cell of each kind, each a different prime, so every figure is a sum of
known cells and a cell counted in the wrong figure shows: `(old, new, outcome class, young)`.
Cells whose new verdict equals the old (`yes -> yes`) are in the sweep's tallies
(`workbench.migration.sweep._point` passes every replayed decision); no figure counts them.

    failures caught      A + B             = 3 + 5            = 8
    successes lost       D (blocked) + E   = 11 + 13          = 24
    immature             C + F (young) + G (open) + H (none) = 7 + 17 + 19 + 23 = 66
    unobservable         J + K (blocked, now approved)        = 31 + 37 = 68
    counted nowhere      I (excluded), L, M, N, Q, R, S, T (not approved before), O, P, U (still approved)

With 1,000 decisions replayed, 120 into review and 45 out of it, and a failure costing 100, a
review 2 and a lost success 10: review change 75 (rate 0.075, variance (0.165 - 0.075^2) / 1000,
half-width 1.959964 x 0.0126244 = 0.0247434); net effect (100 x 8 - 10 x 24 - 2 x 120 + 2 x 45) / 1000
= 0.41 per decision, second moment (10^4 x 8 + 10^2 x 24 + 4 x 120 + 4 x 45) / 1000 = 83.06, standard
error sqrt((83.06 - 0.41^2) / 1000) = 0.2879095, half-width 0.564292.
"""

from __future__ import annotations

import pytest

from workbench.migration.impact import CostModel, headline, impact, impact_rows, measured, wilson

TALLY = {
    ("yes", "no", "failure", False): 3,         # A
    ("yes", "review", "failure", False): 5,     # B
    ("yes", "no", "failure", True): 7,          # C
    ("yes", "no", "success", False): 11,        # D
    ("yes", "review", "success", False): 13,    # E
    ("yes", "review", "success", True): 17,     # F
    ("yes", "no", "open", False): 19,           # G
    ("yes", "review", "none", False): 23,       # H
    ("yes", "no", "excluded", False): 29,       # I
    ("no", "yes", "unobservable", False): 31,   # J
    ("no", "yes", "none", True): 37,            # K
    ("no", "review", "failure", False): 41,     # L
    ("review", "no", "failure", False): 43,     # M
    ("review", "yes", "success", False): 47,    # N
    ("yes", "yes", "failure", False): 53,       # O
    ("yes", "yes", "open", True): 59,           # P
    ("review", "no", "success", False): 61,     # Q
    ("review", "review", "success", False): 67,  # R
    ("review", "no", "success", True): 71,      # S
    ("review", "review", "open", False): 73,    # T
    ("yes", "yes", "none", False): 79,          # U
}
COST = CostModel(failure=100.0, review=2.0, lost_success=10.0, outcome_horizon_days=7)
AS_OF = "2026-03-01T00:00:00.000Z"
FORMULA = "failure·caught − lost_success·lost − review·(into_review − out_of_review)"
METHOD = "Wilson score (rates); paired multinomial normal (review change, net effect); 95%"


def _impact() -> dict:
    return impact(TALLY, 1000, COST, as_of=AS_OF, review_in=120, review_out=45)


def test_every_figure_of_a_tally():
    assert _impact() == {
        "decisions_replayed": 1000,
        "as_of": AS_OF,
        "cost_model": {"failure": 100.0, "review": 2.0, "lost_success": 10.0, "outcome_horizon_days": 7},
        "failures_caught": {"count": 8, "rate": 0.008, "interval_95": [0.004059, 0.015706]},
        "successes_lost": {"count": 24, "rate": 0.024, "interval_95": [0.01618, 0.035463], "blocked": 11,
                           "to_review": 13},
        "new_approvals_unobservable": {"count": 68, "rate": 0.068, "interval_95": [0.053992, 0.085314]},
        "immature": {"count": 66, "rate": 0.066, "interval_95": [0.052212, 0.083109],
                     "note": ("approvals the draft withdraws whose outcome is open, unreported or younger than "
                              "7 days: neither caught failures nor lost successes yet")},
        "review_load_change": {"count": 75, "rate": 0.075, "interval_95": [0.050257, 0.099743],
                               "into_review": 120, "out_of_review": 45},
        "expected_net_effect": {"per_decision": 0.41, "interval_95": [-0.154292, 0.974292], "total": 410.0,
                                "formula": FORMULA},
        "interval_method": METHOD,
    }
    # The intervals are the one Wilson interval's.
    assert [wilson(8, 1000), wilson(24, 1000), wilson(68, 1000), wilson(66, 1000)] == [
        [0.004059, 0.015706], [0.01618, 0.035463], [0.053992, 0.085314], [0.052212, 0.083109]]


def test_each_cost_weighs_its_own_cells():
    # One cost at a time, the others 0: per decision failure x 8, -lost_success x 24, -review x 75.
    def net(**cost):
        body = {"failure": 0.0, "review": 0.0, "lost_success": 0.0, **cost}
        return impact(TALLY, 1000, CostModel(**body), as_of=None, review_in=120, review_out=45)["expected_net_effect"]

    assert net(failure=1.0)["per_decision"] == 0.008 and net(failure=1.0)["total"] == 8.0
    assert net(lost_success=1.0)["per_decision"] == -0.024 and net(lost_success=1.0)["total"] == -24.0
    assert net(review=1.0)["per_decision"] == -0.075 and net(review=1.0)["total"] == -75.0
    # Review only: second moment (120 + 45) / 1000 = 0.165, half-width 1.959964 x sqrt((0.165 - 0.075^2) / 1000).
    assert net(review=1.0)["interval_95"] == [-0.099743, -0.050257]
    assert net()["interval_95"] == [0.0, 0.0] and net()["per_decision"] == 0.0
    # The total is rounded to six digits: 8 x 0.1234567 = 0.9876536.
    odd = net(failure=0.1234567)
    assert (odd["per_decision"], odd["total"]) == (0.000988, 0.987654)


def test_out_of_review_only():
    change = impact({}, 8, COST, as_of=None, review_in=0, review_out=2)["review_load_change"]
    # rate -0.25, variance (2/8 - 1/16) / 8 = 0.0234375, half-width 1.959964 x 0.1530931 = 0.3000570.
    assert change == {"count": -2, "rate": -0.25, "interval_95": [-0.550057, 0.050057], "into_review": 0,
                      "out_of_review": 2}


def test_review_change_rounded_to_six_digits():
    change = impact({}, 3, COST, as_of=None, review_in=1, review_out=0)["review_load_change"]
    # rate 1/3, half-width 1.959964 x sqrt((1/3 - 1/9) / 3) = 0.5334347: -0.2001013 to 0.8667680.
    assert change == {"count": 1, "rate": 0.333333, "interval_95": [-0.200101, 0.866768], "into_review": 1,
                      "out_of_review": 0}


def test_nothing_replayed():
    empty = impact({}, 0, CostModel(), as_of=None, review_in=0, review_out=0)
    none = {"count": 0, "rate": None, "interval_95": None}
    assert empty["failures_caught"] == none and empty["new_approvals_unobservable"] == none
    assert empty["successes_lost"] == {**none, "blocked": 0, "to_review": 0}
    assert empty["immature"]["count"] == 0 and empty["immature"]["rate"] is None
    assert empty["review_load_change"] == {"count": 0, "rate": None, "interval_95": None, "into_review": 0,
                                           "out_of_review": 0}
    assert empty["expected_net_effect"] == {"per_decision": None, "interval_95": None, "total": 0.0,
                                            "formula": FORMULA}
    assert empty["cost_model"] == {"failure": 1.0, "review": 0.05, "lost_success": 0.2, "outcome_horizon_days": 30}


def test_one_cell_has_no_spread():
    # Every decision a caught failure at 0.1: the second moment equals the mean squared (up to
    # rounding, which may fall below it): a zero-width interval, never a math error.
    one = impact({("yes", "no", "failure", False): 3}, 3, CostModel(failure=0.1), as_of=None, review_in=0,
                 review_out=0)
    assert one["expected_net_effect"] == {"per_decision": 0.1, "interval_95": [0.1, 0.1], "total": 0.3,
                                          "formula": FORMULA}
    assert one["failures_caught"] == {"count": 3, "rate": 1.0, "interval_95": [0.438503, 1.0]}
    everyone = impact({}, 4, CostModel(), as_of=None, review_in=4, review_out=0)["review_load_change"]
    assert everyone == {"count": 4, "rate": 1.0, "interval_95": [1.0, 1.0], "into_review": 4, "out_of_review": 0}


def test_rows_and_headline():
    assert impact_rows(_impact()) == [
        ("Failures caught", ("8 of 1,000 decisions, 0.8% (95% 0.4–1.6%): approved, later failed, now blocked or "
                            "sent to review")),
        ("Successes lost", ("24 (11 blocked, 13 to review), 2.4% (95% 1.6–3.5%): approved, later succeeded, no "
                           "longer approved")),
        ("New approvals, outcome unobservable", "68, 6.8% (95% 5.4–8.5%): blocked in history"),
        ("Too young to judge", ("66 withdrawn approvals with an open, unreported or younger-than-7-day outcome "
                               "(as of 2026-03-01T00:00:00.000Z)")),
        ("Review load change", "+75 (120 in, 45 out), +7.5% of decisions (95% +5.0 to +10.0%)"),
        ("Expected net effect", ("+0.4100 per decision (95% -0.1543 to +0.9743), +410.0 over the history at cost of a "
                                "failure 100, a review 2, a lost success 10")),
    ]
    assert headline(_impact()) == ("failures caught 8 (0.8% (95% 0.4–1.6%)); successes lost 24 (2.4% (95% "
                                   "1.6–3.5%)); too young to judge 66; review load +75")


def test_rows_without_decisions_or_figures():
    empty = impact({}, 0, CostModel(), as_of=None, review_in=0, review_out=0)
    assert impact_rows(empty) == [
        ("Failures caught", "0 of 0 decisions, n/a: approved, later failed, now blocked or sent to review"),
        ("Successes lost", "0 (0 blocked, 0 to review), n/a: approved, later succeeded, no longer approved"),
        ("New approvals, outcome unobservable", "0, n/a: blocked in history"),
        ("Too young to judge", ("0 withdrawn approvals with an open, unreported or younger-than-30-day outcome "
                               "(as of n/a)")),
        ("Review load change", "+0 (0 in, 0 out)"),
        ("Expected net effect", "n/a at cost of a failure 1, a review 0.05, a lost success 0.2"),
    ]
    assert headline(empty) == "failures caught 0 (n/a); successes lost 0 (n/a); too young to judge 0; review load +0"
    for missing in (None, {}):
        assert impact_rows(missing) == [("Impact", "not in this manifest (a dry-run made before impact figures)")]


def test_cost_model_edges():
    assert CostModel().to_dict() == {"failure": 1.0, "review": 0.05, "lost_success": 0.2, "outcome_horizon_days": 30}
    assert CostModel.from_dict(None) == CostModel()
    assert CostModel.from_dict({}) == CostModel()
    body = {"failure": 0, "review": 1e9, "lost_success": 0.5, "outcome_horizon_days": 3650}
    assert CostModel.from_dict(body).to_dict() == body
    assert CostModel.from_dict({"outcome_horizon_days": 0}).outcome_horizon_days == 0
    for name in ("failure", "review", "lost_success"):
        assert getattr(CostModel(**{name: 1e9}), name) == 1e9
        assert getattr(CostModel(**{name: 0}), name) == 0


@pytest.mark.parametrize("body", [
    {"failure": -0.001}, {"review": 1e9 + 1}, {"lost_success": float("inf")}, {"failure": float("nan")},
    {"review": True}, {"lost_success": "1"}, {"failure": None},
    {"outcome_horizon_days": -1}, {"outcome_horizon_days": 3651}, {"outcome_horizon_days": 1.0},
    {"outcome_horizon_days": True}, {"outcome_horizon_days": "30"},
])
def test_cost_model_refusals(body):
    name = next(iter(body))
    with pytest.raises(ValueError, match=f"^cost model: {name} must be"):
        CostModel.from_dict(body)


def test_unknown_cost_members_are_named_in_order():
    with pytest.raises(ValueError, match=r"^cost model: unknown member\(s\) aaa, zzz$"):
        CostModel.from_dict({"zzz": 1, "failure": 1.0, "aaa": 2})


def test_a_result_without_an_impact_is_refused_where_its_figures_are_read():
    """`measured`: the one check the CLI's summary and a policy plan's figures share."""
    figures = impact({}, 0, CostModel(), as_of=None, review_in=0, review_out=0)
    assert measured(figures) is figures
    with pytest.raises(ValueError, match="carries no impact"):
        measured(None)
