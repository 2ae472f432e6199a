"""`gate_client.client` against live `gate serve` processes: a working gate, a gate that answers 503 (no
signing key), and a proxy that fails, stalls or tampers with the record in between."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import pytest

from gate_client.client import (
    DENY,
    PROCEED,
    REVIEW,
    GateClient,
    GateClientError,
    anchors_from_registry,
    route_record,
)
from tests.client.live_gate import LiveGate, Proxy

ROOT = Path(__file__).resolve().parents[2]
REQUESTS = ROOT / "gate" / "data" / "requests"

pytestmark = pytest.mark.slow


def sample(name: str) -> dict:
    return json.loads((REQUESTS / f"{name}.json").read_text())


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    gate = LiveGate(tmp_path_factory.mktemp("gate-live"))
    gate.home.mkdir(exist_ok=True)
    assert gate.cli("keys", "signing-init").returncode == 0
    gate.start()
    gate.key = gate.api_key()
    yield gate
    gate.stop()


@pytest.fixture(scope="module")
def unsigned(tmp_path_factory):
    """A gate with no signing key: every decide answers 503 and stores nothing."""
    gate = LiveGate(tmp_path_factory.mktemp("gate-unsigned"), env={"GATE_SIGNING_KEY_CHECK_MS": "0"})
    gate.start()
    gate.key = gate.api_key()
    yield gate
    gate.stop()


@pytest.fixture(scope="module")
def pinned(live, tmp_path_factory):
    """The operator's pinned key registry, saved once from the gate (as `gate verify` documents)."""
    path = tmp_path_factory.mktemp("pinned") / "receipt-keys.json"
    path.write_text(json.dumps(GateClient(live.base).receipt_keys()))
    return anchors_from_registry(path)


@pytest.fixture(scope="module")
def proxy(live):
    proxy = Proxy(live.base).start()
    yield proxy
    proxy.stop()


@pytest.fixture
def fresh_proxy(proxy):
    proxy.plan = type(proxy.plan)()
    return proxy


def client(base: str, key: str, anchors=None, **options) -> tuple[GateClient, list[float]]:
    sleeps: list[float] = []
    return GateClient(base, key, anchors=anchors, sleep=sleeps.append, **options), sleeps


@pytest.mark.parametrize("name, route", [("verdict-yes", PROCEED), ("verdict-no", DENY),
                                         ("verdict-review", REVIEW), ("verdict-needs-input", REVIEW)])
def test_only_a_verified_yes_proceeds(live, pinned, name, route):
    gate, _ = client(live.base, live.key, pinned)
    result = gate.route(sample(name))
    assert result.route == route, result.reason
    assert result.verification["verified"] is True and result.verification["key_source"] == "key_registry_file"
    assert result.proceed is (route == PROCEED)


def test_without_pinned_keys_nothing_proceeds(live):
    gate, _ = client(live.base, live.key)  # no trust anchors: authenticity cannot be proven
    result = gate.route(sample("verdict-yes"))
    assert result.route == REVIEW and "receipt_signature" in result.reason
    assert result.record["verdict"] == "yes"  # the gate said yes; the client still does not proceed


def test_retries_reuse_the_idempotency_key_and_never_make_a_second_record(live, pinned, fresh_proxy):
    fresh_proxy.plan.fail_first = 2
    gate, sleeps = client(fresh_proxy.base, live.key, pinned, retries=3, backoff=0.2)
    decision = gate.decide(sample("verdict-yes"), idempotency_key="order-42")
    keys = [seen["idempotency_key"] for seen in fresh_proxy.plan.seen]
    assert keys == ["order-42"] * 3 and decision.attempts == 3 and not decision.replayed
    assert len(sleeps) == 2 and 0.1 <= sleeps[0] <= 0.2 and 0.2 <= sleeps[1] <= 0.4  # backoff with jitter
    again = gate.decide(sample("verdict-yes"), idempotency_key="order-42")
    assert again.replayed and again.record["decision_id"] == decision.record["decision_id"]
    generated = gate.route(sample("verdict-yes"))
    assert generated.proceed and generated.idempotency_key.startswith("client-")


def test_a_gate_that_answers_503_routes_to_review_after_retries(unsigned):
    gate, sleeps = client(unsigned.base, unsigned.key, retries=2)
    result = gate.route(sample("verdict-yes"), idempotency_key="k-503")
    assert result.route == REVIEW and result.record is None
    assert result.error.status == 503 and result.error.attempts == 3 and len(sleeps) == 2
    assert result.error.body["c"] == "unclear"
    status = gate.status()  # degraded status is an answer, with the fix beside the problem
    assert status["status"] == "degraded" and "gate keys signing-init" in status["signing"]["fix"]


def test_html_502_from_a_proxy_is_retried_then_reviewed(live, pinned, fresh_proxy):
    fresh_proxy.plan.fail_first, fresh_proxy.plan.fail_status, fresh_proxy.plan.fail_html = 10, 502, True
    gate, sleeps = client(fresh_proxy.base, live.key, pinned, retries=1)
    result = gate.route(sample("verdict-yes"))
    assert result.route == REVIEW and result.error.code == "UNEXPECTED_RESPONSE" and result.error.status == 502
    assert len(fresh_proxy.plan.seen) == 2 and len(sleeps) == 1


def test_a_timeout_routes_to_review(live, pinned, fresh_proxy):
    fresh_proxy.plan.delay = 1.5
    gate, _ = client(fresh_proxy.base, live.key, pinned, timeout=0.4, retries=1)
    result = gate.route(sample("verdict-yes"))
    assert result.route == REVIEW and result.error.code == "TIMEOUT" and result.error.attempts == 2


def test_401_403_and_429_route_to_review_without_hammering(live, pinned):
    bad, sleeps = client(live.base, "dg_not-a-key", pinned)
    result = bad.route(sample("verdict-yes"))
    assert result.route == REVIEW and result.error.status == 401 and result.error.attempts == 1 and not sleeps

    key = live.api_key(scope="client-disabled")
    key_id = json.loads(live.cli("keys", "list", "--json").stdout)[-1]["key_id"]
    assert live.cli("keys", "disable", key_id).returncode == 0
    disabled, _ = client(live.base, key, pinned)
    result = disabled.route(sample("verdict-yes"))
    assert result.route == REVIEW and result.error.status == 403 and result.error.attempts == 1

    # rate_limit 1 per minute: of three quick calls at most two fall in different windows, so one is refused.
    limited, sleeps = client(live.base, live.api_key(scope="client-limited", rate_limit=1), pinned,
                             retries=2, max_backoff=0.5)
    results = [limited.route(sample("verdict-yes")) for _ in range(3)]
    refused = [r for r in results if r.error is not None]
    assert results[0].proceed and refused and all(r.route == REVIEW for r in refused)
    assert {(r.error.status, r.error.code) for r in refused} == {(429, "SVC_API_RATE_LIMITED")}
    # Retry-After (whole seconds) is longer than max_backoff: the client stops instead of waiting or hammering.
    assert all(r.error.retry_after >= 1 and r.error.attempts == 1 for r in refused) and not sleeps


def test_a_tampered_record_routes_to_review(live, pinned, fresh_proxy):
    gate, _ = client(fresh_proxy.base, live.key, pinned)
    assert gate.route(sample("verdict-no")).route == DENY  # untouched

    def flip_to_yes(record: dict) -> dict:
        record.update(verdict="yes", c="yes", action="apply_discount", reason_code="WITHIN_DISCOUNT_POLICY")
        return record

    fresh_proxy.plan.rewrite = flip_to_yes
    result = gate.route(sample("verdict-no"))
    assert result.record["verdict"] == "yes" and result.route == REVIEW
    assert "record_hash" in result.verification["failed_checks"]


def test_a_genuine_yes_for_another_request_routes_to_review(live, pinned, fresh_proxy):
    """A valid, signed `yes` replayed for a different request fails the input binding."""
    genuine = GateClient(live.base, live.key).decide(sample("verdict-yes")).record
    fresh_proxy.plan.rewrite = lambda _record: copy.deepcopy(genuine)
    gate, _ = client(fresh_proxy.base, live.key, pinned)
    result = gate.route(sample("verdict-no"))
    assert result.route == REVIEW and "input_hash" in result.verification["failed_checks"]
    assert gate.verify(genuine, sample("verdict-yes")).verified  # the record itself is authentic


def test_an_advisory_record_never_approves(live, pinned, fresh_proxy):
    gate, _ = client(live.base, live.key, pinned)
    approved = gate.route(sample("verdict-yes"))
    assert approved.proceed
    for contract in ({"production_verdict": False, "authority": "advisory_only"},
                     {"production_verdict": False},
                     {"production_verdict": True, "authority": "advisory_only"},
                     {"authority": "declarative_rulebook"},  # production_verdict missing: not a production verdict
                     "advisory"):
        advisory = {**approved.record, "decision_contract": contract}
        # Even with a verification that passed, an advisory record is never an approval.
        result = route_record(advisory, approved.verification)
        assert result.route == REVIEW and "advisory" in result.reason, contract
    production = {**approved.record, "decision_contract": {"production_verdict": True, "authority": "declarative_rulebook"}}
    assert route_record(production, approved.verification).proceed

    fresh_proxy.plan.rewrite = lambda record: {**record, "decision_contract": {"production_verdict": False,
                                                                               "authority": "advisory_only"}}
    via_proxy, _ = client(fresh_proxy.base, live.key, pinned)
    result = via_proxy.route(sample("verdict-yes"))
    assert result.route == REVIEW and "advisory" in result.reason


def test_receipts_outcome_packet_and_offline_verification(live, pinned):
    gate, _ = client(live.base, live.key, pinned)
    result = gate.route(sample("verdict-yes"))
    assert result.proceed
    execution = gate.execution(result.record, "executed", action_taken="apply_discount", target_system="billing",
                               idempotency_key="exec-1")
    again = gate.execution(result.record, "executed", action_taken="apply_discount", target_system="billing",
                           idempotency_key="exec-1")
    assert execution["ok"] and again["execution"] == execution["execution"]  # replayed, not duplicated
    outcome = gate.outcome(result.record, "succeeded", observed_metrics={"revenue_delta": 120.5})
    assert outcome["ok"] and outcome["outcome"]["outcome_status"] == "succeeded"

    packet = gate.packet(result.record["decision_id"], include_input=True)
    checked = gate.verify_packet(packet, sample("verdict-yes"))
    assert checked.verified, checked.to_dict()["failed_checks"]
    tampered = copy.deepcopy(packet)
    tampered["decision_record"]["verdict"] = "no"
    assert not gate.verify_packet(tampered).verified

    with pytest.raises(GateClientError) as missing:
        gate.packet("dec_does_not_exist")
    assert missing.value.status == 404 and missing.value.attempts == 1
    with pytest.raises(ValueError):
        gate.packet("../status")


def test_decide_by_reference_proceeds_only_on_the_signed_arm_of_that_rulebook(live, pinned, fresh_proxy, tmp_path):
    request = sample("verdict-yes")
    rulebook = tmp_path / "rulebook.json"
    rulebook.write_text(json.dumps(request["rulebook"]))
    scope = ["--scope", "client-tests"]
    assert live.cli("release", "publish", *scope, str(rulebook)).returncode == 0
    activated = live.cli("release", "activate", *scope, "--rulebook-id", request["rulebook"]["rulebook_id"],
                         "--version", request["rulebook"]["version"], "--reason", "client test")
    assert activated.returncode == 0, activated.stderr
    key = live.api_key(scope="client-tests", rate_limit=1000)  # this test decides more than the shared key's rate
    gate, _ = client(live.base, key, pinned)
    routed = gate.route_by_reference(request, request["rulebook"]["rulebook_id"])
    assert routed.proceed, routed.reason
    assert routed.record["release_arm"]["arm"] == "active"
    pinned_version = gate.route_by_reference(request, request["rulebook"]["rulebook_id"], request["rulebook"]["version"])
    assert pinned_version.proceed and pinned_version.record["release_arm"]["arm"] == "pinned"
    # A record re-labelled as another rulebook's arm, or with other facts, does not proceed.
    via_proxy, _ = client(fresh_proxy.base, key, pinned)
    fresh_proxy.plan.rewrite = lambda record: {**record, "release_arm": {**record["release_arm"], "rulebook_id": "x"}}
    assert via_proxy.route_by_reference(request, request["rulebook"]["rulebook_id"]).route == REVIEW
    # A record whose signed arm is removed still verifies as a record (the arm is outside
    # record_hash, docs/releases.md), but route_by_reference names the missing arm (SECURITY.md).
    fresh_proxy.plan.rewrite = lambda record: {k: v for k, v in record.items()
                                               if k not in ("release_arm", "release_arm_signature")}
    stripped = via_proxy.route_by_reference(request, request["rulebook"]["rulebook_id"])
    assert stripped.route == REVIEW and "release_arm" not in stripped.record
    assert stripped.verification["failed_checks"] == ["release_reference"]
    assert gate.verify(stripped.record).verified is True
    fresh_proxy.plan.rewrite = None
    other_facts = copy.deepcopy(request)
    other_facts["context"]["inputs"]["discount_percent"] = 1
    decided = gate.decide_by_reference(request, request["rulebook"]["rulebook_id"]).record
    from gate_client.client import by_reference_verification
    verification = by_reference_verification(decided, {**other_facts, "rulebook_ref": {
        "rulebook_id": request["rulebook"]["rulebook_id"]}}, gate.verify(decided, other_facts).to_dict())
    assert verification["verified"] is False
    unknown = gate.route_by_reference(request, "no_such_rulebook")
    assert unknown.route == REVIEW and unknown.error is not None and unknown.error.status == 404


def test_an_open_hold_waited_on_past_one_long_poll_makes_at_most_3_requests_and_no_429(live, pinned, fresh_proxy,
                                                                                         monkeypatch):
    """Issue 53 item 4: the last second of a wait asked `wait=0` again and again (180 requests in
    half a second, then 429 for the key's other routes). Now a wait long-polls at most the longest
    long-poll, sleeps the last fraction and asks once more: a wait of one long-poll and a second
    makes at most ceil(wait / longest) + 1 = 3 requests, every one answered. The client's longest
    long-poll is lowered from 30 s to 3 s here (the gate holds any `wait` from 0 to 30), so the
    same loop runs against the real gate in 4 s instead of 31."""
    from gate_client import resolutions
    from tests.holds.support import held_request

    monkeypatch.setattr(resolutions, "MAX_WAIT_SECONDS", 3)
    # A key of its own: the budget this test checks is its wait's alone, not what the module's
    # other tests spent on the shared key in the same minute (work-stealing runs them back to back).
    gate = GateClient(fresh_proxy.base, live.api_key(), anchors=pinned)  # real time: the last fraction is slept
    record = gate.decide(held_request()).record
    assert record["verdict"] == "review"
    fresh_proxy.plan.seen.clear()
    started = time.monotonic()
    route = gate.route_by_resolution(record, wait=4)
    elapsed = time.monotonic() - started
    assert route.route == REVIEW and route.error is None and route.reason == "the hold is open: not approved"
    polls = [seen["path"] for seen in fresh_proxy.plan.seen]
    assert 1 <= len(polls) <= 3 and all("/resolution?wait=" in path for path in polls), polls
    assert polls[0].endswith("wait=3")
    assert 3.5 <= elapsed <= 9, elapsed
    assert gate.route(sample("verdict-yes")).proceed
    assert gate.resolution(record["decision_id"])["state"] == "open"
