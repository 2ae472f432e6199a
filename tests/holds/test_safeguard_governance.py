"""Issue 52 through HTTP and the CLI: every safeguard setting (the release policy, the hold policy,
the event settings) changes through one governed path. While the scope requires approvals, a
weakening is a request a second, distinct principal approves, bound to the governance sequence it
was made at; every change is one signed event of the governance chain, and `gate verify` lists it
with who asked and who approved. Each defect is reproduced as filed and must no longer work."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest

from gate.keys.apikeys import hash_api_key
from gate.releases.governance import verify_governance
from gate.verify import TrustAnchors
from tests.cli_in_process import gate_in_process
from tests.holds.support import Holds, held_request, policy, queue
from tests.releases.support import version

RELEASE_POLICY = "/api/decision/release-policy"
HOLD_POLICY = "/api/holds/policy"
EVENT_SETTINGS = "/api/events/settings"


@pytest.fixture
def keys(issue_key):
    return {
        # defect 2's key: one admin with resolve (and decide, to ask for the action it then resolves)
        "admin": issue_key(permissions="decide,resolve,admin,publish,release")["api_key"],
        "approver": issue_key(permissions="approve")["api_key"],
        "approver2": issue_key(permissions="approve,admin")["api_key"],
        "reviewer": issue_key(permissions="resolve")["api_key"],
    }


def _h(keys, name):
    return {"x-api-key": keys[name]}


def _require_approvals(client, keys):
    on = client.patch(RELEASE_POLICY, json={"require_approval": True}, headers=_h(keys, "admin"))
    assert on.status_code == 200, on.get_json()


def _key_id(client, key: str) -> str:
    return client.application.extensions["gate"].auth.ledger.api_key_by_hash(hash_api_key(key))["key_id"]


def _approve(client, keys, route, request_seq, who="approver"):
    return client.post(f"{route}/approvals", json={"request_seq": request_seq}, headers=_h(keys, who))


# ------------------------------------------------------------------ defect 2: the hold policy


def test_defect_2_one_admin_key_no_longer_relaxes_four_eyes_and_approves_its_own_hold(client, keys):
    """As filed: PUT four_eyes false from one admin+resolve key was 200 and in force at once; the
    same key then decided, got `review`, and resolved its own hold (201 approved)."""
    _require_approvals(client, keys)
    relaxed = client.put(HOLD_POLICY, json=policy(four_eyes=False), headers=_h(keys, "admin"))
    assert relaxed.status_code == 202, relaxed.get_json()
    body = relaxed.get_json()
    assert body["policy"]["four_eyes"] is True and body["requested"] is True
    request = body["pending"][0]
    assert (request["setting"], request["weakens"], request["requested_by"]) == (
        "hold_policy", ["four_eyes"], _key_id(client, keys["admin"]))
    assert client.get(HOLD_POLICY, headers=_h(keys, "admin")).get_json()["policy"]["four_eyes"] is True
    admin = Holds(client, keys["admin"])
    record = admin.decide(held_request()).get_json()
    assert record["verdict"] == "review"
    own = admin.resolve(record["decision_id"])
    assert own.status_code == 403 and own.get_json()["error"] == "HOLD_FOUR_EYES"
    # nor does the requester approve its own request
    self_approved = client.post(f"{HOLD_POLICY}/approvals", json={"request_seq": request["request_seq"]},
                                headers=_h(keys, "admin"))
    assert self_approved.status_code == 403 and self_approved.get_json()["permission"] == "approve"
    twin = _approve(client, keys, HOLD_POLICY, request["request_seq"], "approver2")
    assert twin.status_code == 200  # another principal with approve applies it
    assert twin.get_json()["policy"]["four_eyes"] is False and twin.get_json()["pending"] == []


def test_defect_2_quorum_any_is_a_request_the_requester_cannot_approve(client, keys, issue_key):
    requester = issue_key(permissions="admin,approve")["api_key"]  # before approvals: a grant acts at once
    _require_approvals(client, keys)
    assert client.put(HOLD_POLICY, json=policy({"default": queue(quorum="two")}),
                      headers=_h(keys, "admin")).status_code == 200  # a stronger policy applies at once
    loosened = client.put(HOLD_POLICY, json=policy({"default": queue(quorum="any")}), headers={"x-api-key": requester})
    assert loosened.status_code == 202 and loosened.get_json()["pending"][0]["weakens"] == ["queues.default.quorum"]
    request_seq = loosened.get_json()["pending"][0]["request_seq"]
    own = client.post(f"{HOLD_POLICY}/approvals", json={"request_seq": request_seq}, headers={"x-api-key": requester})
    assert own.status_code == 403 and own.get_json()["error"] == "GOVERNANCE_SELF_APPROVAL"
    assert client.get(HOLD_POLICY, headers=_h(keys, "admin")).get_json()["policy"]["queues"]["default"][
        "quorum"] == "two"
    applied = _approve(client, keys, HOLD_POLICY, request_seq)
    assert applied.status_code == 200 and applied.get_json()["policy"]["queues"]["default"]["quorum"] == "any"
    event = applied.get_json()["event"]
    assert (event["setting"], event["action"], event["request_seq"]) == ("hold_policy", "policy_approve", request_seq)


def test_issue_64_three_weakenings_are_requests_and_the_next_hold_stays_guarded(client, keys):
    """As filed: under require_approval one admin alone applied (200, weakens=[]) an escalation
    added where there was none (the hold then sat in `default` needing one approval), quorum `all`
    [bob, carol] -> `two`, and a route or default_queue to a queue whose channels tell
    ext-desk@partner.example. Each is now a request; the policy in force is unchanged."""
    two = queue(quorum="two")
    ext = {**queue(), "notify": {"email": ["ext-desk@partner.example"], "every_seconds": 0}}
    board = queue(quorum="all", members=["person:https://idp.example#bob", "person:https://idp.example#carol"])
    routed = [{"policy_id": "pricing_exception", "rule_id": None, "queue": "two", "priority": "normal"}]
    stated = policy({"default": queue(), "two": two, "ext": ext, "board": board}, routes=routed)
    assert client.put(HOLD_POLICY, json=stated, headers=_h(keys, "admin")).status_code == 200
    _require_approvals(client, keys)
    changes = [
        ({**stated, "queues": {**stated["queues"], "two": {**two, "escalate_after_seconds": 5,
                                                           "escalate_to": "default"}}},
         ["queues.two.escalate_to"]),
        ({**stated, "queues": {**stated["queues"], "board": {**board, "quorum": "two"}}}, ["queues.board.members"]),
        ({**stated, "routes": [{**routed[0], "queue": "ext"}]}, ["routes[pricing_exception/*]"]),
        ({**stated, "default_queue": "ext"}, ["default_queue"]),
    ]
    for changed, weakens in changes:
        answer = client.put(HOLD_POLICY, json=changed, headers=_h(keys, "admin"))
        assert answer.status_code == 202, answer.get_json()
        assert answer.get_json()["pending"][-1]["weakens"] == weakens
    assert client.get(HOLD_POLICY, headers=_h(keys, "admin")).get_json()["policy"] == stated
    record = Holds(client, keys["admin"]).decide(held_request()).get_json()
    hold = Holds(client, keys["reviewer"]).show(record["decision_id"]).get_json()["hold"]
    assert (hold["queue"], hold["approvals_needed"], hold["escalate_at"]) == ("two", 2, None)


STRICT = {"default": queue(deadline=3600, quorum="all", members=["key_a", "key_b", "key_c"], justification=True,
                           escalate_after=600, escalate_to="leads"),
          "leads": queue(deadline=3600, quorum="two")}


@pytest.mark.parametrize(("change", "weakens"), [
    (lambda q: q["default"].update(quorum="two"), ["queues.default.quorum", "queues.default.members"]),
    (lambda q: q["default"].update(members=["key_a", "key_b"]), ["queues.default.quorum", "queues.default.members"]),
    (lambda q: q["default"].update(members=["key_a", "key_b", "key_d"]), ["queues.default.members"]),
    (lambda q: q["default"].update(deadline_seconds=7200), ["queues.default.deadline_seconds"]),
    (lambda q: q["default"].update(require_justification=False), ["queues.default.require_justification"]),
    (lambda q: q["default"].update(escalate_after_seconds=None, escalate_to=None),
     ["queues.default.escalate_after_seconds"]),
    (lambda q: q["default"].update(escalate_after_seconds=1200), ["queues.default.escalate_after_seconds"]),
    (lambda q: q.update(lax=queue(deadline=3600)) or q["default"].update(escalate_to="lax"),
     ["queues.default.escalate_to"]),
    (lambda q: q.update(lax=queue(deadline=3600)), ["default_queue"]),  # with default_queue moved below
    # issue 56: a reviewers' channel added sends held facts to a new recipient
    # and the queue escalating to it now reaches that recipient (issue 64)
    (lambda q: q["leads"].update(notify={"every_seconds": 0, "email": ["leads@example.org"]}),
     ["queues.default.escalate_to", "queues.leads.notify"]),
])
def test_each_weakening_of_the_hold_policy_waits_for_a_second_principal(client, keys, change, weakens):
    _require_approvals(client, keys)
    assert client.put(HOLD_POLICY, json=policy(copy.deepcopy(STRICT)), headers=_h(keys, "admin")).status_code == 200
    queues = copy.deepcopy(STRICT)
    change(queues)
    default = "lax" if weakens == ["default_queue"] else "default"
    answer = client.put(HOLD_POLICY, json=policy(queues, default_queue=default), headers=_h(keys, "admin"))
    assert answer.status_code == 202, answer.get_json()
    assert answer.get_json()["pending"][0]["weakens"] == weakens
    assert client.get(HOLD_POLICY, headers=_h(keys, "admin")).get_json()["policy"]["queues"] == STRICT


def test_widening_what_a_queue_s_channels_show_waits_for_a_second_principal(client, keys):
    """Issue 65: `queues.<q>.show` names what leaves the gate in the queue's e-mail and Slack; a
    wider one sends a request member or fact to a channel that had it masked, as a new recipient
    would, so it is a governed weakening; a narrower one applies at once."""
    loud = {"default": {**queue(), "notify": {"every_seconds": 0, "email": ["desk@example.org"]}}}
    assert client.put(HOLD_POLICY, json=policy(copy.deepcopy(loud)), headers=_h(keys, "admin")).status_code == 200
    _require_approvals(client, keys)
    wider = copy.deepcopy(loud)
    wider["default"]["show"] = ["question", "requested_action", "facts.days_since_purchase"]
    answer = client.put(HOLD_POLICY, json=policy(wider), headers=_h(keys, "admin"))
    assert answer.status_code == 202, answer.get_json()
    assert answer.get_json()["pending"][0]["weakens"] == ["queues.default.show"]
    assert "show" not in client.get(HOLD_POLICY, headers=_h(keys, "admin")).get_json()["policy"]["queues"]["default"]
    approved = _approve(client, keys, HOLD_POLICY, answer.get_json()["pending"][0]["request_seq"])
    assert approved.status_code == 200, approved.get_json()
    shown = client.get(HOLD_POLICY, headers=_h(keys, "admin")).get_json()["policy"]["queues"]["default"]
    assert shown["show"] == wider["default"]["show"]
    narrower = copy.deepcopy(wider)
    narrower["default"]["show"] = ["question"]
    assert client.put(HOLD_POLICY, json=policy(narrower), headers=_h(keys, "admin")).status_code == 200


def test_a_queue_s_reason_codes_change_at_once_as_a_signed_change_weakening_nothing(client, keys):
    """Issue 65: a queue's `reason_codes` say why a vote went as it did, not whether it counts: a
    list stated, narrowed, widened or dropped changes no guard, wait or recipient, so each applies
    at once under required approvals, one signed event of the governance chain each."""
    _require_approvals(client, keys)
    seen = []
    for codes in ({"approve": ["CHECKED"], "deny": ["NO_CODE"]}, {"approve": ["CHECKED"], "deny": ["NO_CODE", "LATE"]},
                  {"approve": ["CHECKED", "WAIVED"], "deny": ["LATE"]}, None):
        desk = {**queue(), **({"reason_codes": codes} if codes else {})}
        answer = client.put(HOLD_POLICY, json=policy({"default": desk}), headers=_h(keys, "admin"))
        assert answer.status_code == 200, answer.get_json()
        assert answer.get_json()["event"]["weakens"] == [] and answer.get_json()["pending"] == []
        assert answer.get_json()["policy"]["queues"]["default"].get("reason_codes") == codes
        seen.append(answer.get_json()["event"]["seq"])
    assert len(set(seen)) == 4


def test_a_stronger_hold_policy_applies_at_once_and_without_required_approvals_anything_does(client, keys):
    _require_approvals(client, keys)
    stronger = policy({"default": queue(deadline=600, quorum="two", justification=True)})
    answer = client.put(HOLD_POLICY, json=stronger, headers=_h(keys, "admin"))
    assert answer.status_code == 200 and answer.get_json()["event"]["weakens"] == []
    off = client.patch(RELEASE_POLICY, json={"require_approval": False}, headers=_h(keys, "admin"))
    request_seq = off.get_json()["pending"][0]["request_seq"]
    assert _approve(client, keys, RELEASE_POLICY, request_seq).status_code == 200
    relaxed = client.put(HOLD_POLICY, json=policy(four_eyes=False), headers=_h(keys, "admin"))
    assert relaxed.status_code == 200 and relaxed.get_json()["policy"]["four_eyes"] is False
    assert relaxed.get_json()["event"]["approvals_required"] is False


def test_the_hold_policy_needs_admin_and_its_approval_needs_approve(client, keys):
    denied = client.put(HOLD_POLICY, json=policy(), headers=_h(keys, "reviewer"))
    assert denied.status_code == 403 and denied.get_json()["error"] == "HOLD_PERMISSION_DENIED"
    no_right = client.post(f"{HOLD_POLICY}/approvals", json={"request_seq": 1}, headers=_h(keys, "reviewer"))
    assert no_right.status_code == 403 and no_right.get_json()["permission"] == "approve"
    for body in ({"request_seq": 0}, {"request_seq": "1"}, {"request_seq": 1, "extra": 1}, []):
        bad = client.post(f"{HOLD_POLICY}/approvals", json=body, headers=_h(keys, "approver"))
        assert bad.status_code == 400 and bad.get_json()["error"] == "GOVERNANCE_REQUEST_INVALID", body
    missing = _approve(client, keys, HOLD_POLICY, 7)
    assert missing.status_code == 404 and missing.get_json()["error"] == "GOVERNANCE_REQUEST_NOT_FOUND"


def test_a_release_policy_request_is_not_approved_through_the_hold_policy_route(client, keys):
    _require_approvals(client, keys)
    request = client.patch(RELEASE_POLICY, json={"require_approval": False}, headers=_h(keys, "admin"))
    request_seq = request.get_json()["pending"][0]["request_seq"]
    wrong = _approve(client, keys, HOLD_POLICY, request_seq)
    assert wrong.status_code == 404 and wrong.get_json()["error"] == "GOVERNANCE_REQUEST_NOT_FOUND"
    wrong = _approve(client, keys, EVENT_SETTINGS, request_seq)
    assert wrong.status_code == 404 and wrong.get_json()["error"] == "GOVERNANCE_REQUEST_NOT_FOUND"
    assert client.get(RELEASE_POLICY, headers=_h(keys, "admin")).get_json()["policy"]["require_approval"] is True


# ------------------------------------------------------------------ defect 4: bound to the sequence


def test_defect_4_a_stale_release_policy_request_stays_stale_when_the_policy_returns(client, keys):
    """As filed: request R under P; P changed to P' (approving R: 409); P' changed back to P;
    approving R was 200."""
    _require_approvals(client, keys)
    r = client.patch(RELEASE_POLICY, json={"approval_ttl_seconds": 172_800}, headers=_h(keys, "admin"))
    assert r.status_code == 202
    request_seq = r.get_json()["pending"][0]["request_seq"]
    stronger = client.patch(RELEASE_POLICY, json={"refuse_superseded_inline": True}, headers=_h(keys, "admin"))
    assert stronger.status_code == 200  # P'
    stale = _approve(client, keys, RELEASE_POLICY, request_seq)
    assert stale.status_code == 409 and stale.get_json()["error"] == "RELEASE_POLICY_CHANGED"
    back = client.patch(RELEASE_POLICY, json={"refuse_superseded_inline": False}, headers=_h(keys, "admin"))
    assert back.status_code == 202
    assert _approve(client, keys, RELEASE_POLICY, back.get_json()["pending"][-1]["request_seq"]).status_code == 200
    document = client.get(RELEASE_POLICY, headers=_h(keys, "admin")).get_json()
    assert document["policy"]["refuse_superseded_inline"] is False  # P again, value for value
    again = _approve(client, keys, RELEASE_POLICY, request_seq)
    assert again.status_code == 409 and again.get_json()["error"] == "RELEASE_POLICY_CHANGED"
    assert client.get(RELEASE_POLICY, headers=_h(keys, "admin")).get_json()["policy"]["approval_ttl_seconds"] == 86_400


def test_defect_4_a_stale_hold_policy_request_stays_stale_when_the_policy_returns(client, keys):
    _require_approvals(client, keys)
    r = client.put(HOLD_POLICY, json=policy(four_eyes=False), headers=_h(keys, "admin"))
    request_seq = r.get_json()["pending"][0]["request_seq"]
    stronger = policy({"default": queue(quorum="two")})
    assert client.put(HOLD_POLICY, json=stronger, headers=_h(keys, "admin")).status_code == 200
    back = client.put(HOLD_POLICY, json=policy(), headers=_h(keys, "admin"))
    assert back.status_code == 202
    assert _approve(client, keys, HOLD_POLICY, back.get_json()["pending"][-1]["request_seq"]).status_code == 200
    again = _approve(client, keys, HOLD_POLICY, request_seq)
    assert again.status_code == 409 and again.get_json()["error"] == "GOVERNANCE_SETTING_CHANGED"
    assert client.get(HOLD_POLICY, headers=_h(keys, "admin")).get_json()["policy"]["four_eyes"] is True


# ------------------------------------------------------------------ event settings


def test_turning_decision_created_on_is_a_request_and_the_refusal_names_the_events(client, keys, issue_key):
    requester = issue_key(permissions="admin,approve")["api_key"]  # before approvals: a grant acts at once
    _require_approvals(client, keys)
    denied = client.put(EVENT_SETTINGS, json={"decision_created": True, "anomaly_every_seconds": None},
                        headers=_h(keys, "reviewer"))
    assert denied.status_code == 403 and denied.get_json()["error"] == "EVENTS_PERMISSION_DENIED"
    listed = client.get("/api/events/subscriptions", headers=_h(keys, "reviewer"))
    assert listed.status_code == 403 and listed.get_json()["error"] == "EVENTS_PERMISSION_DENIED"
    on = client.put(EVENT_SETTINGS, json={"decision_created": True, "anomaly_every_seconds": None},
                    headers=_h(keys, "admin"))
    assert on.status_code == 202, on.get_json()
    assert on.get_json()["settings"]["decision_created"] is False
    assert on.get_json()["pending"][0]["weakens"] == ["decision_created"]
    request_seq = on.get_json()["pending"][0]["request_seq"]
    own = client.put(EVENT_SETTINGS, json={"decision_created": True, "anomaly_every_seconds": None},
                     headers={"x-api-key": requester})
    own_seq = own.get_json()["pending"][-1]["request_seq"]
    refused = client.post(f"{EVENT_SETTINGS}/approvals", json={"request_seq": own_seq},
                          headers={"x-api-key": requester})
    assert refused.status_code == 403 and refused.get_json()["error"] == "GOVERNANCE_SELF_APPROVAL"
    assert client.get(EVENT_SETTINGS, headers=_h(keys, "admin")).get_json()["settings"]["decision_created"] is False
    applied = _approve(client, keys, EVENT_SETTINGS, request_seq)
    assert applied.status_code == 200, applied.get_json()
    assert applied.get_json()["settings"]["decision_created"] is True
    assert applied.get_json()["settings"]["updated_by"] == _key_id(client, keys["approver"])
    # turning it off again never weakens: in force at once, one signed event
    off = client.put(EVENT_SETTINGS, json={"decision_created": False, "anomaly_every_seconds": 300},
                     headers=_h(keys, "admin"))
    assert off.status_code == 200 and off.get_json()["settings"]["anomaly_every_seconds"] == 300
    assert off.get_json()["event"]["setting"] == "event_settings" and off.get_json()["event"]["weakens"] == []


# ------------------------------------------------------------------ the CLI and gate verify


def _gate(gate_env, *args: str, process: bool = True) -> subprocess.CompletedProcess:
    """`gate ARGS` as a subprocess; `process=False` in process (tests.cli_in_process), for the
    repeated offline `gate verify` runs (its entry point runs as a subprocess once in this file)."""
    if not process:
        return gate_in_process(args, gate_env)
    environment = {**gate_env, "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PATH": os.environ.get("PATH", "")}
    return subprocess.run([sys.executable, "-m", "gate_cli.main", *args], capture_output=True, text=True,
                          env=environment, timeout=120)


def test_the_operator_only_requests_a_weaker_hold_policy_and_cannot_approve_it(client, keys, gate_env, tmp_path):
    assert _gate(gate_env, "release", "policy", "--scope", "tenant_a", "--require-approval").returncode == 0
    relaxed = tmp_path / "relaxed.json"
    relaxed.write_text(json.dumps(policy(four_eyes=False)))
    asked = _gate(gate_env, "holds", "policy", "--scope", "tenant_a", "--set", str(relaxed))
    assert asked.returncode == 0, asked.stderr
    shown = json.loads(asked.stdout)
    assert shown["policy"]["four_eyes"] is True and shown["event"]["action"] == "policy_request"
    assert "waits for a second principal (gate holds policy-approve" in asked.stderr
    request_seq = shown["pending"][0]["request_seq"]
    own = _gate(gate_env, "holds", "policy-approve", "--scope", "tenant_a", "--request-seq", str(request_seq))
    assert own.returncode == 2 and own.stderr.startswith("gate holds: GOVERNANCE_SELF_APPROVAL: ")
    assert client.get(HOLD_POLICY, headers=_h(keys, "admin")).get_json()["policy"]["four_eyes"] is True
    assert _approve(client, keys, HOLD_POLICY, request_seq).status_code == 200
    after = json.loads(_gate(gate_env, "holds", "policy", "--scope", "tenant_a").stdout)
    assert after["policy"]["four_eyes"] is False and after["pending"] == []


def _history(client, keys, tmp_path):
    """A release history of the scope whose governance chain changes all three settings."""
    admin = {"x-api-key": keys["admin"]}
    assert client.post("/api/decision/rulebooks", json=version("v1"), headers=admin).status_code in (200, 201)
    _require_approvals(client, keys)
    requested = client.put(HOLD_POLICY, json=policy(four_eyes=False), headers=admin).get_json()
    assert _approve(client, keys, HOLD_POLICY, requested["pending"][0]["request_seq"]).status_code == 200
    client.put(EVENT_SETTINGS, json={"decision_created": False, "anomaly_every_seconds": 300}, headers=admin)
    acted = client.post("/api/decision/rulebooks/pricing_exception/release", json={"action": "shadow", "version": "v1"},
                        headers=admin)
    assert acted.status_code == 201, acted.get_json()
    document = client.get("/api/decision/rulebooks/pricing_exception/release/history", headers=admin).get_json()
    registry = tmp_path / "registry.json"
    registry.write_bytes(client.get("/api/decision/receipt-keys").get_data())
    return document, registry


def test_gate_verify_lists_every_change_with_its_approvers(client, keys, gate_env, tmp_path):
    document, registry = _history(client, keys, tmp_path)
    path = tmp_path / "history.json"
    path.write_text(json.dumps(document))
    verified = _gate(gate_env, "verify", str(path), "--key-registry", str(registry))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    admin, approver = _key_id(client, keys["admin"]), _key_id(client, keys["approver"])
    lines = [line for line in verified.stdout.splitlines() if line.startswith("  policy event")]
    assert [line.split(" (api_key)")[0].split(" ", 6)[-1] for line in lines] == [
        f"release_policy policy_set by {admin}", f"hold_policy policy_request by {admin}",
        f"hold_policy policy_approve by {approver}", f"event_settings policy_set by {admin}"]
    assert f"requested by {admin}, approved by {admin} and {approver}" in lines[2]
    assert "waiting for a second principal" in lines[1]


def _resealed(client, event):
    """`event` hashed and signed again with the gate's own key: a forgery by whoever holds it."""
    from gate.chain.sealing import SIGNATURE_MEMBERS, seal

    event = {k: v for k, v in event.items() if k not in (*SIGNATURE_MEMBERS, "event_hash")}
    seal(event, client.application.extensions["gate"].signing.receipt_signer())
    return event


def test_gate_verify_refuses_a_forged_or_omitted_approval(client, keys, gate_env, tmp_path):
    document, registry = _history(client, keys, tmp_path)
    governance = document["governance"]
    anchors = TrustAnchors.from_registry_body(registry.read_bytes(), "key_registry_file")
    assert verify_governance(governance, anchors, document["scope_hash"]).problem is not None  # release rules only
    omitted = copy.deepcopy(document)
    del omitted["governance"][2]  # the approval
    self_approved = copy.deepcopy(document)  # the approval signed again as the requester's own
    self_approved["governance"][2] = _resealed(client, {**governance[2], "actor": governance[1]["actor"],
                                                        "principal": governance[1]["principal"]})
    applied_alone = copy.deepcopy(document)  # the request signed again as a change in force at once
    state = {**governance[2]["state"], "applied": {**governance[2]["state"]["applied"], "hold_policy": 2}}
    applied_alone["governance"][1] = _resealed(client, {**governance[1], "action": "policy_set", "expires_at": None,
                                                        "state": state})
    for name, bad, problem in (
            ("omitted", omitted, "policy event 3: seq 4, expected 3 (gap or reorder)"),
            ("self", self_approved,
             "policy event 3: the governance rules refuse this change (GOVERNANCE_SELF_APPROVAL)"),
            ("alone", applied_alone,
             "policy event 2: the governance rules refuse this change (GOVERNANCE_APPROVAL_REQUIRED)")):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(bad))
        refused = _gate(gate_env, "verify", str(path), "--key-registry", str(registry), process=False)
        assert refused.returncode == 1, (name, refused.stdout)
        assert "NOT VERIFIED" in refused.stdout and problem in refused.stdout, (name, refused.stdout)
