"""What a hold costs, measured from the history (issue 43, item 6): the dry-run's review forecast
(`dry_run.review_load.hold_cost`, docs/dry-run.md) beside the review queue's counts.

When the history holds closed holds of the rulebook (in the dry-run's scope), the cost is
measured from them by the hold report's own formulas (`workbench.engines.holds.resolution_figures`):
how long a hold waits for a reviewer (p50, p90, n), how often reviewers approve and how often the
clock expires one (each with its 95% Wilson interval and n), and what that makes of the review
queue a month before and under the draft (holds a month × each closing's share). Otherwise the
forecast stays the queue's counts and the cost model's assumed review cost, and says it is not
measured. `hold_cost_text` is the one line every surface prints (the report, the pages, the CLI).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict

import polars as pl

from workbench.engines.holds import (
    ApprovalRate,
    ExpiryRate,
    ResolutionFigures,
    Waits,
    resolution_figures,
)
from workbench.reports import numbers

__all__ = ["HoldCost", "hold_cost", "hold_cost_text"]


class MonthOfHolds(TypedDict):
    """A month's holds and what the measured shares make of them (`_month`)."""

    holds: float
    approved: float
    denied: float
    expired: float


class HoldsPerMonth(TypedDict):
    before: MonthOfHolds
    after: MonthOfHolds


class MeasuredHoldCost(TypedDict):
    """`review_load.hold_cost` measured from the history's closed holds."""

    measured: Literal[True]
    source: str
    closed_holds: int
    resolved_from: str | None
    resolved_to: str | None
    time_to_resolution: Waits
    approval_rate: ApprovalRate
    expiry_rate: ExpiryRate
    per_month: HoldsPerMonth
    assumed_review_cost: float


class AssumedHoldCost(TypedDict):
    """`review_load.hold_cost` without a closed hold to measure: the cost model's review cost."""

    measured: Literal[False]
    source: None
    assumed_review_cost: float
    note: str


HoldCost = MeasuredHoldCost | AssumedHoldCost

SOURCE = "the history's closed holds of this rulebook in the dry-run's scope"


def _month(holds: float, figures: ResolutionFigures) -> MonthOfHolds:
    """A month's holds and what the measured shares make of them."""
    closed = figures["expiry_rate"]["n"]
    approved, denied = figures["approval_rate"]["approved"], figures["approval_rate"]["denied"]
    expired = figures["expiry_rate"]["expired"]
    return {"holds": holds, "approved": round(holds * approved / closed, 3), "denied": round(holds * denied / closed, 3),
            "expired": round(holds * expired / closed, 3)}


def hold_cost(holds: pl.LazyFrame | None, *, per_month_before: float, per_month_after: float,
              review_cost: float) -> HoldCost:
    """`review_load.hold_cost`: measured from `holds` (the history's, `History.holds`) when it has a
    closed hold, else `measured: false` with the cost model's assumed `review_cost`."""
    figures = resolution_figures(holds) if holds is not None else None
    if figures is None or figures["closed"] == 0:
        return {"measured": False, "source": None, "assumed_review_cost": review_cost,
                "note": ("no closed hold of this rulebook in the history: the review forecast is the queue's counts, "
                         f"and the cost model's review cost ({review_cost:g} per review) is assumed, not measured")}
    return {
        "measured": True, "source": SOURCE, "closed_holds": figures["closed"],
        "resolved_from": figures["first_resolved_at"], "resolved_to": figures["last_resolved_at"],
        "time_to_resolution": figures["time_to_resolution"], "approval_rate": figures["approval_rate"],
        "expiry_rate": figures["expiry_rate"],
        "per_month": {"before": _month(per_month_before, figures), "after": _month(per_month_after, figures)},
        "assumed_review_cost": review_cost,
    }


def _rate(block: Mapping[str, Any]) -> str:
    interval = block["interval_95"]
    return (f"{numbers.rate(block['rate'])} (95% {numbers.rate_interval(*interval)}, n={block['n']:,})" if interval
            else f"n/a (n={block['n']:,})")


def hold_cost_text(cost: Mapping[str, Any] | None) -> str:
    """The measured cost of a hold in one line, or why it is not measured."""
    if not cost:
        return "not in this manifest (a dry-run made before the measured cost of a hold)"
    if not cost["measured"]:
        return f"not measured: {cost['note']}"
    waits, after = cost["time_to_resolution"], cost["per_month"]["after"]
    return (f"measured over {cost['closed_holds']:,} closed holds ({str(cost['resolved_from'])[:10]} to "
            f"{str(cost['resolved_to'])[:10]}): a hold waits {numbers.duration(waits['p50_seconds'])} for a reviewer "
            f"(p50; p90 {numbers.duration(waits['p90_seconds'])}, n={waits['n']:,}), approved "
            f"{_rate(cost['approval_rate'])}, expired {_rate(cost['expiry_rate'])}; under the draft "
            f"{after['holds']:,} holds a month: {after['approved']:,} approved, {after['denied']:,} denied, "
            f"{after['expired']:,} expired")
