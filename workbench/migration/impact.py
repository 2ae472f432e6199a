"""The dry-run's impact in the author's terms (`migration.json` `dry_run.impact`; docs/dry-run.md).

Inputs are the replayed decisions' count and one small tally of the verdict flips:
`(old verdict, new verdict, outcome class, young) → count`, where the outcome class is the flip's
latest outcome (success, failure, excluded, open, none, unobservable) and `young` says the decision
is newer than the outcome horizon before the history's newest decision. Both the vectorized dry-run
and the scalar check build that tally; this module is the one place the figures come from.

Figures (each a count of historical decisions, its rate per replayed decision, and a 95% Wilson
score interval of that rate):

* `failures_caught`: approved (`yes`) decisions with a mature failed outcome that the draft blocks
  (`no`) or sends to review;
* `successes_lost`: approved decisions with a mature successful outcome that the draft blocks or
  sends to review (split into `blocked` and `to_review`);
* `new_approvals_unobservable`: blocked (`no`) decisions the draft approves: never executed, so
  their outcome cannot be known;
* `immature`: flips away from `yes` whose outcome is still open, not reported, or younger than the
  horizon: never counted as successes or failures;
* `review_load_change`: decisions newly sent to review minus those leaving it, per replayed
  decision, with a paired (multinomial) normal interval.

The expected net effect per decision under the author's cost model (cost of a failure, of a review,
of a lost success) is `failure · caught − lost_success · lost − review · review_change`, a linear
combination of the cells of one multinomial over the replayed decisions, so its standard error is
`sqrt((Σ w² p − (Σ w p)²) / n)` and its interval normal (delta method, exact for a linear statistic).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from gate.protocol.confidence import wilson_interval
from workbench.reports.numbers import rate, rate_interval, signed, signed_interval, signed_rate

Z95 = 1.959964
APPROVED, BLOCKED, REVIEW = "yes", "no", "review"
MATURE_CLASSES = ("success", "failure")


class CostModelBody(TypedDict):
    """`impact.cost_model`: the cost model as the result states it (`CostModel.to_dict`)."""

    failure: float
    review: float
    lost_success: float
    outcome_horizon_days: int


class Figure(TypedDict):
    """A count of the replayed decisions, its rate and the rate's 95% interval (None without any)."""

    count: int
    rate: float | None
    interval_95: list[float] | None


class LostSuccesses(Figure):
    blocked: int
    to_review: int


class Immature(Figure):
    note: str


class ReviewChange(Figure):
    into_review: int
    out_of_review: int


class NetEffect(TypedDict):
    per_decision: float | None
    interval_95: list[float] | None
    total: float


class ExpectedNetEffect(NetEffect):
    formula: str


class Impact(TypedDict):
    """`dry_run.impact` (`impact`; module doc)."""

    decisions_replayed: int
    as_of: str | None
    cost_model: CostModelBody
    failures_caught: Figure
    successes_lost: LostSuccesses
    new_approvals_unobservable: Figure
    immature: Immature
    review_load_change: ReviewChange
    expected_net_effect: ExpectedNetEffect
    interval_method: str


@dataclass(frozen=True)
class CostModel:
    """What the author says an outcome costs (any consistent unit), and the outcome horizon."""

    failure: float = 1.0
    review: float = 0.05
    lost_success: float = 0.2
    outcome_horizon_days: int = 30

    def __post_init__(self) -> None:
        for name in ("failure", "review", "lost_success"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or not 0 <= value <= 1e9:
                raise ValueError(f"cost model: {name} must be a number from 0 to 1e9")
        if isinstance(self.outcome_horizon_days, bool) or not isinstance(self.outcome_horizon_days, int) \
                or not 0 <= self.outcome_horizon_days <= 3650:
            raise ValueError("cost model: outcome_horizon_days must be a whole number of days from 0 to 3650")

    def to_dict(self) -> CostModelBody:
        return {"failure": self.failure, "review": self.review, "lost_success": self.lost_success,
                "outcome_horizon_days": self.outcome_horizon_days}

    @classmethod
    def from_dict(cls, body: Mapping[str, Any] | None) -> CostModel:
        if body is None:
            return cls()
        unknown = sorted(set(body) - {"failure", "review", "lost_success", "outcome_horizon_days"})
        if unknown:
            raise ValueError(f"cost model: unknown member(s) {', '.join(unknown)}")
        return cls(**dict(body))


wilson = wilson_interval  # the one Wilson interval (gate.protocol.confidence)


def _figure(count: int, n: int) -> Figure:
    return {"count": count, "rate": round(count / n, 6) if n else None, "interval_95": wilson(count, n)}


Tally = Mapping[tuple[str, str, str, bool], int]


def _sum(tally: Tally, *, old: str | None = None, new: tuple[str, ...] = (), classes: tuple[str, ...] = (),
         young: bool | None = None) -> int:
    return sum(count for (o, n, c, y), count in tally.items()
               if (old is None or o == old) and (not new or n in new) and (not classes or c in classes)
               and (young is None or y == young))


def _review_change(review_in: int, review_out: int, n: int) -> ReviewChange:
    """Newly in review minus leaving it, per decision, with the paired normal interval."""
    if n == 0:
        return {"count": 0, "rate": None, "interval_95": None, "into_review": 0, "out_of_review": 0}
    delta = review_in - review_out
    rate = delta / n
    variance = ((review_in + review_out) / n - rate * rate) / n
    half = Z95 * math.sqrt(max(variance, 0.0))
    return {"count": delta, "rate": round(rate, 6), "interval_95": [round(rate - half, 6), round(rate + half, 6)],
            "into_review": review_in, "out_of_review": review_out}


def _net(cells: Mapping[str, tuple[int, float]], n: int) -> NetEffect:
    """Σ weight · cell / n with its multinomial standard error (cells are disjoint)."""
    if n == 0:
        return {"per_decision": None, "interval_95": None, "total": 0.0}
    mean = sum(weight * count for count, weight in cells.values()) / n
    second = sum(weight * weight * count for count, weight in cells.values()) / n
    half = Z95 * math.sqrt(max(second - mean * mean, 0.0) / n)
    return {"per_decision": round(mean, 6), "interval_95": [round(mean - half, 6), round(mean + half, 6)],
            "total": round(mean * n, 6)}


def impact(tally: Tally, replayed: int, cost: CostModel, *, as_of: str | None,
           review_in: int, review_out: int) -> Impact:
    """`dry_run.impact` from the flip tally and the replayed decisions' count (module doc)."""
    away = (BLOCKED, REVIEW)
    caught = _sum(tally, old=APPROVED, new=away, classes=("failure",), young=False)
    lost_blocked = _sum(tally, old=APPROVED, new=(BLOCKED,), classes=("success",), young=False)
    lost_review = _sum(tally, old=APPROVED, new=(REVIEW,), classes=("success",), young=False)
    immature = (_sum(tally, old=APPROVED, new=away, young=True)
                + _sum(tally, old=APPROVED, new=away, classes=("open", "none"), young=False))
    unobservable = _sum(tally, old=BLOCKED, new=(APPROVED,))
    lost = lost_blocked + lost_review
    weights = {"caught": (caught, cost.failure), "lost": (lost, -cost.lost_success),
               "review_in": (review_in, -cost.review), "review_out": (review_out, cost.review)}
    return {
        "decisions_replayed": replayed,
        "as_of": as_of,
        "cost_model": cost.to_dict(),
        "failures_caught": _figure(caught, replayed),
        "successes_lost": {**_figure(lost, replayed), "blocked": lost_blocked, "to_review": lost_review},
        "new_approvals_unobservable": _figure(unobservable, replayed),
        "immature": {**_figure(immature, replayed),
                     "note": (f"approvals the draft withdraws whose outcome is open, unreported or younger than "
                              f"{cost.outcome_horizon_days} days: neither caught failures nor lost successes yet")},
        "review_load_change": _review_change(review_in, review_out, replayed),
        "expected_net_effect": {**_net(weights, replayed),
                                "formula": "failure·caught − lost_success·lost − review·(into_review − out_of_review)"},
        "interval_method": "Wilson score (rates); paired multinomial normal (review change, net effect); 95%",
    }


NET_PLACES = 4  # decimals of the expected net effect per decision (cost units), its interval's too


def _pct(figure: Mapping[str, Any]) -> str:
    interval = figure.get("interval_95")
    if figure.get("rate") is None or interval is None:
        return "n/a"
    return f"{rate(figure['rate'])} (95% {rate_interval(*interval)})"


def impact_rows(impact: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The impact as (label, text) rows: what the page, the CLI, the reports and the notebook
    print, so every surface says the same thing."""
    if not impact:
        return [("Impact", "not in this manifest (a dry-run made before impact figures)")]
    n = impact["decisions_replayed"]
    lost = impact["successes_lost"]
    review = impact["review_load_change"]
    net = impact["expected_net_effect"]
    cost = impact["cost_model"]
    review_interval = review.get("interval_95")
    net_interval = net.get("interval_95")
    return [
        ("Failures caught", (f"{impact['failures_caught']['count']:,} of {n:,} decisions, "
                            f"{_pct(impact['failures_caught'])}: approved, later failed, now blocked or sent to review")),
        ("Successes lost", (f"{lost['count']:,} ({lost['blocked']:,} blocked, {lost['to_review']:,} to review), "
                           f"{_pct(lost)}: approved, later succeeded, no longer approved")),
        ("New approvals, outcome unobservable", (f"{impact['new_approvals_unobservable']['count']:,}, "
                                                f"{_pct(impact['new_approvals_unobservable'])}: blocked in history")),
        ("Too young to judge", (f"{impact['immature']['count']:,} withdrawn approvals with an open, unreported "
                               f"or younger-than-{cost['outcome_horizon_days']}-day outcome (as of "
                               f"{impact['as_of'] or 'n/a'})")),
        ("Review load change", f"{review['count']:+,} ({review['into_review']:,} in, {review['out_of_review']:,} out)"
                               + (f", {signed_rate(review['rate'])} of decisions (95% "
                                  f"{rate_interval(*review_interval, signed=True)})" if review_interval else "")),
        ("Expected net effect", (f"{signed(net['per_decision'], NET_PLACES)} per decision (95% "
                                 f"{signed_interval(net_interval, NET_PLACES)}), {net['total']:+,.1f} over the history"
                                 if net_interval else "n/a")
         + f" at cost of a failure {cost['failure']:g}, a review {cost['review']:g}, a lost success "
           f"{cost['lost_success']:g}"),
    ]


def measured(impact: Impact | None) -> Impact:
    """A dry-run result's `impact` where a caller reads its figures (the CLI's summary, a policy
    plan's `--fail-on` figures): every dry-run `summarize` makes measures one; a result without it
    (built by hand, not by a dry-run) is refused here rather than read as no impact."""
    if impact is None:
        raise ValueError("the dry-run result carries no impact: it was not made by a dry-run")
    return impact


def headline(impact: Mapping[str, Any]) -> str:
    """One line: failures caught and successes lost with their intervals, and what is too young."""
    lost = impact["successes_lost"]
    return (f"failures caught {impact['failures_caught']['count']:,} ({_pct(impact['failures_caught'])}); "
            f"successes lost {lost['count']:,} ({_pct(lost)}); too young to judge {impact['immature']['count']:,}; "
            f"review load {impact['review_load_change']['count']:+,}")
