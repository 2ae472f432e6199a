"""What a shadow and a canary show, from the release rows (gate.ledger.releases): pure functions.

Shadow: agreement rate (Wilson 95% interval), the verdict transition matrix live → shadow, and
the flips' outcomes as they arrive (failed, succeeded, still open or unreported). Canary: per arm
the decisions, the verdict mix and the failure rate of resolved outcomes (Wilson 95%, a fixed-n
interval for reading), beside the guardrails' always-valid intervals (gate.releases.guardrails),
which are what halts a canary. The API, the CLI and the workbench's Releases page all read these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from gate.protocol.confidence import wilson_interval
from gate.releases.guardrails import VERDICTS, ArmCounts, GuardrailReport, GuardrailReportJSON

wilson = wilson_interval  # the one Wilson interval (gate.protocol.confidence)


class Rate(TypedDict):
    """A proportion: its events of n, the rate (None when n is 0) and its Wilson 95% interval."""

    events: int
    n: int
    rate: float | None
    interval_95: list[float] | None


class Transition(TypedDict):
    live: str
    shadow: str
    n: int


class Flip(TypedDict):
    live: str
    shadow: str
    n: int
    failed: int
    succeeded: int
    open_or_unreported: int
    failure_rate: Rate


class ShadowFigures(TypedDict):
    decisions: int
    agreement: Rate
    transitions: list[Transition]
    flips: list[Flip]
    note: str


class ArmFigures(TypedDict):
    arm: str
    decisions: int
    verdict_mix: dict[str, Rate]
    failure_rate: Rate
    resolved_outcomes: int


class CanaryFigures(TypedDict):
    arms: list[ArmFigures]
    guardrails: GuardrailReportJSON


def _rate(events: int, n: int) -> Rate:
    return {"events": events, "n": n, "rate": round(events / n, 6) if n else None, "interval_95": wilson(events, n)}


def shadow_figures(rows: Iterable[Mapping[str, Any]]) -> ShadowFigures:
    """Agreement, the live → shadow transition matrix and the flips' outcomes."""
    matrix: dict[str, dict[str, int]] = {}
    flips: dict[tuple[str, str], dict[str, int]] = {}
    n = agree = 0
    for row in rows:
        live, shadow = str(row["verdict"]), str(row["shadow_verdict"])
        n += 1
        matrix.setdefault(live, {}).setdefault(shadow, 0)
        matrix[live][shadow] += 1
        if live == shadow:
            agree += 1
            continue
        effect = row.get("effect")
        bucket = effect if effect in ("failure", "success") else "open"
        tally = flips.setdefault((live, shadow), {"n": 0, "failure": 0, "success": 0, "open": 0})
        tally["n"] += 1
        tally[bucket] += 1
    return {
        "decisions": n,
        "agreement": _rate(agree, n),
        "transitions": [{"live": live, "shadow": shadow, "n": count}
                        for live in sorted(matrix) for shadow, count in sorted(matrix[live].items())],
        "flips": [{"live": live, "shadow": shadow, "n": t["n"], "failed": t["failure"], "succeeded": t["success"],
                   "open_or_unreported": t["open"], "failure_rate": _rate(t["failure"], t["failure"] + t["success"])}
                  for (live, shadow), t in sorted(flips.items())],
        "note": "flips' outcomes are those of the live decision; open or unreported ones are too young to judge",
    }


def arm_figures(name: str, arm: ArmCounts) -> ArmFigures:
    n = arm.decisions
    return {
        "arm": name,
        "decisions": n,
        "verdict_mix": {v: _rate(arm.verdicts.get(v, 0), n) for v in VERDICTS},
        "failure_rate": _rate(arm.failed, arm.failed + arm.succeeded),
        "resolved_outcomes": arm.failed + arm.succeeded,
    }


def canary_figures(canary: ArmCounts, active: ArmCounts, report: GuardrailReport) -> CanaryFigures:
    return {"arms": [arm_figures("active", active), arm_figures("canary", canary)],
            "guardrails": report.to_json()}
