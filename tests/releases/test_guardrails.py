"""The canary guardrails (gate.releases.guardrails): hand-checked values, the false-alarm rate
over simulated A/A canaries looked at after every batch, and the power to catch a real shift."""

from __future__ import annotations

import math
import random

import pytest

from gate.releases.guardrails import ArmCounts, GuardrailSettings, compare, evaluate

STATED_ALPHA = 0.05  # docs/releases.md: "at most alpha = 0.05 per canary" (not the constant, which a test must pin)


def test_nothing_is_judged_before_the_minimum_counts():
    result = compare("failure_rate", (29, 29), (0, 1000), tau=0.05, alpha=0.05, tolerance=0.0, one_sided=True)
    assert result.judged is False and result.tripped is False and result.interval is None


def test_hand_checked_statistic_and_interval():
    # canary 20/100 failed, active 10/100: d = 0.1; pooled p = 30.5/201.
    result = compare("failure_rate", (20, 100), (10, 100), tau=0.05, alpha=0.05, tolerance=0.0, one_sided=True)
    p = 30.5 / 201
    v = p * (1 - p) * (1 / 100 + 1 / 100)
    t2 = 0.05 ** 2
    log_lr = 0.5 * math.log(v / (v + t2)) + 0.01 * t2 / (2 * v * (v + t2))
    radius = math.sqrt(v * (v + t2) / t2 * (2 * math.log(20) + math.log((v + t2) / v)))
    assert result.difference == pytest.approx(0.1)
    assert result.likelihood_ratio == pytest.approx(math.exp(log_lr))
    assert result.interval == pytest.approx((0.1 - radius, 0.1 + radius))
    # The interval and the ratio say the same thing: inside 1/alpha exactly when 0 is inside.
    assert (result.likelihood_ratio < 1 / 0.05) == (result.interval[0] < 0 < result.interval[1])
    assert result.tripped is (result.interval[0] > 0)


def test_a_one_sided_guardrail_never_trips_when_the_canary_is_better():
    result = compare("failure_rate", (0, 500), (200, 500), tau=0.05, alpha=0.05, tolerance=0.0, one_sided=True)
    assert result.judged and result.interval[1] < 0 and result.tripped is False


def test_a_clear_failure_shift_trips_the_failure_guardrail():
    report = evaluate(ArmCounts({"yes": 60}, failed=45, succeeded=15),
                      ArmCounts({"yes": 600}, failed=30, succeeded=570))
    assert report.tripped == ("failure_rate",)
    assert report.to_json()["failure_rate"]["tripped"] is True


def test_a_verdict_mix_shift_beyond_the_tolerance_trips_without_outcomes():
    report = evaluate(ArmCounts({"yes": 10, "review": 90}, 0, 0), ArmCounts({"yes": 900, "review": 100}, 0, 0))
    assert report.tripped == ("verdict_mix",)
    small = evaluate(ArmCounts({"yes": 85, "review": 15}, 0, 0), ArmCounts({"yes": 900, "review": 100}, 0, 0))
    assert small.tripped == ()  # five points of shift is within the ten-point tolerance


def _aa_failure_trip_rate(runs: int, rate: float, batch: int, looks: int, seed: int) -> float:
    rng = random.Random(seed)
    trips = 0
    for _ in range(runs):
        counts = [0, 0, 0, 0]  # canary failed, canary n, active failed, active n
        for _look in range(looks):
            canary_batch, active_batch = batch, batch * 9  # a 10% canary
            counts[0] += sum(rng.random() < rate for _ in range(canary_batch))
            counts[1] += canary_batch
            counts[2] += sum(rng.random() < rate for _ in range(active_batch))
            counts[3] += active_batch
            if compare("failure_rate", (counts[0], counts[1]), (counts[2], counts[3]), tau=0.05, alpha=STATED_ALPHA,
                       tolerance=0.0, one_sided=True).tripped:
                trips += 1
                break
    return trips / runs


def test_the_failure_guardrail_false_alarm_rate_over_aa_canaries_is_at_most_alpha():
    # 300 A/A canaries, each looked at after every batch of 10 canary outcomes, 60 looks (600 canary
    # and 5,400 active outcomes): optional stopping must not push false alarms above alpha.
    observed = _aa_failure_trip_rate(runs=300, rate=0.12, batch=10, looks=60, seed=20261124)
    assert observed <= STATED_ALPHA


def test_the_verdict_mix_false_alarm_rate_over_aa_canaries_is_at_most_alpha_even_without_tolerance():
    rng = random.Random(7)
    shares = (("yes", 0.6), ("review", 0.3), ("no", 0.1))
    settings = GuardrailSettings(mix_tolerance=0.0)
    trips = 0
    runs = 200
    for _ in range(runs):
        canary: dict[str, int] = {}
        active: dict[str, int] = {}
        for _look in range(40):
            for arm, size in ((canary, 10), (active, 90)):
                for _ in range(size):
                    pick, acc = rng.random(), 0.0
                    for verdict, share in shares:
                        acc += share
                        if pick < acc:
                            arm[verdict] = arm.get(verdict, 0) + 1
                            break
            if evaluate(ArmCounts(canary, 0, 0), ArmCounts(active, 0, 0), settings).tripped:
                trips += 1
                break
    assert trips / runs <= STATED_ALPHA


def test_a_real_failure_shift_is_caught_in_most_canaries():
    rng = random.Random(11)
    caught = 0
    for _ in range(100):
        c_f = c_n = a_f = a_n = 0
        for _look in range(30):
            c_f += sum(rng.random() < 0.30 for _ in range(10))
            c_n += 10
            a_f += sum(rng.random() < 0.10 for _ in range(90))
            a_n += 90
            if compare("failure_rate", (c_f, c_n), (a_f, a_n), tau=0.05, alpha=STATED_ALPHA, tolerance=0.0,
                       one_sided=True).tripped:
                caught += 1
                break
    assert caught >= 90
