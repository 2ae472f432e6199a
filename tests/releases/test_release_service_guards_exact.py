"""gate/services/releases.py called directly, the decide side and the guards pinned by value:
routing a decide by reference, the release row and arm block a decide leaves, the shadow beside
it, superseded inline decides, the canary guardrails and the halt they cause, the alerts, an
admin's override of a guardrail halt and the dry-run a scope's policy asks for. (The transitions
and the policy: test_release_service_exact.py.)"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, timedelta
from typing import Any

import pytest

from gate.errors import GateError
from gate.keys.anchors import TrustAnchors
from gate.principals import Principal
from gate.protocol.canonical import sha256_hex
from gate.releases.figures import canary_figures, shadow_figures
from gate.releases.guardrails import ArmCounts, evaluate
from gate.releases.model import Version, canary_bucket
from gate.services import release_moves as moves_module
from gate.services import release_routing as routing_module
from gate.services.release_guards import GUARD_EVERY
from gate.services.release_routing import Observed, Routed
from tests.releases.service_support import (
    EVERY_RIGHT,
    KEY_A,
    KEY_B,
    RULEBOOK_ID,
    SCOPE,
    START,
    World,
    build_world,
    two_versions,
)
from tests.releases.support import by_reference, version

H64 = "a" * 64


@pytest.fixture
def world(database_url, tmp_path):
    built = build_world(database_url, tmp_path)
    yield built
    built.releases.guardrails.guard.stop()
    built.ledger.dispose()


def _refusal(call, code: str) -> GateError:
    with pytest.raises(GateError) as refused:
        call()
    assert refused.value.code == code, (refused.value.code, refused.value.message)
    return refused.value


def _no_prior(rulebook_id: str) -> str | None:
    raise AssertionError("a decide without an idempotency key has no earlier version")


def _canary(world: World, percent: float = 50, subject: str | None = None) -> dict[str, str]:
    hashes = two_versions(world)
    world.act("activate", version="v1")
    world.act("canary", version="v2", percent=percent, **({"subject": subject} if subject else {}))
    return hashes


def _subject_in(arm: str, percent: float = 50, canary_version: str = "v2") -> str:
    """A subject the canary of `canary_version` at `percent` puts in `arm`."""
    for n in range(1000):
        subject = f"order-{n}"
        inside = canary_bucket(SCOPE, RULEBOOK_ID, canary_version, subject) < round(percent * 100)
        if inside is (arm == "canary"):
            return subject
    raise AssertionError("no such subject")


# ------------------------------------------------------------------ route


@pytest.mark.parametrize("ref", [{"rulebook_id": 7}, {"rulebook_id": RULEBOOK_ID, "version": 3},
                                 {"rulebook_id": RULEBOOK_ID, "extra": True}, RULEBOOK_ID, None, {}])
def test_a_malformed_reference_is_refused(world: World, ref):
    _canary(world)
    body = {**by_reference(), "rulebook_ref": ref}
    _refusal(lambda: world.releases.router.route(world.caller(), body, None, _no_prior), "RULEBOOK_REF_INVALID")


def test_a_reference_beside_an_inline_rulebook_is_refused(world: World):
    _canary(world)
    body = {**by_reference(), "rulebook": version("v1")}
    _refusal(lambda: world.releases.router.route(world.caller(), body, None, _no_prior), "RULEBOOK_REF_INVALID")


def test_a_reference_routes_to_the_active_version_as_its_inline_request(world: World):
    hashes = two_versions(world)
    world.act("activate", version="v1")
    world.act("activate", version="v2")
    body = by_reference(subject="order-1")
    request, routed = world.releases.router.route(world.caller(), body, None, _no_prior)
    assert routed == Routed(RULEBOOK_ID, "v2", "active", 2, None)
    assert request == {**{k: v for k, v in body.items() if k != "rulebook_ref"},
                       "rulebook": version("v2", approve_limit=10)}
    assert "rulebook_ref" in body  # the caller's body is left as it was
    again, _routed = world.releases.router.route(world.caller(), body, None, _no_prior)
    assert again["rulebook"] == request["rulebook"] and again["rulebook"] is not request["rulebook"]  # a fresh parse
    assert sha256_hex(request["rulebook"]) == hashes["v2"]


def test_a_reference_without_an_active_version_fails_closed(world: World):
    _refusal(lambda: world.releases.router.route(world.caller(), by_reference(), None, _no_prior), "RULEBOOK_NOT_FOUND")
    two_versions(world)
    refused = _refusal(lambda: world.releases.router.route(world.caller(), by_reference(), None, _no_prior),
                       "RULEBOOK_NOT_ACTIVE")
    assert "'pricing_exception'" in refused.message
    request, routed = world.releases.router.route(world.caller(), by_reference(version_name="v1"), None, _no_prior)
    assert routed == Routed(RULEBOOK_ID, "v1", "pinned", 0, None) and request["rulebook"] == version("v1")
    missing = _refusal(lambda: world.releases.router.route(world.caller(), by_reference(version_name="v9"), None, _no_prior),
                       "RULEBOOK_NOT_FOUND")
    assert "'v9'" in missing.message
    _refusal(lambda: world.releases.router.route(world.caller(scope="other"), by_reference(version_name="v1"), None,
                                          _no_prior), "RULEBOOK_NOT_FOUND")


def test_a_retry_under_an_idempotency_key_replays_in_the_version_it_ran(world: World):
    _canary(world)
    asked = []

    def prior(rulebook_id: str) -> str | None:
        asked.append(rulebook_id)
        return "v1" if len(asked) == 1 else None

    subject = _subject_in("canary")
    _request, routed = world.releases.router.route(world.caller(), by_reference(subject=subject), "idem-1", prior)
    assert routed == Routed(RULEBOOK_ID, "v1", "replayed", 2, None) and asked == [RULEBOOK_ID]
    _request, routed = world.releases.router.route(world.caller(), by_reference(subject=subject), "idem-2", prior)
    assert routed == Routed(RULEBOOK_ID, "v2", "canary", 2, sha256_hex(subject))
    assert asked == [RULEBOOK_ID, RULEBOOK_ID]


def test_the_version_a_key_ran_is_read_from_the_ledger_by_default(world: World):
    _canary(world)
    subject = _subject_in("canary")
    first = world.decisions.decide(world.caller(), by_reference(subject=subject), idempotency_key="idem-1")
    assert first.record["policy_version"] == "v2" and first.record["release_arm"]["arm"] == "canary"
    assert world.releases.router.prior_version(SCOPE, "idem-1", RULEBOOK_ID) == "v2"
    assert world.releases.router.prior_version(SCOPE, "idem-1", "another_rulebook") is None
    assert world.releases.router.prior_version(SCOPE, "idem-2", RULEBOOK_ID) is None
    assert world.releases.router.prior_version(SCOPE, None, RULEBOOK_ID) is None
    assert world.releases.router.prior_version("other", "idem-1", RULEBOOK_ID) is None
    world.act("halt")  # the canary ends: a new decide of this subject runs v1
    _request, routed = world.releases.router.route(world.caller(), by_reference(subject=subject), "idem-1")
    assert routed.version == "v2" and routed.arm == "replayed"
    _request, routed = world.releases.router.route(world.caller(), by_reference(subject=subject), "idem-3")
    assert routed.version == "v1" and routed.arm == "active"


def test_a_canary_splits_subjects_by_their_hash_and_falls_back_to_the_request_hash(world: World):
    _canary(world)
    inside, outside = _subject_in("canary"), _subject_in("active")
    _request, routed = world.releases.router.route(world.caller(), by_reference(subject=inside), None, _no_prior)
    assert routed == Routed(RULEBOOK_ID, "v2", "canary", 2, sha256_hex(inside))
    _request, routed = world.releases.router.route(world.caller(), by_reference(subject=outside), None, _no_prior)
    assert routed == Routed(RULEBOOK_ID, "v1", "active", 2, sha256_hex(outside))
    body = by_reference()
    body["context"] = {k: v for k, v in body["context"].items() if k != "source_record_id"}
    _request, routed = world.releases.router.route(world.caller(), body, None, _no_prior)
    assert routed.subject_hash == sha256_hex(sha256_hex(body))
    _request, pinned = world.releases.router.route(world.caller(), by_reference(version_name="v2", subject=inside), None,
                                            _no_prior)
    assert pinned == Routed(RULEBOOK_ID, "v2", "pinned", 2, None)


def test_a_canary_reads_its_subject_at_its_own_path(world: World):
    _canary(world, subject="context.workflow")
    body = by_reference(subject=_subject_in("canary"))
    _request, routed = world.releases.router.route(world.caller(), body, None, _no_prior)
    assert routed.subject_hash == sha256_hex("billing_discount_gate")
    assert routed.arm == ("canary" if canary_bucket(SCOPE, RULEBOOK_ID, "v2", "billing_discount_gate") < 5000
                          else "active")


def test_routing_reads_the_cached_state(world: World):
    two_versions(world)
    world.act("activate", version="v1")
    world.releases.router.route(world.caller(), by_reference(), None, _no_prior)
    world.another_worker().act(SCOPE, KEY_A, EVERY_RIGHT, RULEBOOK_ID, {"action": "activate", "version": "v2"})
    _request, routed = world.releases.router.route(world.caller(), by_reference(), None, _no_prior)
    assert (routed.version, routed.release_seq) == ("v1", 1)  # within the worker's cache bound


# ------------------------------------------------------------------ inline decides of a released id


def test_an_inline_decide_of_a_superseded_version_says_so_or_is_refused(world: World):
    hashes = two_versions(world)
    v1, v2 = version("v1"), version("v2", approve_limit=10)
    assert world.releases.router.check_inline(SCOPE, v1, hashes["v1"]) == ()  # no release yet
    assert world.releases.router.check_inline(SCOPE, {"rulebook_id": 7}, "h") == ()
    world.act("activate", version="v2")
    assert world.releases.router.check_inline(SCOPE, v2, hashes["v2"]) == ()
    assert world.releases.router.check_inline(SCOPE, v1, hashes["v1"]) == (("x-decision-rulebook-superseded-by", "v2"),)
    assert world.releases.router.check_inline("other", v1, hashes["v1"]) == ()
    world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"refuse_superseded_inline": True}, partial=True)
    refused = _refusal(lambda: world.releases.router.check_inline(SCOPE, v1, hashes["v1"]), "RULEBOOK_SUPERSEDED")
    assert refused.details == {"active_version": "v2"}
    assert world.releases.router.check_inline(SCOPE, v2, hashes["v2"]) == ()


# ------------------------------------------------------------------ observe and the shadow


def _record(decision_id: str = "dec_1", policy_id: Any = RULEBOOK_ID, policy_version: str = "v1",
            verdict: str = "yes") -> dict[str, Any]:
    return {"decision_id": decision_id, "policy_id": policy_id, "policy_version": policy_version, "verdict": verdict,
            "created_at": "2026-11-26T12:00:00.000Z"}


FACTS = {"discount_percent": 15, "margin_percent": 31, "owner_approved": True, "account_tier": "annual"}
NO_SHADOW = {"shadow_version": None, "shadow_verdict": None, "shadow_reason_code": None,
             "shadow_matched_rule_id": None}


def test_a_decide_outside_any_release_leaves_no_row(world: World):
    two_versions(world)
    assert world.releases.router.observe(SCOPE, _record(policy_id=None), FACTS, None) == Observed(None, None, ())
    assert world.releases.router.observe(SCOPE, _record(), FACTS, None) == Observed(None, None, ())


def test_a_pinned_decide_before_any_release_leaves_its_row_and_arm_block(world: World):
    two_versions(world)
    routed = Routed(RULEBOOK_ID, "v1", "pinned", 0, None)
    observed = world.releases.router.observe(SCOPE, _record(), FACTS, routed)
    assert observed == Observed(
        {"decision_id": "dec_1", "scope": SCOPE, "rulebook_id": RULEBOOK_ID, "release_seq": 0, "arm": "pinned",
         "version": "v1", "verdict": "yes", "created_at": "2026-11-26T12:00:00.000Z", **NO_SHADOW},
        {"release_arm_version": "release_arm_v1", "rulebook_id": RULEBOOK_ID, "version": "v1", "arm": "pinned",
         "release_seq": 0, "subject_hash": None}, ())


def test_an_inline_decide_of_a_released_id_is_observed_as_inline(world: World):
    two_versions(world)
    world.act("activate", version="v1")
    observed = world.releases.router.observe(SCOPE, _record(verdict="no"), FACTS, None)
    assert observed.row == {"decision_id": "dec_1", "scope": SCOPE, "rulebook_id": RULEBOOK_ID, "release_seq": 1,
                            "arm": "inline", "version": "v1", "verdict": "no",
                            "created_at": "2026-11-26T12:00:00.000Z", **NO_SHADOW}
    assert (observed.arm_block, observed.headers) == (None, ())


def test_the_shadow_evaluates_beside_every_decide_but_its_own(world: World):
    _canary(world)
    world.act("shadow", version="v2")
    routed = Routed(RULEBOOK_ID, "v1", "active", 3, "s" * 64)
    observed = world.releases.router.observe(SCOPE, _record(), FACTS, routed)
    assert {k: observed.row[k] for k in NO_SHADOW} == {
        "shadow_version": "v2", "shadow_verdict": "review", "shadow_reason_code": "NO_RULE_MATCHED",
        "shadow_matched_rule_id": None}
    assert observed.row["release_seq"] == 3 and observed.row["arm"] == "active"
    assert observed.arm_block == {"release_arm_version": "release_arm_v1", "rulebook_id": RULEBOOK_ID,
                                  "version": "v1", "arm": "active", "release_seq": 3, "subject_hash": "s" * 64}
    own = world.releases.router.observe(SCOPE, _record(policy_version="v2"), FACTS, Routed(RULEBOOK_ID, "v2", "pinned", 3,
                                                                                    None))
    assert {k: own.row[k] for k in NO_SHADOW} == NO_SHADOW


def test_a_shadow_that_matches_a_rule_records_it(world: World):
    world.publish(version("v1", approve_limit=10), version("v2"))
    world.act("activate", version="v1")
    world.act("shadow", version="v2")
    row = world.releases.router.observe(SCOPE, _record(verdict="review"), FACTS, None).row
    assert {k: row[k] for k in NO_SHADOW} == {"shadow_version": "v2", "shadow_verdict": "yes",
                                              "shadow_reason_code": "WITHIN_DISCOUNT_POLICY",
                                              "shadow_matched_rule_id": "approve_owner_backed"}


def test_a_shadow_that_cannot_be_evaluated_records_no_verdict(world: World, monkeypatch):
    hashes = two_versions(world)
    assert world.releases.router._shadow(SCOPE, RULEBOOK_ID, Version("v9", H64), FACTS) == {"shadow_version": "v9"}
    seen = []

    def too_costly(rulebook, rulebook_hash, facts):
        seen.append((rulebook, rulebook_hash, facts))
        raise GateError("EVALUATION_TOO_COSTLY", "too costly")

    monkeypatch.setattr(routing_module, "check_evaluation_cost", too_costly)
    assert world.releases.router._shadow(SCOPE, RULEBOOK_ID, Version("v2", hashes["v2"]), FACTS) == {"shadow_version": "v2"}
    assert seen == [(version("v2", approve_limit=10), hashes["v2"], FACTS)]


def _drained(world: World, timeout: float = 5.0) -> None:
    """Wait until the release-guard worker has run every check owed."""
    deadline = time.monotonic() + timeout
    while (world.releases.guardrails._guard_due or world.releases.guardrails.guard._running_since is not None) and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_canary_decide_is_counted_for_the_background_guardrail_check(world: World, monkeypatch):
    _canary(world)
    checked = []
    monkeypatch.setattr(world.releases.guardrails, "check_guardrails",
                        lambda scope, rulebook_id: checked.append((scope, rulebook_id, threading.current_thread().name)))
    canary = Routed(RULEBOOK_ID, "v2", "canary", 2, "s" * 64)
    for index in range(GUARD_EVERY - 1):
        world.releases.router.observe(SCOPE, _record(f"dec_c{index}", policy_version="v2"), FACTS, canary)
        world.releases.router.observe(SCOPE, _record(f"dec_a{index}"), FACTS, Routed(RULEBOOK_ID, "v1", "active", 2, "s"))
    assert world.releases.guardrails._canary_decides == {(SCOPE, RULEBOOK_ID): GUARD_EVERY - 1}
    assert world.releases.guardrails.guard._thread is None and checked == []  # not started before a check is owed
    world.releases.router.observe(SCOPE, _record("dec_c24", policy_version="v2"), FACTS, canary)
    thread = world.releases.guardrails.guard._thread
    assert thread is not None and thread.name == "gate-release-guard" and world.releases.guardrails.guard.name == "release-guard"
    for _index in range(GUARD_EVERY, 2 * GUARD_EVERY - 1):
        world.releases.guardrails.count_canary_decide(SCOPE, RULEBOOK_ID)
    world.releases.guardrails.count_canary_decide("other", RULEBOOK_ID)
    _drained(world)
    assert [c[:2] for c in checked] == [(SCOPE, RULEBOOK_ID)]
    assert checked[0][2] == "gate-release-guard"
    world.releases.guardrails.count_canary_decide(SCOPE, RULEBOOK_ID)  # the 50th
    _drained(world)
    assert world.releases.guardrails.guard._thread is thread  # one worker, started once
    assert [c[:2] for c in checked] == [(SCOPE, RULEBOOK_ID)] * 2
    assert world.releases.guardrails._canary_decides == {(SCOPE, RULEBOOK_ID): 2 * GUARD_EVERY, ("other", RULEBOOK_ID): 1}


def test_a_failing_background_check_is_logged_with_its_traceback_and_the_others_still_run(world: World, monkeypatch,
                                                                                          caplog):
    checked = []

    def broken(scope, rulebook_id):
        checked.append(scope)
        if scope == "first":
            raise RuntimeError(f"broken {scope} {rulebook_id}")

    monkeypatch.setattr(world.releases.guardrails, "check_guardrails", broken)
    with caplog.at_level(logging.ERROR, logger="gate.releases"):
        world.releases.guardrails._canary_decides = {("first", RULEBOOK_ID): GUARD_EVERY - 1,
                                          ("second", RULEBOOK_ID): GUARD_EVERY - 1}
        world.releases.guardrails.count_canary_decide("first", RULEBOOK_ID)
        world.releases.guardrails.count_canary_decide("second", RULEBOOK_ID)
        deadline = time.monotonic() + 5
        while checked.count("second") < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        _drained(world)
    [entry] = [r for r in caplog.records if r.name == "gate.releases"]
    assert entry.getMessage() == "background worker release-guard failed (1 in a row)"
    assert str(entry.exc_info[1]) == f"broken first {RULEBOOK_ID}"
    assert checked == ["first", "second"]  # the failed one's pass ended; the next ran the other
    health = world.releases.guardrails.guard.health()
    assert (health["failures"], health["failures_in_a_row"], health["healthy"]) == (1, 0, True)
    assert health["last_error"] == f"RuntimeError: broken first {RULEBOOK_ID}"


# ------------------------------------------------------------------ the guardrails and their halt


def _failing_canary(world: World, n: int = 30) -> None:
    """Both arms past the minimum: every canary outcome failed, every active one succeeded."""
    world.add_rows("canary", ["yes"] * n, release_seq=2, effects=["failure"] * n)
    world.add_rows("active", ["yes"] * n, release_seq=2, effects=["success"] * n)


def test_the_arm_counts_start_at_the_canarys_event(world: World):
    _canary(world)
    state = world.releases.state(SCOPE, RULEBOOK_ID, fresh=True)
    assert world.releases.guardrails.arm_counts(SCOPE, state) == (ArmCounts({}, 0, 0), ArmCounts({}, 0, 0))
    world.add_rows("canary", ["yes", "review"], release_seq=1, effects=["failure", "failure"], prefix="old")
    world.add_rows("canary", ["yes", "review", "review"], release_seq=2, effects=["failure", "success", "open"])
    world.add_rows("active", ["yes", "no"], release_seq=3, effects=["success", "excluded"])
    world.add_rows("pinned", ["yes"], release_seq=2, effects=["failure"])
    assert world.releases.guardrails.arm_counts(SCOPE, state) == (ArmCounts({"yes": 1, "review": 2}, 1, 1),
                                                        ArmCounts({"yes": 1, "no": 1}, 0, 1))
    halted = world.act("halt")
    assert halted["seq"] == 3
    after = world.releases.state(SCOPE, RULEBOOK_ID, fresh=True)
    assert world.releases.guardrails.arm_counts(SCOPE, after) == (ArmCounts({}, 0, 0), ArmCounts({"yes": 1, "no": 1}, 0, 1))


def test_no_canary_no_guardrail(world: World):
    two_versions(world)
    world.act("activate", version="v1")
    assert world.releases.guardrails.check_guardrails(SCOPE, RULEBOOK_ID) is None
    world.releases.guardrails.after_outcome(SCOPE, "dec_none", "out_1", "key_a")
    assert world.trips == []


def test_a_healthy_canary_runs_on(world: World):
    _canary(world)
    world.add_rows("canary", ["yes"] * 40, release_seq=2, effects=["failure"] * 4 + ["success"] * 36)
    world.add_rows("active", ["yes"] * 40, release_seq=2, effects=["failure"] * 4 + ["success"] * 36)
    report = world.releases.guardrails.check_guardrails(SCOPE, RULEBOOK_ID)
    assert report == evaluate(ArmCounts({"yes": 40}, 4, 36), ArmCounts({"yes": 40}, 4, 36))
    assert report.tripped == () and world.trips == []
    assert [e["action"] for e in world.releases.history(SCOPE, RULEBOOK_ID)] == ["activate", "canary"]


def test_a_tripped_guardrail_halts_the_canary_as_the_guardrail_with_its_evidence(world: World):
    _canary(world)
    _failing_canary(world)
    trigger = {"outcome_id": "out_1", "decision_id": "dec_x", "arm": "canary", "reported_by": "key_b"}
    report = world.releases.guardrails.check_guardrails(SCOPE, RULEBOOK_ID, trigger)
    assert report.tripped == ("failure_rate",)
    halt = world.releases.history(SCOPE, RULEBOOK_ID)[-1]
    assert (halt["action"], halt["actor"], halt["principal"], halt["reason"]) == (
        "halt", "guardrail", {"kind": "guardrail", "id": "guardrail"}, "guardrail tripped: failure_rate")
    assert halt["evidence"] == {"canary_version": "v2", "canary_since_seq": 2, **report.to_json(), "trigger": trigger}
    assert halt["state"]["canary"] is None
    assert world.releases.reader.store.by_idempotency(SCOPE, RULEBOOK_ID, "guardrail:2")["event_hash"] == halt["event_hash"]
    assert world.trips == [(SCOPE, RULEBOOK_ID, report)]
    assert world.releases.guardrails.check_guardrails(SCOPE, RULEBOOK_ID) is None  # halted: nothing to check


def test_the_guardrails_read_the_canary_fresh(world: World):
    two_versions(world)
    world.act("activate", version="v1")
    assert world.releases.state(SCOPE, RULEBOOK_ID).canary is None
    world.another_worker().act(SCOPE, KEY_A, EVERY_RIGHT, RULEBOOK_ID,
                               {"action": "canary", "version": "v2", "percent": 50})
    _failing_canary(world)
    assert world.releases.guardrails.check_guardrails(SCOPE, RULEBOOK_ID).tripped == ("failure_rate",)


def test_a_status_read_runs_the_guardrails_and_answers_the_fresh_state(world: World):
    _canary(world)
    _failing_canary(world)
    status = world.releases.status(SCOPE, RULEBOOK_ID)
    history = world.releases.history(SCOPE, RULEBOOK_ID)
    assert [e["action"] for e in history] == ["activate", "canary", "halt"]
    assert status == {"rulebook_id": RULEBOOK_ID, "state": world.releases.state(SCOPE, RULEBOOK_ID, fresh=True).to_json(),
                      "policy": world.releases.policy(SCOPE).to_json(), "comparison": {"shadow": None, "canary": None},
                      "history": history}
    assert status["state"]["seq"] == 3 and status["history"][-1]["evidence"]["trigger"] is None


def test_the_comparison_shows_the_shadow_and_the_canary(world: World):
    _canary(world, percent=25)
    world.act("shadow", version="v2")
    world.add_rows("active", ["yes", "yes", "no"], release_seq=2, effects=["failure", None, "success"],
                   shadow=("v2", "review"))
    world.add_rows("canary", ["review"], release_seq=2)
    state = world.releases.state(SCOPE, RULEBOOK_ID, fresh=True)
    comparison = world.releases.comparison(SCOPE, state)
    rows = world.releases.reader.store.shadow_rows(SCOPE, RULEBOOK_ID, "v2")
    assert comparison["shadow"] == {"version": "v2", **shadow_figures(rows)}
    assert comparison["shadow"]["decisions"] == 3
    canary, active = ArmCounts({"review": 1}, 0, 0), ArmCounts({"yes": 2, "no": 1}, 1, 1)
    assert comparison["canary"] == {"version": "v2", "percent": 25,
                                    **canary_figures(canary, active, evaluate(canary, active))}
    assert comparison["canary"]["arms"][1]["decisions"] == 1
    assert world.releases.comparison("other", state)["shadow"]["decisions"] == 0


def test_an_outcome_of_a_canary_or_active_decision_runs_the_guardrails_and_names_itself(world: World):
    _canary(world)
    _failing_canary(world, 29)
    world.add_rows("pinned", ["yes"], release_seq=2, effects=["failure"], prefix="p")
    world.add_rows("inline", ["yes"], release_seq=2, effects=["failure"], prefix="i")
    [canary_id] = world.add_rows("canary", ["yes"], release_seq=2, effects=["failure"], prefix="last")
    [active_id] = world.add_rows("active", ["yes"], release_seq=2, effects=["success"], prefix="last")
    for decision_id in ("dec_ppinned_2_0", "dec_iinline_2_0", "dec_unknown"):
        world.releases.guardrails.after_outcome(SCOPE, decision_id, "out_x", "key_b")
    assert world.releases.state(SCOPE, RULEBOOK_ID, fresh=True).canary is not None and world.trips == []
    world.releases.guardrails.after_outcome("other", canary_id, "out_x", "key_b")  # another scope's row: none
    assert world.trips == []
    world.releases.guardrails.after_outcome(SCOPE, active_id, "out_7", "key_b")
    halt = world.releases.history(SCOPE, RULEBOOK_ID)[-1]
    assert halt["evidence"]["trigger"] == {"outcome_id": "out_7", "decision_id": active_id, "arm": "active",
                                           "reported_by": "key_b"}
    assert len(world.trips) == 1


def test_an_outcome_of_a_canary_decision_names_the_canary_arm_and_no_reporter(world: World):
    _canary(world)
    _failing_canary(world)
    [canary_id] = world.add_rows("canary", ["yes"], release_seq=2, effects=["failure"], prefix="last")
    world.releases.guardrails.after_outcome(SCOPE, canary_id, "out_8", None)
    assert world.releases.history(SCOPE, RULEBOOK_ID)[-1]["evidence"]["trigger"] == {
        "outcome_id": "out_8", "decision_id": canary_id, "arm": "canary", "reported_by": None}


def test_a_halt_found_first_by_a_person_or_another_check_is_left_alone(world: World):
    _canary(world)
    canary = world.releases.state(SCOPE, RULEBOOK_ID, fresh=True).canary
    report = evaluate(ArmCounts({"yes": 30}, 30, 0), ArmCounts({"yes": 30}, 0, 30))
    world.act("halt", reason="by hand")
    world.releases.guardrails._halt_for(SCOPE, RULEBOOK_ID, canary, report, None)  # RELEASE_NOTHING_TO_HALT
    assert [e["actor"] for e in world.releases.history(SCOPE, RULEBOOK_ID)] == ["key_a", "key_a", "key_a"]
    assert world.trips == [(SCOPE, RULEBOOK_ID, report)]
    world.act("canary", version="v2", percent=50)
    again = world.releases.state(SCOPE, RULEBOOK_ID, fresh=True).canary
    world.releases.guardrails._halt_for(SCOPE, RULEBOOK_ID, again, report, {"outcome_id": "out_1"})
    world.act("shadow", version="v2")
    world.releases.guardrails._halt_for(SCOPE, RULEBOOK_ID, again, report, None)  # same key, other evidence: a conflict
    history = world.releases.history(SCOPE, RULEBOOK_ID)
    assert [e["action"] for e in history] == ["activate", "canary", "halt", "canary", "halt", "shadow"]
    assert history[-1]["state"]["shadow"]["version"] == "v2"


def test_a_halt_that_fails_otherwise_raises(world: World):
    _canary(world)
    canary = world.releases.state(SCOPE, RULEBOOK_ID, fresh=True).canary
    report = evaluate(ArmCounts({"yes": 30}, 30, 0), ArmCounts({"yes": 30}, 0, 30))
    _refusal(lambda: world.releases.guardrails._halt_for(SCOPE, "nope", canary, report, None), "RULEBOOK_NOT_FOUND")
    assert world.trips == []


def test_a_halt_without_a_trip_hook_only_halts(world: World):
    _canary(world)
    world.releases.guardrails.on_trip = None
    _failing_canary(world)
    assert world.releases.guardrails.check_guardrails(SCOPE, RULEBOOK_ID).tripped == ("failure_rate",)
    assert world.releases.history(SCOPE, RULEBOOK_ID)[-1]["actor"] == "guardrail"


# ------------------------------------------------------------------ alerts


def test_the_alerts_list_the_guardrails_halts_only_newest_first(world: World):
    _canary(world)
    _failing_canary(world)
    trigger = {"outcome_id": "out_1", "decision_id": "dec_1", "arm": "canary", "reported_by": "key_b"}
    report = world.releases.guardrails.check_guardrails(SCOPE, RULEBOOK_ID, trigger)
    halt = world.releases.history(SCOPE, RULEBOOK_ID)[-1]
    world.clock.moment = START + timedelta(minutes=1)
    world.act("canary", version="v2", percent=10, override="guardrail_halt", reason="an admin tries it again")
    world.clock.moment = START + timedelta(minutes=2)
    world.act("halt", reason="by hand")  # newer, by a person: no alert, and it hides nothing
    alerts = world.releases.guardrails.guardrail_alerts(SCOPE)
    assert alerts == [{
        "alert_id": "release:" + halt["event_hash"][:24], "source": "release_guardrail", "kind": "canary_halted",
        "severity": "high", "policy_id": RULEBOOK_ID, "canary_version": "v2", "guardrails": ["failure_rate"],
        "release_seq": 3, "event_hash": halt["event_hash"], "halted_at": halt["created_at"], "trigger": trigger,
        "reasons": [("the canary of version v2 was halted on its own: failure_rate tripped (always-valid test, "
                    f"alpha {report.settings.alpha})")]}]
    assert world.releases.guardrails.guardrail_alerts("other") == []


def test_an_alert_of_a_halt_without_evidence_names_nothing(world: World):
    _canary(world)
    world.act("halt", principal=Principal.guardrail(), permissions=frozenset({"release"}))
    [alert] = world.releases.guardrails.guardrail_alerts(SCOPE)
    assert (alert["canary_version"], alert["guardrails"], alert["trigger"]) == (None, [], None)
    assert alert["reasons"] == [("the canary of version None was halted on its own:  tripped (always-valid test, "
                                "alpha None)")]


# ------------------------------------------------------------------ an admin's override of a guardrail halt


def _halted_v2(world: World) -> dict[str, str]:
    hashes = _canary(world)
    _failing_canary(world)
    world.releases.guardrails.check_guardrails(SCOPE, RULEBOOK_ID)
    assert world.releases.history(SCOPE, RULEBOOK_ID)[-1]["actor"] == "guardrail"
    return hashes


def test_a_version_its_guardrail_halted_is_activated_only_by_an_admin_with_a_reason(world: World):
    _halted_v2(world)
    releaser = frozenset({"release"})
    refused = _refusal(lambda: world.act("activate", permissions=releaser, version="v2"), "RELEASE_VERSION_HALTED")
    assert refused.details == {"version": "v2"}
    _refusal(lambda: world.act("activate", version="v2", override="guardrail_halt"), "RELEASE_VERSION_HALTED")
    _refusal(lambda: world.act("activate", version="v2", reason="fixed"), "RELEASE_VERSION_HALTED")
    denied = _refusal(lambda: world.act("activate", permissions=releaser, version="v2", override="guardrail_halt",
                                        reason="fixed"), "RELEASE_PERMISSION_DENIED")
    assert denied.details == {"permission": "admin"}
    assert len(world.releases.history(SCOPE, RULEBOOK_ID)) == 3
    moved = world.act("activate", version="v2", override="guardrail_halt", reason="fixed")
    assert moved["override"] == "guardrail_halt" and moved["state"]["active"]["version"] == "v2"
    assert world.act("activate", permissions=releaser, version="v1")["override"] is None  # v1 was never halted


def test_an_override_applies_only_to_a_halted_version(world: World):
    two_versions(world)
    refused = _refusal(lambda: world.act("activate", version="v1", override="guardrail_halt", reason="x"),
                       "RELEASE_ACTION_INVALID")
    assert refused.message == "override applies only to a move that makes a version its guardrail halted serve"
    world.act("activate", version="v1")
    world.act("canary", version="v2", percent=50)
    world.act("halt", reason="a person's halt is no guardrail's")
    assert world.act("activate", permissions=frozenset({"release"}), version="v2")["override"] is None


def test_approving_the_activation_of_a_halted_version_needs_the_override_too(world: World):
    hashes = _halted_v2(world)
    world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"require_approval": True}, partial=True)
    requested = world.act("activate", version="v2", override="guardrail_halt", reason="fixed")
    seq = requested["seq"]
    approve = {"request_seq": seq, "version": "v2", "rulebook_hash": hashes["v2"]}
    _refusal(lambda: world.act("approve", principal=KEY_B, **approve), "RELEASE_VERSION_HALTED")
    _refusal(lambda: world.act("approve", principal=KEY_B, permissions=frozenset({"approve"}), override="guardrail_halt",
                               reason="agreed", **approve), "RELEASE_PERMISSION_DENIED")
    approved = world.act("approve", principal=KEY_B, override="guardrail_halt", reason="agreed", **approve)
    assert approved["state"]["active"]["version"] == "v2" and approved["override"] == "guardrail_halt"


def test_every_move_that_makes_a_halted_version_serve_needs_the_override(world: World):
    """Issue 52: rollback, a canary and the approval of a canary request, as well as activation."""
    hashes = _halted_v2(world)
    releaser = frozenset({"release"})
    world.act("activate", version="v2", override="guardrail_halt", reason="fixed")  # v1 is previous
    world.act("activate", version="v1")  # v2 is previous again
    for action, body in (("rollback", {}), ("canary", {"version": "v2", "percent": 5})):
        refused = _refusal(lambda action=action, body=body: world.act(action, permissions=releaser, **body),
                           "RELEASE_VERSION_HALTED")
        assert refused.details == {"version": "v2"} and refused.message.startswith(f"{action} makes version 'v2'")
        denied = _refusal(lambda action=action, body=body: world.act(
            action, permissions=releaser, override="guardrail_halt", reason="fixed", **body), "RELEASE_PERMISSION_DENIED")
        assert denied.details == {"permission": "admin"}
    assert len(world.releases.history(SCOPE, RULEBOOK_ID)) == 5
    shadow = world.act("shadow", permissions=releaser, version="v2")  # a shadow never answers a decide
    assert shadow["override"] is None
    world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"require_approval": True}, partial=True)
    asked = world.act("canary", version="v2", percent=5, override="guardrail_halt", reason="again")
    approve = {"request_seq": asked["seq"], "version": "v2", "rulebook_hash": hashes["v2"]}
    _refusal(lambda: world.act("approve", principal=KEY_B, **approve), "RELEASE_VERSION_HALTED")
    approved = world.act("approve", principal=KEY_B, override="guardrail_halt", reason="agreed", **approve)
    assert approved["override"] == "guardrail_halt" and approved["state"]["canary"]["version"] == "v2"
    world.act("halt")
    back = world.act("rollback", override="guardrail_halt", reason="v2 is fixed")
    assert (back["override"], back["reason"], back["state"]["active"]["version"]) == ("guardrail_halt", "v2 is fixed",
                                                                                      "v2")
    assert world.act("rollback", permissions=releaser)["override"] is None  # to v1, never halted


# ------------------------------------------------------------------ guarded activation


class ManifestCheck:
    """Stands in for gate.releases.guards.manifest_problems (its own tests: tests/releases), and
    records what the service asked it."""

    def __init__(self, problems: list[str] | None = None) -> None:
        self.problems = problems or []
        self.calls: list[tuple[Any, ...]] = []

    def __call__(self, manifest, rulebook_id, version_, anchors, now, max_age_seconds):
        self.calls.append((manifest, rulebook_id, version_, anchors, now, max_age_seconds))
        return list(self.problems)


MANIFEST = {"migration_hash": "b" * 64, "dry_run": {"scope": SCOPE}}  # of this scope (issue 64)


@pytest.fixture
def dry_run_required(world: World):
    two_versions(world)
    world.act("activate", version="v1")
    world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"require_dry_run": True, "dry_run_canary_percent": 5,
                                                          "dry_run_max_age_seconds": 3600}, partial=True)
    return world


def test_a_required_dry_run_is_asked_of_activations_and_larger_canaries(dry_run_required: World):
    world = dry_run_required
    for action, body in (("activate", {"version": "v2"}), ("canary", {"version": "v2", "percent": 5.01})):
        refused = _refusal(lambda action=action, body=body: world.act(action, **body), "RELEASE_DRY_RUN_REQUIRED")
        assert action in refused.message
    small = world.act("canary", version="v2", percent=5, migration_manifest_hash=H64)
    assert small["migration_manifest_hash"] == H64  # stated without a manifest: recorded as stated
    assert world.act("halt")["migration_manifest_hash"] is None


def test_a_passed_manifest_is_checked_for_the_version_it_moves(dry_run_required: World, monkeypatch):
    world = dry_run_required
    check = ManifestCheck()
    monkeypatch.setattr(moves_module, "manifest_problems", check)
    hashes = {"v2": sha256_hex(version("v2", approve_limit=10))}
    world.clock.moment = START.replace(tzinfo=None)  # a clock without a zone reads as UTC
    moved = world.act("activate", version="v2", migration_manifest=MANIFEST)
    assert moved["migration_manifest_hash"] == "b" * 64 and moved["state"]["active"]["version"] == "v2"
    [(manifest, rulebook_id, version_, anchors, now, max_age)] = check.calls
    assert (manifest, rulebook_id, version_, now, max_age) == (MANIFEST, RULEBOOK_ID, Version("v2", hashes["v2"]),
                                                              START.replace(tzinfo=UTC), 3600)
    assert isinstance(anchors, TrustAnchors) and anchors == world.signing.trust_anchors()
    same = world.act("activate", version="v1", migration_manifest=MANIFEST, migration_manifest_hash="b" * 64)
    assert same["migration_manifest_hash"] == "b" * 64
    other = _refusal(lambda: world.act("activate", version="v2", migration_manifest=MANIFEST,
                                       migration_manifest_hash=H64), "RELEASE_ACTION_INVALID")
    assert other.message == "migration_manifest_hash is not the passed manifest's"


def test_a_manifest_is_checked_whenever_one_is_passed(world: World, monkeypatch):
    two_versions(world)
    check = ManifestCheck(["first problem", "second problem"])
    monkeypatch.setattr(moves_module, "manifest_problems", check)
    rejected = _refusal(lambda: world.act("activate", version="v1", migration_manifest=MANIFEST),
                        "RELEASE_DRY_RUN_REJECTED")
    assert rejected.message == "first problem" and rejected.details == {"problems": ["first problem", "second problem"]}
    assert check.calls[0][5] == 7 * 86_400  # the default policy's bound
    assert world.releases.history(SCOPE, RULEBOOK_ID) == []


@pytest.mark.parametrize("body", [{"action": "shadow", "version": "v2"}, {"action": "halt"},
                                  {"action": "rollback"}])
def test_a_manifest_goes_only_with_a_canary_or_an_activation(dry_run_required: World, monkeypatch, body):
    monkeypatch.setattr(moves_module, "manifest_problems", ManifestCheck())
    world = dry_run_required
    refused = _refusal(lambda: world.releases.act(SCOPE, KEY_A, EVERY_RIGHT, RULEBOOK_ID,
                                                  {**body, "migration_manifest": MANIFEST}), "RELEASE_ACTION_INVALID")
    assert refused.message == "migration_manifest goes with a canary or an activation"


def test_a_canary_with_a_manifest_records_its_hash(dry_run_required: World, monkeypatch):
    monkeypatch.setattr(moves_module, "manifest_problems", ManifestCheck())
    canary = dry_run_required.act("canary", version="v2", percent=50, migration_manifest=MANIFEST)
    assert canary["migration_manifest_hash"] == "b" * 64


def test_a_shadow_is_compiled_from_its_own_snapshot(world: World):
    from gate.rulebook.cache import clear_cache

    hashes = two_versions(world)
    clear_cache()  # nothing compiled yet: the shadow's rulebook is compiled from its snapshot
    assert world.releases.router._shadow(SCOPE, RULEBOOK_ID, Version("v2", hashes["v2"]), FACTS) == {
        "shadow_version": "v2", "shadow_verdict": "review", "shadow_reason_code": "NO_RULE_MATCHED",
        "shadow_matched_rule_id": None}


def test_a_decide_keeps_the_release_seq_it_was_routed_under(world: World):
    two_versions(world)
    world.act("activate", version="v1")
    world.act("shadow", version="v2")
    world.act("halt")
    routed = Routed(RULEBOOK_ID, "v1", "active", 1, "s" * 64)  # routed before the shadow and the halt
    observed = world.releases.router.observe(SCOPE, _record(), FACTS, routed)
    assert observed.row["release_seq"] == 1 and observed.arm_block["release_seq"] == 1
    assert world.releases.router.observe(SCOPE, _record("dec_2"), FACTS, None).row["release_seq"] == 3


def test_an_outcome_reads_the_canary_fresh(world: World):
    two_versions(world)
    world.act("activate", version="v1")
    assert world.releases.state(SCOPE, RULEBOOK_ID).canary is None  # cached without a canary
    world.another_worker().act(SCOPE, KEY_A, EVERY_RIGHT, RULEBOOK_ID,
                               {"action": "canary", "version": "v2", "percent": 50})
    _failing_canary(world)
    [canary_id] = world.add_rows("canary", ["yes"], release_seq=2, effects=["failure"], prefix="last")
    world.releases.guardrails.after_outcome(SCOPE, canary_id, "out_9", "key_b")
    assert world.releases.history(SCOPE, RULEBOOK_ID)[-1]["actor"] == "guardrail"


def test_a_guardrail_halt_binds_however_long_the_history_grows_after_it(world: World):
    """A halt 1,000 events back binds as the last one (the check read only the newest page of
    the history: 500 shadows and halts later a `release` key activated the halted version)."""
    _halted_v2(world)
    for _ in range(501):
        world.act("shadow", version="v2")
        world.act("halt", reason="routine")
    assert len(world.releases.history(SCOPE, RULEBOOK_ID)) == 1000  # the page no longer holds the halt
    refused = _refusal(lambda: world.act("activate", permissions=frozenset({"release"}), version="v2"),
                       "RELEASE_VERSION_HALTED")
    assert refused.details == {"version": "v2"}
