"""The release rules and the canary guardrails through HTTP (issue 41 items 6 and 8, and its "Keep").

A canary at 50% decides by reference; outcomes are reported through the outcome route; the
guardrails run on the releases service's own schedule (after each outcome, on status reads). The
halt's evidence is read from the signed, chained release history and checked offline.
"""

from __future__ import annotations

import math

import pytest

from gate.protocol.canonical import sha256_hex
from gate.releases.events import verify_history
from gate.releases.guardrails import ArmCounts, evaluate
from gate.verify import TrustAnchors
from tests.releases.support import ALL, Api, by_reference, version
from tests.releases.test_releases_api import author_key_id


@pytest.fixture
def author(client, issue_key):
    client.application.extensions["gate"].releases.reader.cache_seconds = 0
    return Api(client, issue_key(permissions=ALL)["api_key"])


def _radius(events_c: int, n_c: int, events_a: int, n_a: int, tau: float = 0.05, alpha: float = 0.05) -> float:
    """The always-valid radius from the formula in docs/releases.md's source, with the stated defaults."""
    pooled = (events_c + events_a + 0.5) / (n_c + n_a + 1)
    v = pooled * (1 - pooled) * (1 / n_c + 1 / n_a)
    return math.sqrt(v * (v + tau ** 2) / tau ** 2 * (2 * math.log(1 / alpha) + math.log((v + tau ** 2) / v)))


def _ratio(events_c: int, n_c: int, events_a: int, n_a: int, tau: float = 0.05) -> float:
    pooled = (events_c + events_a + 0.5) / (n_c + n_a + 1)
    v = pooled * (1 - pooled) * (1 / n_c + 1 / n_a)
    d = events_c / n_c - events_a / n_a
    return math.exp(0.5 * math.log(v / (v + tau ** 2)) + d * d * tau ** 2 / (2 * v * (v + tau ** 2)))


def _canary(author: Api, per_arm: int, candidate: dict | None = None) -> dict[str, list[dict]]:
    """v1 active, `candidate` (default v3: same verdicts, another action) in a 50% canary; decides
    until each arm has `per_arm` records (yes, all of them, unless the candidate says otherwise)."""
    candidate = candidate or version("v3", action="apply_discount_v3")
    author.publish(version("v1"))
    author.publish(candidate)
    assert author.act("activate", version="v1").status_code == 201
    assert author.act("canary", version=candidate["version"], percent=50).status_code == 201
    arms: dict[str, list[dict]] = {"active": [], "canary": []}
    for index in range(10 * per_arm):  # about 5 * per_arm an arm: each arm fills long before
        record = author.decide(by_reference(subject=f"order-{index}")).json
        if len(arms[record["release_arm"]["arm"]]) < per_arm:
            arms[record["release_arm"]["arm"]].append(record)
        if min(len(arms["active"]), len(arms["canary"])) == per_arm:
            return arms
    raise AssertionError(f"a 50% canary split {10 * per_arm} subjects {len(arms['canary'])} / {len(arms['active'])}")


def _expected_failure(events_c: int, n_c: int, events_a: int, n_a: int, interval: list[float],
                      tripped: bool) -> dict:
    return {"name": "failure_rate", "canary": {"events": events_c, "n": n_c}, "active": {"events": events_a, "n": n_a},
            "difference": round(events_c / n_c - events_a / n_a, 6), "interval": interval,
            "likelihood_ratio": round(_ratio(events_c, n_c, events_a, n_a), 6), "alpha": 0.05, "tolerance": 0.0,
            "judged": True, "tripped": tripped}


def test_all_failures_in_the_canary_halt_it_with_an_interval_that_ends_at_plus_100_percent(client, author):
    arms = _canary(author, 30)
    for record in arms["active"]:
        assert author.outcome(record, "succeeded").status_code == 201
    for count, record in enumerate(arms["canary"], start=1):
        assert author.outcome(record, "failed").status_code == 201
        halted = author.status().json["state"]["canary"] is None
        assert halted is (count == 30)  # nothing is judged before 30 an arm; at 30 it halts
        if halted:
            break
    history = author.history().json
    halt = history["events"][-1]
    assert (halt["action"], halt["actor"], halt["reason"]) == ("halt", "guardrail", "guardrail tripped: failure_rate")
    evidence = halt["evidence"]
    radius = _radius(30, 30, 0, 30)
    assert radius > 0.49  # unclipped, this interval read +50.5% to +149.5%
    assert evidence["failure_rate"] == _expected_failure(30, 30, 0, 30, [round(1 - radius, 6), 1.0], True)
    assert evidence["tripped"] == ["failure_rate"]
    assert evidence["canary_version"] == "v3" and evidence["canary_since_seq"] == 2
    assert evidence["settings"] == {
        "method": "msprt_normal_mixture_v1", "alpha": 0.05, "min_count": 30,
        "failure_rate": {"tau": 0.05, "tolerance": 0.0, "false_alarm_rate": 0.05},
        "verdict_mix": {"tau": 0.10, "tolerance": 0.10, "false_alarm_rate": 0.05}}
    mix = {c["name"]: c for c in evidence["verdict_mix"]}
    assert list(mix) == ["verdict_mix.yes", "verdict_mix.no", "verdict_mix.review", "verdict_mix.needs_input"]
    assert all(c["judged"] and not c["tripped"] and c["alpha"] == 0.0125 and c["tolerance"] == 0.1
               for c in mix.values())
    assert mix["verdict_mix.yes"]["difference"] == 0.0 and mix["verdict_mix.no"]["canary"]["events"] == 0
    assert mix["verdict_mix.yes"]["canary"]["events"] == mix["verdict_mix.yes"]["canary"]["n"] >= 30
    # The evidence names the outcome whose report halted the canary and the key that reported it.
    last = arms["canary"][29]
    trigger = evidence["trigger"]
    assert trigger["decision_id"] == last["decision_id"] and trigger["arm"] == "canary"
    assert trigger["reported_by"] == author_key_id(client, author) and trigger["outcome_id"].startswith("out_")
    # Signed and chained: the history verifies offline with the published keys, evidence included.
    anchors = TrustAnchors.from_registry_body(client.get("/api/decision/receipt-keys").get_data(), "key_registry_file")
    assert verify_history(history["events"], anchors).valid
    history["events"][-1]["evidence"]["failure_rate"]["interval"][1] = 1.495
    assert not verify_history(history["events"], anchors).valid


def test_no_failures_in_the_canary_and_all_in_the_active_arm_start_the_interval_at_minus_100_percent(author):
    arms = _canary(author, 30)
    for record in arms["active"]:
        assert author.outcome(record, "failed").status_code == 201
    for record in arms["canary"]:
        assert author.outcome(record, "succeeded").status_code == 201
    status = author.status().json
    assert status["state"]["canary"]["version"] == "v3"  # a better canary is never halted
    assert [e["action"] for e in status["history"]] == ["activate", "canary"]
    failure = status["comparison"]["canary"]["guardrails"]["failure_rate"]
    radius = _radius(0, 30, 30, 30)
    assert failure == _expected_failure(0, 30, 30, 30, [-1.0, round(-1 + radius, 6)], False)


def test_a_healthy_canary_past_its_minimum_runs_on_under_the_default_settings(author):
    arms = _canary(author, 40)
    for arm in ("active", "canary"):
        for index, record in enumerate(arms[arm]):  # 10% failures in both arms
            assert author.outcome(record, "failed" if index % 10 == 0 else "succeeded").status_code == 201
    status = author.status().json
    assert status["state"]["canary"]["version"] == "v3"
    assert [e["action"] for e in status["history"]] == ["activate", "canary"]
    guard = status["comparison"]["canary"]["guardrails"]
    assert guard["tripped"] == []
    radius = _radius(4, 40, 4, 40)
    assert guard["failure_rate"] == _expected_failure(4, 40, 4, 40, [round(-radius, 6), round(radius, 6)], False)
    assert all(c["judged"] and not c["tripped"] for c in guard["verdict_mix"])
    assert guard["settings"]["alpha"] == 0.05 and guard["settings"]["min_count"] == 30


def test_a_decide_only_key_halts_a_canary_of_its_own_scope_and_the_evidence_names_it(client, issue_key, author):
    reporter = Api(client, issue_key()["api_key"])  # decide only
    arms = _canary(author, 30)
    # The canary's failures first: nothing is judged until the active arm has 30 resolved outcomes,
    # so the active arm's 30th success is the outcome whose report halts the canary.
    for record in arms["canary"]:
        assert reporter.outcome(record, "failed").status_code == 201
    for record in arms["active"]:
        assert reporter.outcome(record, "succeeded").status_code == 201
    halt = author.status().json["history"][-1]
    assert halt["action"] == "halt" and halt["actor"] == "guardrail"
    trigger = halt["evidence"]["trigger"]
    assert trigger["reported_by"] == author_key_id(client, reporter) and trigger["arm"] == "active"
    assert trigger["decision_id"] == arms["active"][29]["decision_id"]
    # A later halt by a person is no alert, and does not hide the guardrail's. (The halted v3 runs
    # again only by an admin's override: docs/releases.md, "A halted version stays halted".)
    assert author.act("canary", version="v3", percent=10).json["error"] == "RELEASE_VERSION_HALTED"
    assert author.act("canary", version="v3", percent=10, override="guardrail_halt",
                      reason="the adapter is fixed").status_code == 201
    assert author.act("halt", reason="by hand").status_code == 201
    alerts = [a for a in client.get("/api/policy-alerts?policy_id=pricing_exception",
                                    headers=author.headers()).json["alerts"] if a["source"] == "release_guardrail"]
    assert [(a["kind"], a["release_seq"], a["event_hash"]) for a in alerts] == [
        ("canary_halted", halt["seq"], halt["event_hash"])]
    assert alerts[0]["trigger"] == halt["evidence"]["trigger"]
    # The same key still cannot move the release itself.
    assert reporter.act("canary", version="v3", percent=10).status_code == 403


def test_the_subject_is_read_at_its_path_and_hashed_into_the_arm_block(author):
    author.publish(version("v1"))
    author.publish(version("v3", action="apply_discount_v3"))
    author.act("activate", version="v1")
    author.act("canary", version="v3", percent=50)
    record = author.decide(by_reference(subject="order-7")).json
    assert record["release_arm"]["subject_hash"] == sha256_hex("order-7")
    body = by_reference()
    body["context"] = {k: v for k, v in body["context"].items() if k != "source_record_id"}
    fallback = author.decide(body).json
    assert fallback["release_arm"]["subject_hash"] == sha256_hex(sha256_hex(body))


REFUSALS = [
    ({"action": "canary", "version": "v1", "percent": 10}, 409, "RELEASE_TRANSITION_REFUSED"),
    ({"action": "shadow", "version": "v1"}, 409, "RELEASE_TRANSITION_REFUSED"),
    ({"action": "canary", "version": "v2", "percent": 0}, 400, "RELEASE_ACTION_INVALID"),
    ({"action": "canary", "version": "v2"}, 400, "RELEASE_ACTION_INVALID"),
    ({"action": "activate"}, 400, "RELEASE_ACTION_INVALID"),
    ({"action": "halt"}, 409, "RELEASE_NOTHING_TO_HALT"),
    ({"action": "rollback"}, 409, "RELEASE_NOTHING_TO_ROLL_BACK"),
    ({"action": "approve", "request_seq": 5, "version": "v2", "rulebook_hash": None}, 404,
     "RELEASE_APPROVAL_NOT_FOUND"),
]


@pytest.mark.parametrize(("body", "status", "code"), REFUSALS, ids=[f"{b['action']}-{c}" for b, _s, c in REFUSALS])
def test_every_refused_transition_answers_its_status_and_changes_nothing(author, body, status, code):
    author.publish(version("v1"))
    published = author.publish(version("v2", approve_limit=10)).json["rulebook"]
    author.act("activate", version="v1")
    if body.get("rulebook_hash", 0) is None:
        body = {**body, "rulebook_hash": published["hash"]}
    answer = author.client.post("/api/decision/rulebooks/pricing_exception/release", json=body,
                                headers=author.headers())
    assert (answer.status_code, answer.json["error"], answer.json["c"]) == (status, code, "unclear")
    status_after = author.status().json
    assert [e["seq"] for e in status_after["history"]] == [1]
    assert status_after["state"]["active"]["version"] == "v1" and status_after["state"]["canary"] is None


def test_a_canary_needs_an_active_version(author):
    author.publish(version("v1"))
    answer = author.act("canary", version="v1", percent=10)
    assert (answer.status_code, answer.json["error"]) == (409, "RULEBOOK_NOT_ACTIVE")
    assert author.status().json["history"] == []


def test_an_approval_naming_another_version_with_its_own_hash_is_refused(client, issue_key, author):
    approver = Api(client, issue_key(permissions="approve")["api_key"])
    author.publish(version("v1"))
    v2 = author.publish(version("v2", approve_limit=10)).json["rulebook"]
    client.patch("/api/decision/release-policy", json={"require_approval": True, "approval_ttl_seconds": 600},
                 headers=author.headers())
    pending = author.act("activate", version="v1").json["state"]["pending"][0]
    # v2 with v2's correct hash: a real version, the wrong one. Nothing is activated.
    other = approver.act("approve", request_seq=pending["request_seq"], version="v2", rulebook_hash=v2["hash"])
    assert (other.status_code, other.json["error"]) == (409, "RELEASE_APPROVAL_MISMATCH")
    state = author.status().json["state"]
    assert state["active"] is None and [p["request_seq"] for p in state["pending"]] == [pending["request_seq"]]
    assert [e["action"] for e in author.status().json["history"]] == ["activate"]
    own = author.act("approve", request_seq=pending["request_seq"], version="v1", rulebook_hash=pending["rulebook_hash"])
    assert (own.status_code, own.json["error"]) == (403, "RELEASE_SELF_APPROVAL")
    right = approver.act("approve", request_seq=pending["request_seq"], version="v1",
                         rulebook_hash=pending["rulebook_hash"])
    assert right.status_code == 201 and right.json["state"]["active"]["version"] == "v1"


def test_a_verdict_mix_halt_found_without_an_outcome_names_no_trigger(author):
    # v2 sends the sample's 15% discount to review: every canary decision is review, every active
    # one yes. No outcome is reported; a status read (or the background check) finds the trip.
    arms = _canary(author, 30, version("v2", approve_limit=10))
    assert {r["verdict"] for r in arms["canary"]} == {"review"} and {r["verdict"] for r in arms["active"]} == {"yes"}
    status = author.status().json
    assert status["state"]["canary"] is None
    halt = status["history"][-1]
    assert (halt["action"], halt["actor"]) == ("halt", "guardrail")
    evidence = halt["evidence"]
    assert evidence["tripped"] == ["verdict_mix"] and evidence["trigger"] is None
    assert evidence["failure_rate"]["judged"] is False and evidence["failure_rate"]["interval"] is None
    yes = next(c for c in evidence["verdict_mix"] if c["name"] == "verdict_mix.yes")
    assert yes["canary"]["events"] == 0 and yes["active"]["events"] == yes["active"]["n"] >= 30
    assert yes["difference"] == -1.0 and yes["interval"][0] == -1.0 and yes["tripped"] is True


def test_a_stale_guardrail_check_replays_its_halt_and_stops_nothing_started_since(client, author):
    # Two checks of one canary can race (an outcome's and the background thread's): the one that
    # loses must not record a second halt, which would stop whatever was started in between.
    arms = _canary(author, 30)
    releases = client.application.extensions["gate"].releases
    state = releases.state("tenant_a", "pricing_exception", fresh=True)
    for record in arms["active"]:
        author.outcome(record, "succeeded")
    for record in arms["canary"]:
        author.outcome(record, "failed")
    assert releases.state("tenant_a", "pricing_exception", fresh=True).canary is None
    assert author.act("shadow", version="v3").status_code == 201
    before = author.status().json["history"]
    report = evaluate(*releases.guardrails.arm_counts("tenant_a", state))
    assert report.tripped == ("failure_rate",)
    # The stale racer: its evidence (no trigger) differs from the recorded halt's under the same key.
    releases.guardrails._halt_for("tenant_a", "pricing_exception", state.canary, report, None)
    after = author.status().json
    assert after["history"] == before and after["state"]["shadow"]["version"] == "v3"


def test_a_guardrail_check_that_finds_the_canary_halted_by_a_person_does_nothing(client, author):
    author.publish(version("v1"))
    author.publish(version("v3", action="apply_discount_v3"))
    author.act("activate", version="v1")
    author.act("canary", version="v3", percent=50)
    releases = client.application.extensions["gate"].releases
    canary = releases.state("tenant_a", "pricing_exception", fresh=True).canary
    report = evaluate(ArmCounts({"yes": 30}, 30, 0), ArmCounts({"yes": 30}, 0, 30))
    assert report.tripped == ("failure_rate",)
    assert author.act("halt", reason="by hand").status_code == 201
    before = author.status().json["history"]
    releases.guardrails._halt_for("tenant_a", "pricing_exception", canary, report, None)  # checked before the person's halt
    assert author.status().json["history"] == before


def test_an_outcome_of_a_pinned_decision_runs_no_guardrail(client, author):
    # The verdict mix has tripped (every canary decision review, every active one yes), but no
    # status read or background check has looked yet (fewer than 50 canary decides). An outcome of
    # a decision pinned to a version is outside the canary's arms: it runs no check.
    arms = _canary(author, 30, version("v2", approve_limit=10))
    releases = client.application.extensions["gate"].releases
    assert releases.guardrails._canary_decides[("tenant_a", "pricing_exception")] < 50
    pinned = author.decide(by_reference(version_name="v1", subject="pinned-1")).json
    assert pinned["release_arm"]["arm"] == "pinned"
    assert author.outcome(pinned, "failed").status_code == 201
    assert releases.state("tenant_a", "pricing_exception", fresh=True).canary is not None
    # An outcome of the active arm does run it, and names itself.
    assert author.outcome(arms["active"][0], "succeeded").status_code == 201
    assert releases.state("tenant_a", "pricing_exception", fresh=True).canary is None
    trigger = author.status().json["history"][-1]["evidence"]["trigger"]
    assert (trigger["arm"], trigger["decision_id"]) == ("active", arms["active"][0]["decision_id"])
