"""The release rules and the guardrails' defaults, pinned by value (issue 41 items 6 and 8).

Direct tests of the pure modules (gate.releases.model, .guardrails, .figures): every refusal's code
and status, the subject path, the canary bucket, the guardrails' stated defaults (docs/releases.md,
not the constants), the minimum count's boundary, the interval's bound at the extremes and every
member of the evidence. They run in milliseconds, so the mutation suite (scripts/mutation) runs them
first; tests/releases/test_release_guardrails_api.py holds the same rules through HTTP.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import replace

import pytest

from api.errors import ERROR_TABLE
from gate.releases import guardrails, model
from gate.releases.figures import arm_figures, canary_figures, shadow_figures
from gate.releases.guardrails import ArmCounts, GuardrailSettings, compare, evaluate
from gate.releases.model import Action, Canary, Pending, ReleaseRefused, ReleaseState, Version, transition

V1, V2, V3 = Version("v1", "1" * 64), Version("v2", "2" * 64), Version("v3", "3" * 64)
AT = "2026-11-26T00:00:00.000Z"
LATER = "2026-11-27T00:00:00.000Z"

# docs/releases.md, "Canary and guardrails": the stated defaults.
DOC_ALPHA, DOC_MIN_COUNT = 0.05, 30
DOC_FAILURE_TAU, DOC_FAILURE_TOLERANCE = 0.05, 0.0
DOC_MIX_TAU, DOC_MIX_TOLERANCE = 0.10, 0.10


def _radius(events_c: int, n_c: int, events_a: int, n_a: int, tau: float, alpha: float) -> float:
    """The always-valid radius, written out from the module doc's formula with the stated values."""
    pooled = (events_c + events_a + 0.5) / (n_c + n_a + 1)
    v = pooled * (1 - pooled) * (1 / n_c + 1 / n_a)
    return math.sqrt(v * (v + tau ** 2) / tau ** 2 * (2 * math.log(1 / alpha) + math.log((v + tau ** 2) / v)))


def _log_lr(events_c: int, n_c: int, events_a: int, n_a: int, tau: float) -> float:
    pooled = (events_c + events_a + 0.5) / (n_c + n_a + 1)
    v = pooled * (1 - pooled) * (1 / n_c + 1 / n_a)
    d = events_c / n_c - events_a / n_a
    return 0.5 * math.log(v / (v + tau ** 2)) + d * d * tau ** 2 / (2 * v * (v + tau ** 2))


# ---------------------------------------------------------------- the guardrails' defaults


def test_the_stated_defaults_by_value():
    assert (guardrails.ALPHA, guardrails.MIN_COUNT) == (DOC_ALPHA, DOC_MIN_COUNT)
    assert (guardrails.FAILURE_TAU, guardrails.FAILURE_TOLERANCE) == (DOC_FAILURE_TAU, DOC_FAILURE_TOLERANCE)
    assert (guardrails.MIX_TAU, guardrails.MIX_TOLERANCE) == (DOC_MIX_TAU, DOC_MIX_TOLERANCE)
    assert guardrails.VERDICTS == ("yes", "no", "review", "needs_input")
    settings = GuardrailSettings()
    assert (settings.alpha, settings.min_count, settings.failure_tolerance, settings.mix_tolerance) == (
        DOC_ALPHA, DOC_MIN_COUNT, DOC_FAILURE_TOLERANCE, DOC_MIX_TOLERANCE)
    assert settings.to_json() == {
        "method": "msprt_normal_mixture_v1", "alpha": 0.05, "min_count": 30,
        "failure_rate": {"tau": 0.05, "tolerance": 0.0, "false_alarm_rate": 0.05},
        "verdict_mix": {"tau": 0.10, "tolerance": 0.10, "false_alarm_rate": 0.05}}


def test_compare_uses_the_stated_minimum_count_by_default():
    for canary, active, judged in (((0, 30), (0, 30), True), ((0, 29), (0, 30), False), ((0, 30), (0, 29), False),
                                   ((0, 31), (0, 31), True)):
        result = compare("failure_rate", canary, active, tau=0.05, alpha=0.05, tolerance=0.0, one_sided=True)
        assert result.judged is judged, (canary, active)
        assert (result.interval is None, result.difference is None, result.likelihood_ratio is None) == (
            (not judged,) * 3)


def test_the_default_settings_judge_at_thirty_an_arm_and_not_at_twenty_nine():
    healthy = ArmCounts({"yes": 30}, failed=3, succeeded=27)
    young = ArmCounts({"yes": 29}, failed=3, succeeded=26)
    report = evaluate(healthy, healthy)
    assert report.failure_rate.judged and all(c.judged for c in report.verdict_mix)
    assert report.tripped == ()
    report = evaluate(young, healthy)
    assert not report.failure_rate.judged and not any(c.judged for c in report.verdict_mix)
    report = evaluate(healthy, young)
    assert not report.failure_rate.judged and not any(c.judged for c in report.verdict_mix)


def test_a_healthy_canary_past_its_minimum_holds_under_the_defaults():
    # Equal failure rates (10%) and verdict mixes, far past 30 an arm: nothing trips.
    canary = ArmCounts({"yes": 80, "review": 20}, failed=8, succeeded=72)
    active = ArmCounts({"yes": 800, "review": 200}, failed=80, succeeded=720)
    report = evaluate(canary, active)
    assert report.tripped == () and report.failure_rate.judged
    failure = report.failure_rate
    assert failure.alpha == 0.05 and failure.tolerance == 0.0 and failure.tripped is False
    radius = _radius(8, 80, 80, 800, DOC_FAILURE_TAU, DOC_ALPHA)
    assert failure.difference == pytest.approx(0.0, abs=1e-12)
    assert failure.interval == pytest.approx((-radius, radius), rel=1e-12)
    assert failure.likelihood_ratio == pytest.approx(math.exp(_log_lr(8, 80, 80, 800, DOC_FAILURE_TAU)), rel=1e-12)


def test_the_verdict_mix_uses_its_stated_tau_and_a_quarter_of_alpha_each():
    canary = ArmCounts({"yes": 60, "review": 40}, 0, 0)
    active = ArmCounts({"yes": 700, "review": 300}, 0, 0)
    report = evaluate(canary, active)
    by_name = {c.name: c for c in report.verdict_mix}
    assert list(by_name) == ["verdict_mix.yes", "verdict_mix.no", "verdict_mix.review", "verdict_mix.needs_input"]
    yes = by_name["verdict_mix.yes"]
    radius = _radius(60, 100, 700, 1000, DOC_MIX_TAU, DOC_ALPHA / 4)
    assert yes.alpha == pytest.approx(0.0125) and yes.tolerance == 0.10
    assert yes.canary == (60, 100) and yes.active == (700, 1000)
    assert yes.interval == pytest.approx((-0.1 - radius, -0.1 + radius), rel=1e-12)
    assert yes.likelihood_ratio == pytest.approx(math.exp(_log_lr(60, 100, 700, 1000, DOC_MIX_TAU)), rel=1e-12)
    review = by_name["verdict_mix.review"]
    assert review.canary == (40, 100) and review.active == (300, 1000)
    assert by_name["verdict_mix.no"].canary == (0, 100) and by_name["verdict_mix.no"].active == (0, 1000)
    # The failure guardrail has no resolved outcomes here: it is not judged.
    assert report.failure_rate.canary == (0, 0) and report.failure_rate.judged is False


def test_the_failure_guardrail_trips_only_beyond_zero():
    worse = compare("failure_rate", (15, 100), (50, 1000), tau=0.05, alpha=0.05, tolerance=0.0, one_sided=True)
    assert worse.interval[0] > 0 and worse.tripped is True
    better = compare("failure_rate", (5, 1000), (50, 100), tau=0.05, alpha=0.05, tolerance=0.0, one_sided=True)
    assert better.interval[1] < 0 and better.tripped is False
    two_sided = compare("verdict_mix.yes", (5, 1000), (50, 100), tau=0.1, alpha=0.0125, tolerance=0.1, one_sided=False)
    assert two_sided.interval[1] < -0.1 and two_sided.tripped is True


# ---------------------------------------------------------------- the interval's bound (item 6)


def test_all_failures_in_the_canary_and_none_in_the_active_arm_end_the_interval_at_plus_one():
    result = compare("failure_rate", (30, 30), (0, 60), tau=0.05, alpha=0.05, tolerance=0.0, one_sided=True)
    radius = _radius(30, 30, 0, 60, 0.05, 0.05)
    assert radius > 0.4  # unclipped, the interval would reach about +149%
    assert result.difference == 1.0
    assert result.interval == (pytest.approx(1.0 - radius, rel=1e-12), 1.0)
    assert result.tripped is True
    assert result.to_json()["interval"] == [round(1.0 - radius, 6), 1.0]


def test_no_failures_in_the_canary_and_all_in_the_active_arm_start_the_interval_at_minus_one():
    result = compare("failure_rate", (0, 30), (60, 60), tau=0.05, alpha=0.05, tolerance=0.0, one_sided=True)
    radius = _radius(0, 30, 60, 60, 0.05, 0.05)
    assert result.difference == -1.0
    assert result.interval == (-1.0, pytest.approx(-1.0 + radius, rel=1e-12))
    assert result.tripped is False  # a better canary never trips the one-sided guardrail
    mix = compare("verdict_mix.no", (0, 30), (60, 60), tau=0.1, alpha=0.0125, tolerance=0.1, one_sided=False)
    assert mix.interval[0] == -1.0 and -1.0 <= mix.interval[1] <= 1.0 and mix.tripped is True


@pytest.mark.parametrize(("canary", "active"), [((30, 30), (0, 30)), ((0, 30), (30, 30)), ((500, 500), (0, 500)),
                                                ((0, 31), (0, 31)), ((31, 31), (31, 31)), ((1, 30), (29, 30))])
def test_every_interval_lies_within_the_possible_range(canary, active):
    for tau, alpha, one_sided in ((0.05, 0.05, True), (0.1, 0.0125, False)):
        result = compare("x", canary, active, tau=tau, alpha=alpha, tolerance=0.0, one_sided=one_sided)
        low, high = result.interval
        assert -1.0 <= low <= result.difference <= high <= 1.0


# ---------------------------------------------------------------- the evidence's members


def test_a_comparison_states_every_member_exactly():
    result = compare("failure_rate", (12, 40), (30, 300), tau=0.05, alpha=0.05, tolerance=0.0, one_sided=True)
    radius = _radius(12, 40, 30, 300, 0.05, 0.05)
    assert result.to_json() == {
        "name": "failure_rate",
        "canary": {"events": 12, "n": 40},
        "active": {"events": 30, "n": 300},
        "difference": round(0.2, 6),
        "interval": [round(0.2 - radius, 6), round(0.2 + radius, 6)],
        "likelihood_ratio": round(math.exp(_log_lr(12, 40, 30, 300, 0.05)), 6),
        "alpha": 0.05,
        "tolerance": 0.0,
        "judged": True,
        "tripped": result.interval[0] > 0,
    }
    young = compare("failure_rate", (1, 2), (3, 4), tau=0.05, alpha=0.05, tolerance=0.0, one_sided=True)
    assert young.to_json() == {"name": "failure_rate", "canary": {"events": 1, "n": 2},
                               "active": {"events": 3, "n": 4}, "difference": None, "interval": None,
                               "likelihood_ratio": None, "alpha": 0.05, "tolerance": 0.0, "judged": False,
                               "tripped": False}


def test_the_report_names_what_tripped_and_holds_every_comparison():
    report = evaluate(ArmCounts({"yes": 10, "review": 90}, failed=45, succeeded=15),
                      ArmCounts({"yes": 900, "review": 100}, failed=30, succeeded=570))
    assert report.tripped == ("failure_rate", "verdict_mix")
    body = report.to_json()
    assert list(body) == ["settings", "tripped", "failure_rate", "verdict_mix"]
    assert body["tripped"] == ["failure_rate", "verdict_mix"]
    assert body["settings"] == GuardrailSettings().to_json()
    assert body["failure_rate"] == report.failure_rate.to_json()
    assert body["failure_rate"]["canary"] == {"events": 45, "n": 60}
    assert body["failure_rate"]["active"] == {"events": 30, "n": 600}
    assert [c["name"] for c in body["verdict_mix"]] == [f"verdict_mix.{v}" for v in guardrails.VERDICTS]
    assert body["verdict_mix"][2]["canary"] == {"events": 90, "n": 100}
    only_mix = evaluate(ArmCounts({"yes": 10, "review": 90}, 0, 0), ArmCounts({"yes": 900, "review": 100}, 0, 0))
    assert only_mix.tripped == ("verdict_mix",)
    only_failure = evaluate(ArmCounts({"yes": 60}, 45, 15), ArmCounts({"yes": 600}, 30, 570))
    assert only_failure.tripped == ("failure_rate",)


def test_an_arm_counts_its_decisions_over_every_verdict():
    assert ArmCounts({"yes": 3, "no": 4, "review": 5}, 1, 2).decisions == 12
    assert ArmCounts({}, 0, 0).decisions == 0


# ---------------------------------------------------------------- figures


def test_arm_and_canary_figures_exactly():
    canary, active = ArmCounts({"yes": 3, "review": 1}, 1, 2), ArmCounts({"yes": 40}, 0, 10)
    figures = arm_figures("canary", canary)
    assert figures["arm"] == "canary" and figures["decisions"] == 4 and figures["resolved_outcomes"] == 3
    assert figures["verdict_mix"]["yes"]["events"] == 3 and figures["verdict_mix"]["yes"]["n"] == 4
    assert figures["verdict_mix"]["yes"]["rate"] == 0.75
    assert figures["verdict_mix"]["needs_input"] == {"events": 0, "n": 4, "rate": 0.0,
                                                     "interval_95": figures["verdict_mix"]["needs_input"]["interval_95"]}
    assert list(figures["verdict_mix"]) == list(guardrails.VERDICTS)
    assert figures["failure_rate"]["events"] == 1 and figures["failure_rate"]["n"] == 3
    assert figures["failure_rate"]["rate"] == round(1 / 3, 6)
    assert arm_figures("active", ArmCounts({}, 0, 0))["failure_rate"] == {"events": 0, "n": 0, "rate": None,
                                                                          "interval_95": None}
    report = evaluate(canary, active)
    both = canary_figures(canary, active, report)
    assert [a["arm"] for a in both["arms"]] == ["active", "canary"]
    assert both["arms"][0]["decisions"] == 40 and both["guardrails"] == report.to_json()


def test_shadow_figures_exactly():
    rows = [{"verdict": "yes", "shadow_verdict": "yes", "effect": None},
            {"verdict": "yes", "shadow_verdict": "review", "effect": "failure"},
            {"verdict": "yes", "shadow_verdict": "review", "effect": "success"},
            {"verdict": "yes", "shadow_verdict": "review", "effect": "open"},
            {"verdict": "no", "shadow_verdict": "yes", "effect": None},
            {"verdict": "yes", "shadow_verdict": "yes", "effect": "failure"},
            {"verdict": "yes", "shadow_verdict": "review", "effect": "failure"}]
    figures = shadow_figures(rows)
    assert list(figures) == ["decisions", "agreement", "transitions", "flips", "note"]
    assert figures["decisions"] == 7
    assert {k: figures["agreement"][k] for k in ("events", "n", "rate")} == {"events": 2, "n": 7,
                                                                            "rate": round(2 / 7, 6)}
    assert figures["transitions"] == [{"live": "no", "shadow": "yes", "n": 1}, {"live": "yes", "shadow": "review", "n": 4},
                                      {"live": "yes", "shadow": "yes", "n": 2}]
    flips = figures["flips"]
    assert [(f["live"], f["shadow"], f["n"], f["failed"], f["succeeded"], f["open_or_unreported"]) for f in flips] == [
        ("no", "yes", 1, 0, 0, 1), ("yes", "review", 4, 2, 1, 1)]
    assert {k: flips[1]["failure_rate"][k] for k in ("events", "n", "rate")} == {"events": 2, "n": 3,
                                                                                "rate": round(2 / 3, 6)}
    assert shadow_figures([])["agreement"]["rate"] is None


# ---------------------------------------------------------------- the state machine's refusals


def _act(name: str, version: Version | None = None, actor: str = "key-a", **kw) -> Action:
    return Action(name, actor, AT, version, **kw)


ACTIVE = ReleaseState("rb", seq=1, head_event_hash="a" * 64, active=V1)


def _refusal(state: ReleaseState, action: Action) -> tuple[str, int]:
    with pytest.raises(ReleaseRefused) as caught:
        transition(state, action, state.seq + 1)
    assert str(caught.value) == caught.value.message and caught.value.message
    return caught.value.code, caught.value.status


REFUSALS = [
    ("unknown action", ACTIVE, _act("launch", V2), ("RELEASE_ACTION_INVALID", 400)),
    ("activate without a version", ACTIVE, _act("activate"), ("RELEASE_ACTION_INVALID", 400)),
    ("canary without a percent", ACTIVE, _act("canary", V2), ("RELEASE_ACTION_INVALID", 400)),
    ("canary at 0", ACTIVE, _act("canary", V2, percent=0), ("RELEASE_ACTION_INVALID", 400)),
    ("canary at 100", ACTIVE, _act("canary", V2, percent=100), ("RELEASE_ACTION_INVALID", 400)),
    ("canary percent with three decimals", ACTIVE, _act("canary", V2, percent=10.001), ("RELEASE_ACTION_INVALID", 400)),
    ("shadow of the active version", ACTIVE, _act("shadow", V1), ("RELEASE_TRANSITION_REFUSED", 409)),
    ("canary of the active version", ACTIVE, _act("canary", V1, percent=10), ("RELEASE_TRANSITION_REFUSED", 409)),
    ("canary without an active version", ReleaseState("rb"), _act("canary", V2, percent=10),
     ("RULEBOOK_NOT_ACTIVE", 409)),
    ("halt with nothing running", ACTIVE, _act("halt"), ("RELEASE_NOTHING_TO_HALT", 409)),
    ("rollback without an earlier version", ACTIVE, _act("rollback"), ("RELEASE_NOTHING_TO_ROLL_BACK", 409)),
    ("approve of no request", ACTIVE, _act("approve", V2, request_seq=9), ("RELEASE_APPROVAL_NOT_FOUND", 404)),
]


@pytest.mark.parametrize(("what", "state", "action", "expected"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_every_refusal_has_its_code_and_status(what, state, action, expected):
    code, status = _refusal(state, action)
    assert (code, status) == expected
    assert ERROR_TABLE[code][0] == status  # the HTTP status the API answers for the same code


def _pending(action: str = "activate", version: Version = V2, by: str = "key-a", expires: str = LATER,
             seq: int = 2, percent: float | None = None) -> ReleaseState:
    request = Pending(seq, action, version, percent, "context.source_record_id" if action == "canary" else None,
                      by, expires)
    return ReleaseState("rb", seq=seq, head_event_hash="b" * 64, active=V1, pending=(request,))


def test_approval_refusals_and_what_an_approval_applies():
    state = _pending()
    assert _refusal(state, _act("approve", V2, actor="key-a", request_seq=2)) == ("RELEASE_SELF_APPROVAL", 403)
    # Another version than the requested one, with that version's own correct hash: refused.
    assert _refusal(state, _act("approve", V3, actor="key-b", request_seq=2)) == ("RELEASE_APPROVAL_MISMATCH", 409)
    assert _refusal(state, _act("approve", Version("v2", "9" * 64), actor="key-b", request_seq=2)) == (
        "RELEASE_APPROVAL_MISMATCH", 409)
    assert _refusal(state, _act("approve", None, actor="key-b", request_seq=2)) == ("RELEASE_APPROVAL_MISMATCH", 409)
    for code in ("RELEASE_SELF_APPROVAL", "RELEASE_APPROVAL_MISMATCH"):
        assert ERROR_TABLE[code][0] == {"RELEASE_SELF_APPROVAL": 403, "RELEASE_APPROVAL_MISMATCH": 409}[code]
    after = transition(state, _act("approve", V2, actor="key-b", request_seq=2), 3)
    assert after.active == V2 and after.previous == (V1,) and after.pending == ()
    # An expired request is gone: not found.
    late = Action("approve", "key-b", "2026-11-28T00:00:00.000Z", V2, request_seq=2)
    assert _refusal(state, late) == ("RELEASE_APPROVAL_NOT_FOUND", 404)


def test_a_request_expires_at_its_expiry_instant():
    state = _pending(expires=AT)
    at_expiry = Action("approve", "key-b", AT, V2, request_seq=2)
    assert _refusal(state, at_expiry) == ("RELEASE_APPROVAL_NOT_FOUND", 404)
    just_before = Action("approve", "key-b", "2026-11-25T23:59:59.999Z", V2, request_seq=2)
    assert transition(state, just_before, 3).active == V2


def test_an_approved_canary_starts_with_the_requested_percent_and_subject():
    state = _pending("canary", V2, percent=12.5)
    after = transition(state, _act("approve", V2, actor="key-b", request_seq=2), 3)
    assert after.canary == Canary(V2, 12.5, "context.source_record_id", 3) and after.active == V1
    assert after.pending == ()
    requested = transition(ACTIVE, _act("canary", V2, percent=7, subject="context.inputs.account",
                                        approval_expires_at=LATER), 2)
    approved = transition(requested, _act("approve", V2, actor="key-b", request_seq=2), 3)
    assert approved.canary == Canary(V2, 7, "context.inputs.account", 3)


def test_a_request_needing_approval_is_checked_first_and_only_pends():
    expiring = {"approval_expires_at": LATER}
    assert _refusal(ACTIVE, _act("canary", V1, percent=10, **expiring)) == ("RELEASE_TRANSITION_REFUSED", 409)
    assert _refusal(ACTIVE, _act("canary", V2, percent=0, **expiring)) == ("RELEASE_ACTION_INVALID", 400)
    assert _refusal(ACTIVE, _act("activate", None, **expiring)) == ("RELEASE_ACTION_INVALID", 400)
    # The percent is checked before the state: an invalid share is 400 even without an active version.
    assert _refusal(ReleaseState("rb"), _act("canary", V2, percent=0, **expiring)) == ("RELEASE_ACTION_INVALID", 400)
    assert _refusal(ReleaseState("rb"), _act("canary", V2, percent=5, **expiring)) == ("RULEBOOK_NOT_ACTIVE", 409)
    after = transition(ACTIVE, _act("canary", V2, percent=5, subject="context.inputs.account", **expiring), 2)
    assert after.canary is None and after.active == V1
    assert after.pending == (Pending(2, "canary", V2, 5, "context.inputs.account", "key-a", LATER),)
    after = transition(ACTIVE, _act("activate", V2, **expiring), 2)
    assert after.active == V1 and after.pending == (Pending(2, "activate", V2, None, None, "key-a", LATER),)


def test_the_allowed_transitions_state_exactly():
    canary = transition(ACTIVE, _act("canary", V2, percent=10), 2)
    assert canary.canary == Canary(V2, 10, model.DEFAULT_SUBJECT, 2)
    assert model.DEFAULT_SUBJECT == "context.source_record_id"
    shadowed = transition(canary, _act("shadow", V3), 3)
    assert shadowed.shadow == V3 and shadowed.canary == canary.canary
    promoted = transition(shadowed, _act("activate", V2), 4)
    assert promoted.active == V2 and promoted.previous == (V1,) and promoted.canary is None and promoted.shadow == V3
    again = transition(promoted, _act("activate", V2), 5)
    assert again.previous == (V1,)  # re-activating the active version adds no previous
    halted = transition(shadowed, _act("halt"), 4)
    assert halted.canary is None and halted.shadow is None and halted.active == V1
    rolled = transition(promoted, _act("rollback"), 5)
    assert rolled.active == V1 and rolled.previous == () and rolled.canary is None and rolled.shadow is None
    canary_rolled = transition(transition(promoted, _act("canary", V3, percent=5), 5), _act("rollback"), 6)
    assert canary_rolled.canary is None and canary_rolled.active == V1
    twice = transition(transition(promoted, _act("activate", V3), 5), _act("rollback"), 6)
    assert twice.active == V2 and twice.previous == (V1,)
    shadow_only = transition(ACTIVE, _act("shadow", V2), 2)
    assert transition(shadow_only, _act("halt"), 3).shadow is None
    kept = transition(shadowed, _act("activate", V3), 4)
    assert kept.shadow is None and kept.canary == canary.canary


def test_a_canary_share_may_be_any_basis_point_strictly_between_0_and_100():
    for percent in (0.01, 0.5, 1, 12.34, 99.99):
        assert transition(ACTIVE, _act("canary", V2, percent=percent), 2).canary.percent == percent
    for percent in (-1, 0, 100, 100.5, 0.001, 12.345):
        assert _refusal(ACTIVE, _act("canary", V2, percent=percent)) == ("RELEASE_ACTION_INVALID", 400), percent


def test_previous_versions_are_capped():
    assert model.MAX_PREVIOUS == 50
    state = ReleaseState("rb")
    for index in range(60):
        state = transition(state, _act("activate", Version(f"v{index}", f"{index:064x}")), index + 1)
    assert len(state.previous) == 50 and state.previous[0].version == "v9" and state.previous[-1].version == "v58"


# ---------------------------------------------------------------- subjects and buckets


def test_the_subject_is_read_at_its_dotted_path():
    request = {"context": {"source_record_id": "order-1", "n": 7, "x": 1.5, "flag": True, "obj": {"a": 1},
                           "none": None}}
    assert model.subject_value(request, "context.source_record_id", "fb") == "order-1"
    assert model.subject_value(request, "context.n", "fb") == "7"
    assert model.subject_value(request, "context.x", "fb") == "1.5"
    for path in ("context.flag", "context.obj", "context.none", "context.missing", "missing.path",
                 "context.source_record_id.deeper"):
        assert model.subject_value(request, path, "fb") == "fb", path


def test_the_canary_bucket_is_the_stated_hash_and_the_share_is_strict():
    digest = hashlib.sha256("\x1f".join(("s", "rb", "v2", "order-1")).encode()).digest()
    bucket = int.from_bytes(digest[:8], "big") % 10_000
    assert model.BUCKETS == 10_000
    assert model.canary_bucket("s", "rb", "v2", "order-1") == bucket
    at = Canary(V2, bucket / 100, "context.source_record_id", 2)
    above = Canary(V2, (bucket + 1) / 100, "context.source_record_id", 2)
    assert model.in_canary(at, "s", "rb", "order-1") is False
    assert model.in_canary(above, "s", "rb", "order-1") is True


def test_the_state_states_every_member():
    pending = Pending(3, "canary", V2, 5.0, "context.x", "key-a", LATER)
    state = ReleaseState("rb", 4, "c" * 64, V1, (V3,), V3, Canary(V2, 10, "context.x", 2), (pending,))
    assert state.to_json() == {
        "rulebook_id": "rb", "seq": 4, "head_event_hash": "c" * 64,
        "active": {"version": "v1", "rulebook_hash": "1" * 64},
        "previous": [{"version": "v3", "rulebook_hash": "3" * 64}],
        "shadow": {"version": "v3", "rulebook_hash": "3" * 64},
        "canary": {"version": "v2", "rulebook_hash": "2" * 64, "percent": 10, "subject": "context.x", "since_seq": 2},
        "pending": [{"request_seq": 3, "action": "canary", "version": "v2", "rulebook_hash": "2" * 64,
                     "percent": 5.0, "subject": "context.x", "requested_by": "key-a", "expires_at": LATER}],
    }
    assert state.versions_in_use() == ("v1", "v3", "v2")
    assert ReleaseState("rb").to_json()["active"] is None and ReleaseState("rb").versions_in_use() == ()


# ---------------------------------------------------------------- edges of the guardrails


def test_a_guardrail_trips_only_when_the_interval_lies_strictly_beyond_its_tolerance():
    base = compare("failure_rate", (15, 100), (50, 1000), tau=0.05, alpha=0.05, tolerance=0.0, one_sided=True)
    low, _ = base.interval
    at_low = compare("failure_rate", (15, 100), (50, 1000), tau=0.05, alpha=0.05, tolerance=low, one_sided=True)
    assert at_low.tripped is False
    two = compare("verdict_mix.no", (15, 100), (50, 1000), tau=0.05, alpha=0.05, tolerance=low, one_sided=False)
    assert two.interval == base.interval and two.tripped is False
    fell = compare("verdict_mix.yes", (50, 1000), (15, 100), tau=0.05, alpha=0.05, tolerance=0.0, one_sided=False)
    at_high = compare("verdict_mix.yes", (50, 1000), (15, 100), tau=0.05, alpha=0.05, tolerance=-fell.interval[1],
                      one_sided=False)
    assert fell.tripped is True and at_high.tripped is False


def test_the_likelihood_ratio_is_capped_at_e_to_the_700():
    huge = compare("failure_rate", (5000, 10000), (0, 10000), tau=0.05, alpha=0.05, tolerance=0.0, one_sided=True)
    assert _log_lr(5000, 10000, 0, 10000, 0.05) > 700
    assert huge.likelihood_ratio == math.exp(700.0)


def test_the_failure_guardrail_is_one_sided_and_named_in_the_report():
    better = evaluate(ArmCounts({"yes": 100}, failed=0, succeeded=100), ArmCounts({"yes": 1000}, failed=500,
                                                                                 succeeded=500))
    assert better.failure_rate.name == "failure_rate" and better.failure_rate.judged
    assert better.failure_rate.interval[1] < 0 and better.failure_rate.tripped is False and better.tripped == ()
    assert better.to_json()["failure_rate"]["name"] == "failure_rate"


def test_the_verdict_mix_is_two_sided():
    # The approvals' share falls by 30 points, spread over the three other verdicts (10 points each).
    canary = ArmCounts({"yes": 700, "no": 100, "review": 100, "needs_input": 100}, 0, 0)
    report = evaluate(canary, ArmCounts({"yes": 1000}, 0, 0))
    assert report.tripped == ("verdict_mix",)
    assert [c.name for c in report.verdict_mix if c.tripped] == ["verdict_mix.yes"]


def test_the_settings_minimum_count_reaches_both_guardrails():
    arm = ArmCounts({"yes": 40}, failed=4, succeeded=36)
    report = evaluate(arm, arm, GuardrailSettings(min_count=50))
    assert not report.failure_rate.judged and not any(c.judged for c in report.verdict_mix)
    report = evaluate(arm, arm, GuardrailSettings(min_count=40))
    assert report.failure_rate.judged and all(c.judged for c in report.verdict_mix)
    assert report.to_json()["settings"]["min_count"] == 40


def test_approvals_count_holders_not_keys():
    """Issue 52: a request states its key's holder; a second key of that holder is the same approver."""
    ann = "person:https://id.example#ann"
    asked = transition(ACTIVE, _act("activate", V2, actor="key-a", approval_expires_at=LATER, holder=ann), 2)
    assert asked.pending[0].requested_holder == ann
    assert asked.pending[0].to_json()["requested_holder"] == ann
    state = replace(asked, seq=2)
    assert _refusal(state, _act("approve", V2, actor="key-b", request_seq=2, holder=ann)) == ("RELEASE_SELF_APPROVAL", 403)
    assert transition(state, _act("approve", V2, actor="key-b", request_seq=2, holder="service:b"), 3).active == V2
    assert transition(state, _act("approve", V2, actor="key-b", request_seq=2), 3).active == V2  # key:key-b
    # A request of a key with none stated: its own holder, key:<id>; its JSON says nothing new.
    bare = _pending()
    assert "requested_holder" not in bare.pending[0].to_json() and bare.pending[0].requested_holder is None
    assert transition(bare, _act("approve", V2, actor="key-b", request_seq=2, holder="service:x"), 3).active == V2
    assert _refusal(bare, _act("approve", V2, actor="key-a", request_seq=2)) == ("RELEASE_SELF_APPROVAL", 403)
    # The operator's key (holder operator:ops) is the operator.
    ops = replace(transition(ACTIVE, _act("activate", V2, actor="operator:ops", approval_expires_at=LATER), 2), seq=2)
    assert _refusal(ops, _act("approve", V2, actor="key-b", request_seq=2, holder="operator:ops")) == (
        "RELEASE_SELF_APPROVAL", 403)
    with pytest.raises(ReleaseRefused) as caught:
        transition(state, _act("approve", V2, actor="key-b", request_seq=2, holder=ann), 3)
    assert caught.value.message == "an identity cannot approve its own request (nor another key of the same holder)"
