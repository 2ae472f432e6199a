"""Held actions' figures (issue 43; formulas in docs/intelligence.md, "Holds"): how many holds are
open and how old, how long reviewers take, how often they approve, how often silence expires a
hold, and how often an approved hold's decision later failed: for the policy, per queue and per
reviewer.

Inputs: `holds`, one row per hold in its latest state (the columns of
`workbench.dataset.schema.HOLDS`: `workbench.dataset.load.holds_from_dataset` or
`holds_from_ledger`), `outcomes`, the outcome records of the held decisions, the outcome-status →
effectiveness-class mapping (the caller's, as for every engine), and `as_of`, the instant the
holds were read at (a dataset's cut, the ledger's read).

The window every figure states (`window`):

* the backlog: every hold open as of `as_of`; its age is `as_of − opened_at` (0 for a hold opened
  after `as_of`, which a dataset's cut can hold);
* the closed holds: the `limit` most recently closed (`resolved_at`, then `decision_id`, newest
  first; every one when `limit` is None).

Figures, each with the count it rests on:

* `time_to_resolution`: `resolved_at − opened_at` of the closed holds a reviewer resolved (approved
  or denied): n, p50 and p90 (linear interpolation between closest ranks, as
  `workbench.engines.common.percentile`). An expiry is silence, not a resolution: the expiry rate counts it;
* `approval_rate` = approved / (approved + denied), with its 95% Wilson interval;
* `expiry_rate` = expired / closed, with its 95% Wilson interval;
* `later_failed`: of the approved holds resolved at least `outcome_window_days` before `as_of`,
  those whose decision's latest outcome record is in the failure class over those in the failure
  or success class, with its 95% Wilson interval. Approvals younger than the window
  (`too_young`) and approvals without a terminal outcome (open, excluded, unclassified or none:
  `no_terminal_outcome`) are counted apart, never as successes.

Per queue: the queue a hold is in (its current one). Per reviewer: the principal whose vote closed
the hold (approved or denied; the clock's expiries are not a reviewer's), with the figures of the
holds they closed. No partial → merge form: percentiles of durations need the rows, and holds are
few (one per held decision).

Only Polars, the standard library, the engines' common pieces and `gate.vocabulary` are imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final, TypedDict

import polars as pl

from gate.vocabulary import HOLD_APPROVED, HOLD_DENIED, HOLD_EXPIRED, HOLD_OPEN
from workbench.engines.common import (
    FAILURE,
    SUCCESS,
    Sample,
    class_expr,
    iso,
    latest_outcomes,
    r4,
    ratio,
    sample_block,
    sample_partial,
    wilson,
    with_latest_outcome,
)

FAILED: Final = "failed"
SUCCEEDED: Final = "succeeded"
TOO_YOUNG: Final = "too_young"
NO_TERMINAL: Final = "no_terminal_outcome"
_TS = pl.Datetime("ms", "UTC")
_HOLD_COLUMNS = ("decision_id", "opened_at", "queue", "state", "resolved_at", "resolved_by")


def _seconds(delta: pl.Expr) -> pl.Expr:
    return delta.dt.total_milliseconds().cast(pl.Float64) / 1000.0


def _closed(holds: pl.LazyFrame, limit: int | None) -> pl.LazyFrame:
    closed = holds.filter(pl.col("state") != HOLD_OPEN).sort(["resolved_at", "decision_id"], descending=True)
    return closed if limit is None else closed.head(limit)


def _wait() -> pl.Expr:
    """`resolved_at − opened_at` of a hold a reviewer resolved (approved or denied), in seconds; null otherwise."""
    reviewed = pl.col("state").is_in([HOLD_APPROVED, HOLD_DENIED])
    return pl.when(reviewed).then(_seconds(pl.col("resolved_at") - pl.col("opened_at"))).alias("wait_seconds")


def _after_approval(closed: pl.LazyFrame, outcomes: pl.LazyFrame, classes: Mapping[str, str],
                    judged_before: datetime) -> pl.LazyFrame:
    """The closed holds with `wait_seconds` (`_wait`) and `after`: what became of an approved
    hold's decision (failed, succeeded, too young, no terminal outcome; null for the others)."""
    latest = latest_outcomes(outcomes.join(closed.select("decision_id"), on="decision_id", how="semi"))
    effect = class_expr(classes)
    approved = pl.col("state") == HOLD_APPROVED
    after = (pl.when(~approved).then(pl.lit(None, pl.String))
             .when(pl.col("resolved_at") > pl.lit(judged_before, _TS)).then(pl.lit(TOO_YOUNG))
             .when(effect == FAILURE).then(pl.lit(FAILED))
             .when(effect == SUCCESS).then(pl.lit(SUCCEEDED))
             .otherwise(pl.lit(NO_TERMINAL)))
    return closed.join(latest.select("decision_id", "status"), on="decision_id", how="left").with_columns(
        _wait(), after.alias("after"))


def _count(condition: pl.Expr, name: str) -> pl.Expr:
    return condition.sum().cast(pl.Int64).alias(name)


def _closed_aggs() -> list[pl.Expr]:
    state, after, wait = pl.col("state"), pl.col("after"), pl.col("wait_seconds").drop_nulls()
    return [
        pl.len().cast(pl.Int64).alias("closed"),
        _count(state == HOLD_APPROVED, "approved"), _count(state == HOLD_DENIED, "denied"),
        _count(state == HOLD_EXPIRED, "expired"),
        wait.len().cast(pl.Int64).alias("reviewed"),
        wait.quantile(0.5, "linear").alias("wait_p50"), wait.quantile(0.9, "linear").alias("wait_p90"),
        _count(after == FAILED, FAILED), _count(after == SUCCEEDED, SUCCEEDED),
        _count(after == TOO_YOUNG, TOO_YOUNG), _count(after == NO_TERMINAL, NO_TERMINAL),
        pl.col("resolved_at").min().alias("first_resolved_at"), pl.col("resolved_at").max().alias("last_resolved_at"),
    ]


def _open_aggs(as_of: datetime) -> list[pl.Expr]:
    age = _seconds(pl.lit(as_of, _TS) - pl.col("opened_at")).clip(lower_bound=0.0)
    return [
        pl.len().cast(pl.Int64).alias("open"),
        age.max().alias("oldest_age"), age.quantile(0.5, "linear").alias("age_p50"),
        pl.col("opened_at").min().alias("oldest_opened_at"),
    ]


class Rate(TypedDict):
    """A share with its 95% Wilson interval (None without a count to rest on)."""

    rate: float | None
    interval_95: list[float | None] | None


class Waits(TypedDict):
    """`time_to_resolution`: of the holds a reviewer resolved."""

    n: int
    p50_seconds: float | None
    p90_seconds: float | None


class ApprovalRate(Rate):
    approved: int
    denied: int
    n: int


class ExpiryRate(Rate):
    expired: int
    n: int


class LaterFailed(Rate):
    failed: int
    succeeded: int
    n: int
    too_young: int
    no_terminal_outcome: int


class Backlog(TypedDict):
    open: int
    oldest_age_seconds: float | None
    age_p50_seconds: float | None
    oldest_opened_at: str | None


class ReviewedFigures(TypedDict):
    """The figures of holds reviewers closed (`_reviewed_block`): a reviewer's."""

    time_to_resolution: Waits
    approval_rate: ApprovalRate
    later_failed: LaterFailed


class ClosedFigures(ReviewedFigures):
    """The figures of a group's closed holds (`_closed_block`): with the clock's expiries."""

    expiry_rate: ExpiryRate


class HoldFigures(ClosedFigures):
    """The figures of the policy's holds, or of one queue's."""

    backlog: Backlog


class QueueFigures(HoldFigures):
    queue: str


class ReviewerFigures(ReviewedFigures):
    reviewer: str
    resolved: int


class HoldWindow(TypedDict):
    """What the figures cover (`_window`), in members and in `text`."""

    as_of: str | None
    limit: int | None
    open_holds: int
    closed_holds: int
    closed_from: str | None
    closed_to: str | None
    outcome_window_days: int
    judged_before: str | None
    text: str


class HoldBody(TypedDict):
    """The hold report's body (`hold_report`; sealed by `workbench.reports.holds`)."""

    window: HoldWindow
    holds: HoldFigures
    queues: list[QueueFigures]
    reviewers: list[ReviewerFigures]
    sample: Sample  # the held decisions considered: the open holds and the closed ones of the window


class ResolutionFigures(TypedDict):
    """What a closed hold cost (`resolution_figures`)."""

    closed: int
    first_resolved_at: str | None
    last_resolved_at: str | None
    time_to_resolution: Waits
    approval_rate: ApprovalRate
    expiry_rate: ExpiryRate


def _rate(hits: int, n: int) -> Rate:
    interval = wilson(hits, n)
    return {"rate": r4(ratio(hits, n)), "interval_95": None if interval is None else [r4(interval[0]), r4(interval[1])]}


def _count_of(row: Mapping[str, Any], name: str) -> int:
    return int(row.get(name) or 0)


def _reviewed_block(row: Mapping[str, Any]) -> ReviewedFigures:
    """The figures of a group's reviewed holds (`_closed_aggs`); zeros and nulls without any."""
    def n(name: str) -> int:
        return _count_of(row, name)

    approved, denied = n("approved"), n("denied")
    judged = n(FAILED) + n(SUCCEEDED)
    return {
        "time_to_resolution": {"n": n("reviewed"), "p50_seconds": r4(row.get("wait_p50")),
                               "p90_seconds": r4(row.get("wait_p90"))},
        "approval_rate": {"approved": approved, "denied": denied, "n": approved + denied,
                          **_rate(approved, approved + denied)},
        "later_failed": {"failed": n(FAILED), "succeeded": n(SUCCEEDED), "n": judged, **_rate(n(FAILED), judged),
                         TOO_YOUNG: n(TOO_YOUNG), NO_TERMINAL: n(NO_TERMINAL)},
    }


def _closed_block(row: Mapping[str, Any]) -> ClosedFigures:
    """The figures of a group's closed holds, the clock's expiries with them."""
    expired, closed = _count_of(row, "expired"), _count_of(row, "closed")
    return {**_reviewed_block(row), "expiry_rate": {"expired": expired, "n": closed, **_rate(expired, closed)}}


def _backlog_block(row: Mapping[str, Any]) -> Backlog:
    oldest = row.get("oldest_opened_at")
    return {"open": int(row.get("open") or 0), "oldest_age_seconds": r4(row.get("oldest_age")),
            "age_p50_seconds": r4(row.get("age_p50")), "oldest_opened_at": iso(oldest)}


def _by_queue(open_: pl.LazyFrame, closed: pl.LazyFrame, as_of: datetime) -> list[QueueFigures]:
    """Each queue's backlog and closed-hold figures: most open holds first, then most closed, then by name."""
    backlog = open_.group_by("queue").agg(_open_aggs(as_of))
    done = closed.group_by("queue").agg(_closed_aggs())
    rows = (backlog.join(done, on="queue", how="full", coalesce=True)
            .with_columns(pl.col("open", "closed").fill_null(0))
            .sort(["open", "closed", "queue"], descending=[True, True, False]).collect())
    return [{"queue": row["queue"], "backlog": _backlog_block(row), **_closed_block(row)}
            for row in rows.iter_rows(named=True)]


def _by_reviewer(closed: pl.LazyFrame) -> list[ReviewerFigures]:
    """Each reviewer's closed holds (those their vote closed): most first, then by actor."""
    reviewed = closed.filter(pl.col("state").is_in([HOLD_APPROVED, HOLD_DENIED]))
    rows = reviewed.group_by("resolved_by").agg(_closed_aggs()).sort(
        ["closed", "resolved_by"], descending=[True, False]).collect()
    return [{"reviewer": row["resolved_by"], "resolved": int(row["closed"]), **_reviewed_block(row)}
            for row in rows.iter_rows(named=True)]


def _window(closed_row: Mapping[str, Any], open_row: Mapping[str, Any], *, as_of: datetime, limit: int | None,
            outcome_window_days: int, judged_before: datetime) -> HoldWindow:
    """What the figures cover, in members and in words."""
    first, last = iso(closed_row.get("first_resolved_at")), iso(closed_row.get("last_resolved_at"))
    closed, open_ = int(closed_row.get("closed") or 0), int(open_row.get("open") or 0)
    text = (f"{open_} open holds as of {iso(as_of)}; latest {closed} closed holds "
            f"(limit {'all' if limit is None else limit})" + (f", resolved {first[:10]} to {last[:10]}" if first and last else "")
            + f"; approvals judged by their outcome once {outcome_window_days} days old (resolved before "
              f"{iso(judged_before)})")
    return {"as_of": iso(as_of), "limit": limit, "open_holds": open_, "closed_holds": closed,
            "closed_from": first, "closed_to": last, "outcome_window_days": outcome_window_days,
            "judged_before": iso(judged_before), "text": text}


def _sample(open_: pl.LazyFrame, closed: pl.LazyFrame, outcomes: pl.LazyFrame,
            classes: Mapping[str, str]) -> Sample:
    """The sample block every report states (`workbench.engines.common.sample_block`), over the held
    decisions the report considers: the open holds and the closed ones of the window (a hold's
    `opened_at` is its decision's `created_at`)."""
    held = pl.concat([open_.select("decision_id", pl.col("opened_at").alias("created_at")),
                      closed.select("decision_id", pl.col("opened_at").alias("created_at"))])
    mine = outcomes.join(held.select("decision_id"), on="decision_id", how="semi")
    return sample_block(sample_partial(with_latest_outcome(held, mine)), classes)


def hold_report(holds: pl.LazyFrame, outcomes: pl.LazyFrame, classes: Mapping[str, str], *, as_of: datetime,
                limit: int | None, outcome_window_days: int) -> HoldBody:
    """The hold report's body (module doc): `window`, the policy's figures (`holds`), `queues`,
    `reviewers` and the `sample` of held decisions they rest on."""
    if outcome_window_days < 0:
        raise ValueError("outcome_window_days must be 0 or more")
    judged_before = as_of - timedelta(days=outcome_window_days)
    rows = holds.select(_HOLD_COLUMNS)
    open_ = rows.filter(pl.col("state") == HOLD_OPEN)
    closed = _after_approval(_closed(rows, limit), outcomes, classes, judged_before).collect().lazy()
    open_row = open_.select(_open_aggs(as_of)).collect().row(0, named=True)
    closed_row = closed.select(_closed_aggs()).collect().row(0, named=True)
    return {
        "window": _window(closed_row, open_row, as_of=as_of, limit=limit, outcome_window_days=outcome_window_days,
                          judged_before=judged_before),
        "holds": {"backlog": _backlog_block(open_row), **_closed_block(closed_row)},
        "queues": _by_queue(open_, closed, as_of),
        "reviewers": _by_reviewer(closed),
        "sample": _sample(open_, closed, outcomes, classes),
    }


def resolution_figures(holds: pl.LazyFrame, limit: int | None = None) -> ResolutionFigures:
    """What a closed hold cost, with no outcome and no instant: of the `limit` most recently closed
    holds (all when None), `closed`, their `first_resolved_at` and `last_resolved_at`, and
    `time_to_resolution`, `approval_rate` and `expiry_rate` exactly as `hold_report` states them
    (the dry-run's measured cost of a hold, `workbench.migration.holdcost`)."""
    closed = _closed(holds.select(_HOLD_COLUMNS), limit).with_columns(_wait(), pl.lit(None, pl.String).alias("after"))
    row = closed.select(_closed_aggs()).collect().row(0, named=True)
    block = _closed_block(row)
    return {"closed": int(row["closed"]), "first_resolved_at": iso(row["first_resolved_at"]),
            "last_resolved_at": iso(row["last_resolved_at"]),
            "time_to_resolution": block["time_to_resolution"], "approval_rate": block["approval_rate"],
            "expiry_rate": block["expiry_rate"]}
