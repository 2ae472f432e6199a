"""Figures in one voice: the one formatter of the pages, the reports, the CLI and the notebooks.

* A rate (a share of decisions, 0 to 1) is a percentage at one decimal: `rate(0.92134)` is `92.1%`.
* An interval is written at its estimate's precision: `rate_interval(0.392974, 0.607026)` is
  `39.3–60.7%`, `signed_interval(0.0051, 0.008636, 4)` is `+0.0051 to +0.0086`.
* A score or a cost per decision is a plain number at a stated number of decimals (`number`,
  `signed`): `signed(0.006868, 4)` is `+0.0069`.
* A duration (seconds) is written in its largest whole unit at one decimal: `duration(45)` is
  `45.0 s`, `duration(5400)` is `1.5 h`, `duration(172800)` is `2.0 d`.
* A missing figure is `n/a`.

A health state's words (healthy, monitor, investigate, …) are written only where they are the state
(workbench.reports.policy.policy_health), never beside a figure as its label.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["RATE_PLACES", "SCORE_PLACES", "duration", "number", "rate", "rate_interval", "score", "signed",
           "signed_interval", "signed_rate"]

RATE_PLACES = 1  # decimals of a percentage
SCORE_PLACES = 3  # decimals of a score (effectiveness, confidence, anomaly score: 0 to 1)
NA = "n/a"


def rate(value: float | None, places: int = RATE_PLACES) -> str:
    """A share as a percentage: `92.1%`."""
    return NA if value is None else f"{100 * value:.{places}f}%"


def signed_rate(value: float | None, places: int = RATE_PLACES) -> str:
    """A change of a share as a signed percentage: `+1.2%`."""
    return NA if value is None else f"{100 * value:+.{places}f}%"


def rate_interval(low: float | None, high: float | None, places: int = RATE_PLACES, *, signed: bool = False) -> str:
    """An interval of a share, at its estimate's precision: `39.3–60.7%` (`+0.4 to +2.1%` signed)."""
    if low is None or high is None:
        return NA
    if signed:
        return f"{100 * low:+.{places}f} to {100 * high:+.{places}f}%"
    return f"{100 * low:.{places}f}–{100 * high:.{places}f}%"


def number(value: float | None, places: int) -> str:
    """A score or a quantity at `places` decimals: `0.921`."""
    return NA if value is None else f"{value:.{places}f}"


def score(value: float | None) -> str:
    """A score (0 to 1) at `SCORE_PLACES` decimals: `0.921`."""
    return number(value, SCORE_PLACES)


def signed(value: float | None, places: int) -> str:
    """A signed quantity at `places` decimals: `+0.0069`."""
    return NA if value is None else f"{value:+.{places}f}"


def signed_interval(bounds: Sequence[float] | None, places: int) -> str:
    """An interval of a signed quantity, at its estimate's `places`: `+0.0051 to +0.0086`."""
    if not bounds:
        return NA
    return f"{signed(bounds[0], places)} to {signed(bounds[1], places)}"


_UNITS = ((86_400, "d"), (3_600, "h"), (60, "min"), (1, "s"))


def duration(seconds: float | None) -> str:
    """A duration in its largest unit of which it holds at least one, at one decimal: `1.5 h`."""
    if seconds is None:
        return NA
    size, unit = next(((size, unit) for size, unit in _UNITS if abs(seconds) >= size), _UNITS[-1])
    return f"{seconds / size:.1f} {unit}"
