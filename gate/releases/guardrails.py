"""Canary guardrails: sequential comparisons that stay valid however often they are looked at.

Each guardrail compares a proportion between the canary arm and the active arm:

* `failure_rate`: failed / (failed + succeeded) among decisions whose latest outcome is resolved;
* `verdict_mix`: the share of each verdict (yes, no, review, needs_input) among all decisions of
  the arm (no outcomes needed); one comparison per verdict, at alpha / 4 each (Bonferroni).

The test is a mixture sequential probability ratio test (mSPRT; Robbins 1970, as used for A/B
tests by Johari, Pekelis and Walsh, "Always valid inference", 2017) on the difference of the two
proportions, with its normal approximation: with d = p_canary - p_active, its variance under "no
difference" V = p(1-p)(1/n_c + 1/n_a) from the pooled proportion p = (x_c+x_a+0.5)/(n_c+n_a+1)
(smoothed so a zero count still has a variance; the pooled form keeps the simulated false-alarm
rate under alpha where the unpooled one, at 30 observations an arm, reached it) and a N(0, tau^2)
mixture over the true difference, the likelihood ratio is

    L = sqrt(V / (V + tau^2)) * exp(d^2 * tau^2 / (2 V (V + tau^2))).

Under "no difference" L is a nonnegative martingale, so by Ville's inequality P(L ever >= 1/alpha)
<= alpha: looking after every decision does not inflate the false-alarm rate. Inverting L < 1/alpha
gives the always-valid confidence sequence d +/- r with

    r = sqrt(V (V + tau^2) / tau^2 * (2 ln(1/alpha) + ln((V + tau^2) / V))),

clipped to [-1, 1], the range of a difference of two proportions: (d - r, d + r) can reach past
it when one arm has all events and the other none, and the intersection with the possible range
is as valid as the sequence itself (the true difference lies in both).

A guardrail trips when the whole interval lies beyond its tolerance: for `failure_rate`, the
canary is worse (lower bound > tolerance, default 0); for `verdict_mix`, some verdict's share moved
by more than the tolerance (default 0.10) either way. The stated false-alarm rate of each guardrail
is alpha (default 0.05) per canary; tests/releases/test_guardrails.py simulates A/A canaries and
checks it. Nothing is judged before each arm has `min_count` observations (default 30), which also
keeps the normal approximation honest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypedDict

VERDICTS = ("yes", "no", "review", "needs_input")
ALPHA = 0.05
MIN_COUNT = 30
FAILURE_TAU = 0.05
FAILURE_TOLERANCE = 0.0
MIX_TAU = 0.10
MIX_TOLERANCE = 0.10
METHOD = "msprt_normal_mixture_v1"


class ArmJSON(TypedDict):
    events: int
    n: int


class ComparisonJSON(TypedDict):
    name: str
    canary: ArmJSON
    active: ArmJSON
    difference: float | None
    interval: list[float | None] | None
    likelihood_ratio: float | None
    alpha: float
    tolerance: float
    judged: bool
    tripped: bool


class GuardJSON(TypedDict):
    tau: float
    tolerance: float
    false_alarm_rate: float


class SettingsJSON(TypedDict):
    method: str
    alpha: float
    min_count: int
    failure_rate: GuardJSON
    verdict_mix: GuardJSON


class GuardrailReportJSON(TypedDict):
    """A canary's guardrails as the release status and the halt event state them (docs/releases.md)."""

    settings: SettingsJSON
    tripped: list[str]
    failure_rate: ComparisonJSON
    verdict_mix: list[ComparisonJSON]


@dataclass(frozen=True, slots=True)
class Comparison:
    """One always-valid comparison of a proportion between the arms."""

    name: str
    canary: tuple[int, int]  # (events, observations)
    active: tuple[int, int]
    difference: float | None
    interval: tuple[float, float] | None
    likelihood_ratio: float | None
    alpha: float
    tolerance: float
    tripped: bool
    judged: bool

    def to_json(self) -> ComparisonJSON:
        return {
            "name": self.name,
            "canary": {"events": self.canary[0], "n": self.canary[1]},
            "active": {"events": self.active[0], "n": self.active[1]},
            "difference": _round(self.difference),
            "interval": [_round(self.interval[0]), _round(self.interval[1])] if self.interval else None,
            "likelihood_ratio": _round(self.likelihood_ratio),
            "alpha": self.alpha,
            "tolerance": self.tolerance,
            "judged": self.judged,
            "tripped": self.tripped,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _smoothed(events: int, n: int) -> float:
    return (events + 0.5) / (n + 1)


def compare(name: str, canary: tuple[int, int], active: tuple[int, int], *, tau: float, alpha: float,
            tolerance: float, one_sided: bool, min_count: int = MIN_COUNT) -> Comparison:
    """The mSPRT comparison of canary vs active proportions (events, n) — see the module doc."""
    (x_c, n_c), (x_a, n_a) = canary, active
    if n_c < min_count or n_a < min_count:
        return Comparison(name, canary, active, None, None, None, alpha, tolerance, False, False)
    d = x_c / n_c - x_a / n_a
    pooled = _smoothed(x_c + x_a, n_c + n_a)
    v = pooled * (1 - pooled) * (1 / n_c + 1 / n_a)
    t2 = tau * tau
    log_lr = 0.5 * math.log(v / (v + t2)) + d * d * t2 / (2 * v * (v + t2))
    radius = math.sqrt(v * (v + t2) / t2 * (2 * math.log(1 / alpha) + math.log((v + t2) / v)))
    # A difference of two proportions lies in [-1, 1]: the interval is clipped to that range (still a
    # valid confidence sequence, since the true difference lies in it; d itself always does).
    low, high = max(d - radius, -1.0), min(d + radius, 1.0)
    tripped = low > tolerance if one_sided else (low > tolerance or high < -tolerance)
    return Comparison(name, canary, active, d, (low, high), math.exp(min(log_lr, 700.0)), alpha, tolerance,
                      tripped, True)


@dataclass(frozen=True, slots=True)
class ArmCounts:
    """One arm's decisions by verdict and its resolved outcomes."""

    verdicts: Mapping[str, int]
    failed: int
    succeeded: int

    @property
    def decisions(self) -> int:
        return sum(self.verdicts.values())


@dataclass(frozen=True, slots=True)
class GuardrailSettings:
    alpha: float = ALPHA
    min_count: int = MIN_COUNT
    failure_tolerance: float = FAILURE_TOLERANCE
    mix_tolerance: float = MIX_TOLERANCE

    def to_json(self) -> SettingsJSON:
        return {"method": METHOD, "alpha": self.alpha, "min_count": self.min_count,
                "failure_rate": {"tau": FAILURE_TAU, "tolerance": self.failure_tolerance, "false_alarm_rate": self.alpha},
                "verdict_mix": {"tau": MIX_TAU, "tolerance": self.mix_tolerance, "false_alarm_rate": self.alpha}}


@dataclass(frozen=True, slots=True)
class GuardrailReport:
    failure_rate: Comparison
    verdict_mix: tuple[Comparison, ...]
    settings: GuardrailSettings

    @property
    def tripped(self) -> tuple[str, ...]:
        names = ["failure_rate"] if self.failure_rate.tripped else []
        if any(c.tripped for c in self.verdict_mix):
            names.append("verdict_mix")
        return tuple(names)

    def to_json(self) -> GuardrailReportJSON:
        return {"settings": self.settings.to_json(), "tripped": list(self.tripped),
                "failure_rate": self.failure_rate.to_json(),
                "verdict_mix": [c.to_json() for c in self.verdict_mix]}


def evaluate(canary: ArmCounts, active: ArmCounts, settings: GuardrailSettings | None = None) -> GuardrailReport:
    """Both guardrails for the arms' counts now."""
    settings = settings or GuardrailSettings()
    failure = compare("failure_rate", (canary.failed, canary.failed + canary.succeeded),
                      (active.failed, active.failed + active.succeeded), tau=FAILURE_TAU, alpha=settings.alpha,
                      tolerance=settings.failure_tolerance, one_sided=True, min_count=settings.min_count)
    mix_alpha = settings.alpha / len(VERDICTS)
    mix = tuple(
        compare(f"verdict_mix.{verdict}", (canary.verdicts.get(verdict, 0), canary.decisions),
                (active.verdicts.get(verdict, 0), active.decisions), tau=MIX_TAU, alpha=mix_alpha,
                tolerance=settings.mix_tolerance, one_sided=False, min_count=settings.min_count)
        for verdict in VERDICTS)
    return GuardrailReport(failure, mix, settings)
