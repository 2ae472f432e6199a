"""The notebooks' figures (matplotlib, shown as static PNG by any notebook viewer, trusted or not).

Each function draws figures the engines computed (rows of `workbench.notebooks.support`, the
reports of `workbench.reports.policy`, a dry-run's result); none computes a number of its own.

Caller text (policy versions, fact names, actions, policy ids) lands in titles, tick labels
and markers. matplotlib reads `$…$` in any text as mathtext (a version named `v$\\x$` would
render as a formula, or stop the figure with a parse error), so `configure()` turns math
parsing off for the process and every label is drawn as the literal characters; the PNG holds
no markup at all. `tests/notebooks/test_notebook_plots.py` pins both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import polars as pl
from matplotlib.figure import Figure

from gate.vocabulary import VERDICTS

SCORE, FAILURE, BAND, MARK = "#2f6fb3", "#c62828", "#9ec3e6", "#6d4c41"
VERDICT_COLORS = {"yes": "#2e7d32", "no": "#c62828", "review": "#f9a825"}


def configure() -> None:
    """Process-wide plot settings for the notebooks: caller text is never parsed as math or
    TeX (tick labels are made at draw time, so a per-figure setting would not reach them)."""
    matplotlib.rcParams.update({"text.parse_math": False, "text.usetex": False,
                                "figure.figsize": (9, 3.6), "figure.dpi": 96, "axes.titlesize": 11,
                                "axes.spines.top": False, "axes.spines.right": False})


def _figure(title: str) -> tuple[Figure, Any]:
    configure()
    fig, ax = plt.subplots()
    ax.set_title(title, loc="left")
    return fig, ax


def _marks(ax: Any, months: Sequence[str], versions: pl.DataFrame | None) -> None:
    """A dashed line where each version after the first starts, labelled with its name."""
    if versions is None or versions.height < 2:
        return
    top = ax.get_ylim()[1]
    for row in versions.iter_rows(named=True):
        if row["first_decision"] == versions["first_decision"][0] or row["first_month"] not in months:
            continue
        x = months.index(row["first_month"]) - 0.5
        ax.axvline(x, color=MARK, linestyle="--", linewidth=1)
        ax.text(x + 0.05, top * 0.98, f"version {row['policy_version']}", color=MARK, va="top", fontsize=9)


def course(monthly: pl.DataFrame, versions: pl.DataFrame | None, title: str) -> Figure:
    """Effectiveness (success rate) per month with its 95% Wilson interval, the failure rate,
    and the version changes."""
    fig, ax = _figure(title)
    months = monthly["month"].to_list()
    xs = list(range(len(months)))
    nan = float("nan")
    low = [nan if v is None else v for v in monthly["interval_low"].to_list()]
    high = [nan if v is None else v for v in monthly["interval_high"].to_list()]
    ax.fill_between(xs, low, high, color=BAND, alpha=0.6, label="95% interval of the success rate")
    score = [nan if v is None else v for v in monthly["effectiveness_score"].to_list()]
    failure = [nan if v is None else v for v in monthly["failure_rate"].to_list()]
    ax.plot(xs, score, marker="o", color=SCORE, label="effectiveness (success rate)")
    ax.plot(xs, failure, marker="s", color=FAILURE, label="failure rate")
    ax.set_ylim(0, 1.08)
    ax.set_xticks(xs, months, rotation=45, ha="right")
    ax.set_ylabel("share of resolved decisions")
    _marks(ax, months, versions)
    ax.legend(loc="center left", fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def by_version(rows: pl.DataFrame, title: str) -> Figure:
    """Effectiveness per policy version with its 95% interval (rows of `report_row` plus
    `policy_version`, oldest first), the failure rate beside it."""
    fig, ax = _figure(title)
    labels = [str(v) for v in rows["policy_version"].to_list()]
    xs = list(range(len(labels)))
    score = [v or 0.0 for v in rows["effectiveness_score"].to_list()]
    below = [s - (lo if lo is not None else s) for s, lo in zip(score, rows["interval_low"].to_list(), strict=True)]
    above = [(hi if hi is not None else s) - s for s, hi in zip(score, rows["interval_high"].to_list(), strict=True)]
    ax.bar([x - 0.2 for x in xs], score, width=0.4, color=SCORE, label="effectiveness (95% interval)",
           yerr=[below, above], capsize=4)
    ax.bar([x + 0.2 for x in xs], [v or 0.0 for v in rows["failure_rate"].to_list()], width=0.4, color=FAILURE,
           label="failure rate")
    ax.set_xticks(xs, labels)
    ax.set_ylim(0, 1.08)
    ax.legend(fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def bars(labels: Sequence[Any], values: Sequence[float | None], title: str, xlabel: str,
         colors: Sequence[str] | None = None) -> Figure:
    """Horizontal bars, one per label, each with its value written beside it."""
    fig, ax = _figure(title)
    shown = [v or 0.0 for v in values]
    ys = list(range(len(shown)))
    ax.barh(ys, shown, color=list(colors) if colors else SCORE)
    ax.set_yticks(ys, [str(label) for label in labels])
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    for y, value in zip(ys, values, strict=True):
        ax.text((value or 0.0), y, f" {value:g}" if value is not None else " n/a", va="center", fontsize=9)
    fig.tight_layout()
    return fig


def outcome_counts(counts: Mapping[str, int], classes: Mapping[str, str], title: str) -> Figure:
    """Decisions by latest outcome status (a report's `sample.latest_outcome_counts`), the
    statuses of the failure class (`classes`: status → effectiveness class) in red."""
    statuses = sorted(counts)
    colors = [FAILURE if classes.get(status) == "failure" else SCORE for status in statuses]
    return bars(statuses, [counts[s] for s in statuses], title, "decisions", colors)


def fact_shift(finding: Mapping[str, Any], title: str) -> Figure:
    """A fact-drift finding: the baseline and recent means, ± one standard deviation."""
    fig, ax = _figure(title)
    base, recent = finding["baseline"], finding["observed"]
    labels = [f"baseline ({base['months']}, {base['values']} values)", f"{recent['month']} ({recent['values']} values)"]
    ax.errorbar([0, 1], [base["mean"], recent["mean"]], yerr=[base["stddev"], recent["stddev"]], fmt="o",
                color=SCORE, capsize=6, markersize=8)
    ax.set_xticks([0, 1], labels)
    ax.set_xlim(-0.5, 1.5)
    ax.set_ylabel(f"fact {finding['value']} (mean ± 1 sd)")
    fig.tight_layout()
    return fig


def transitions(items: Sequence[Mapping[str, Any]], title: str) -> Figure:
    """A dry-run's verdict transitions (`from`, `to`, `count`) as a labelled grid."""
    fig, ax = _figure(title)
    order = [v for v in ("yes", "no", "review", "needs_input")
             if any(v in (t["from"], t["to"]) for t in items)] or list(VERDICTS)
    order += sorted({str(t[k]) for t in items for k in ("from", "to")} - set(order))
    grid = [[0 for _ in order] for _ in order]
    for t in items:
        grid[order.index(str(t["from"]))][order.index(str(t["to"]))] = t["count"]
    ax.imshow(grid, cmap="Blues")
    peak = max(max(row) for row in grid) or 1
    for i, row in enumerate(grid):
        for j, value in enumerate(row):
            ax.text(j, i, f"{value:,}", ha="center", va="center", color="#fff" if value > peak / 2 else "#111")
    ax.set_xticks(range(len(order)), [f"to {v}" for v in order])
    ax.set_yticks(range(len(order)), [f"from {v}" for v in order])
    fig.tight_layout()
    return fig


def cohorts(rows: pl.DataFrame, title: str, *, label: str = "policy_id", value: str = "your_success_rate",
            xlabel: str = "success rate") -> Figure:
    """Per row (a policy, or a metric of one policy): the scope's value (dot) against the
    cohort's p25–p75 (bar) and p50 (tick), where the anonymity floors let the cohort be shown
    (else the row's `cohort_status` is written instead)."""
    fig, ax = _figure(title)
    ys = list(range(rows.height))
    for y, row in zip(ys, rows.iter_rows(named=True), strict=True):
        if row["p25"] is not None and row["p75"] is not None:
            ax.barh(y, row["p75"] - row["p25"], left=row["p25"], height=0.4, color=BAND,
                    label="cohort p25–p75" if y == 0 else None)
            ax.plot([row["p50"]] * 2, [y - 0.25, y + 0.25], color=MARK, label="cohort p50" if y == 0 else None)
        else:
            ax.text(0.01, y + 0.3, f"cohort {row['cohort_status']}", fontsize=8, color=MARK)
        if row[value] is not None:
            ax.plot(row[value], y, "o", color=SCORE, label="this scope" if y == 0 else None)
    ax.set_yticks(ys, [str(v) for v in rows[label].to_list()])
    ax.set_xlim(0, 1.02)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.legend(fontsize=8, frameon=False, loc="lower left")
    fig.tight_layout()
    return fig


def fact_over_time(rows: pl.DataFrame, fact: str, versions: pl.DataFrame | None, title: str) -> Figure:
    """Each decision's value of one fact (rows of `notebook_support.fact_points`), those whose
    latest outcome is in the failure class in red, the finding's evidence ringed, with a dashed
    line where each later version starts."""
    fig, ax = _figure(title)
    for is_failure, color, label in ((False, SCORE, "latest outcome: other or none"),
                                     (True, FAILURE, "latest outcome: failure class")):
        part = rows.filter((pl.col("outcome_class") == "failure").fill_null(False) == is_failure)
        ax.scatter(part["created_at"].to_list(), part["value"].to_list(), s=14, color=color, alpha=0.7, label=label)
    evidence = rows.filter(pl.col("evidence"))
    ax.scatter(evidence["created_at"].to_list(), evidence["value"].to_list(), s=90, facecolors="none",
               edgecolors="#111", linewidths=1.2, label="evidence of the finding")
    if versions is not None:
        for row in versions.iter_rows(named=True):
            if row["first_decision"] != versions["first_decision"][0]:
                ax.axvline(row["first_decision"], color=MARK, linestyle="--", linewidth=1)
                ax.text(row["first_decision"], ax.get_ylim()[1], f" version {row['policy_version']}", color=MARK,
                        va="top", fontsize=9)
    ax.set_ylabel(f"fact {fact}")
    ax.legend(fontsize=8, frameon=False, loc="upper left")
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig


def paired(labels: Sequence[Any], before: Sequence[float], after: Sequence[float], title: str,
           names: tuple[str, str] = ("history", "draft"), ylabel: str = "decisions",
           colors: tuple[str, str] = (BAND, SCORE)) -> Figure:
    """Two bars per label (e.g. a dry-run's review load per month, history against draft)."""
    fig, ax = _figure(title)
    xs = list(range(len(labels)))
    ax.bar([x - 0.2 for x in xs], list(before), width=0.4, color=colors[0], label=names[0])
    ax.bar([x + 0.2 for x in xs], list(after), width=0.4, color=colors[1], label=names[1])
    ax.set_xticks(xs, [str(label) for label in labels], rotation=45 if len(labels) > 6 else 0, ha="right"
                  if len(labels) > 6 else "center")
    ax.set_xlim(-0.8, max(len(xs), 3) - 0.2)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8, frameon=False)
    fig.tight_layout()
    return fig
