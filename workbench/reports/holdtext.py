"""The hold report's words (`hold_report_v1`, `workbench.reports.holds`), in the one voice of
`workbench.reports.numbers`: `hold_lines` is the report as text (`gate report holds`), `health_line`
one queue's (or the policy's) health in a line (the CLI, the Overview page). Plain Python: `gate`
imports it at start-up without Polars.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from workbench.reports import numbers

if TYPE_CHECKING:  # the figures' types only: the words load no Polars
    from workbench.engines.holds import (
        ApprovalRate,
        ExpiryRate,
        HoldBody,
        HoldFigures,
        LaterFailed,
        ReviewedFigures,
    )

__all__ = ["health_cells", "health_line", "hold_lines"]


def _rate(block: ApprovalRate | ExpiryRate | LaterFailed) -> str:
    interval = block["interval_95"]  # [low, high]
    return (f"{numbers.rate(block['rate'])} (95% {numbers.rate_interval(interval[0], interval[1])}, n={block['n']:,})"
            if interval
            else f"n/a (n={block['n']:,})")


def health_cells(figures: HoldFigures) -> dict[str, str]:
    """A queue's (or the policy's) health as four texts: `open` holds, the `oldest` open hold's age,
    the `p50` time to resolution with its n, the `expiry` rate with its interval and n."""
    backlog, waits = figures["backlog"], figures["time_to_resolution"]
    return {"open": f"{backlog['open']:,}", "oldest": numbers.duration(backlog["oldest_age_seconds"]),
            "p50": f"{numbers.duration(waits['p50_seconds'])} (n={waits['n']:,})",
            "expiry": _rate(figures["expiry_rate"])}


def health_line(figures: HoldFigures) -> str:
    """A queue's (or the policy's) health in one line: backlog, oldest open hold, p50 time to
    resolution, expiry rate."""
    cells = health_cells(figures)
    return (f"{cells['open']} open, oldest {cells['oldest']}; time to resolution p50 {cells['p50']}; "
            f"expiry rate {cells['expiry']}")


def _closed_lines(figures: ReviewedFigures) -> list[str]:
    waits, later = figures["time_to_resolution"], figures["later_failed"]
    return [
        (f"time to resolution p50 {numbers.duration(waits['p50_seconds'])}, p90 "
         f"{numbers.duration(waits['p90_seconds'])} (n={waits['n']:,})"),
        f"approval rate {_rate(figures['approval_rate'])}",
        (f"approved, later failed {_rate(later)}; too young to judge {later['too_young']:,}, "
         f"no terminal outcome {later['no_terminal_outcome']:,}"),
    ]


def hold_lines(report: HoldBody) -> list[str]:
    """The hold report as text: its window, the policy's figures, each queue's and each reviewer's."""
    policy = report["holds"]
    lines = [f"Window: {report['window']['text']}", f"Holds: {health_line(policy)}",
             *(f"  {line}" for line in _closed_lines(policy))]
    for queue in report["queues"]:
        lines += [f"Queue {queue['queue']}: {health_line(queue)}", *(f"  {line}" for line in _closed_lines(queue))]
    for reviewer in report["reviewers"]:
        lines += [f"Reviewer {reviewer['reviewer']}: {reviewer['resolved']:,} resolved",
                  *(f"  {line}" for line in _closed_lines(reviewer))]
    return [*lines, ""]
