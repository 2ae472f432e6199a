"""Issue 42 through HTTP: releases act by principals, the release policy is governed in the signed
history, and activation is guarded (a guardrail's halt, a required dry-run). Each finding of the
issue is reproduced as it was filed and must no longer work."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from itertools import pairwise

import pytest

from gate.principals import Principal
from gate.releases.events import verify_history
from gate.verify import TrustAnchors
from tests.releases.support import ALL, Api, version

POLICY = "/api/decision/release-policy"
APPROVER_HOLDER = "person:https://id.example#bob"
KEY_A_HOLDER = "service:key-a"
WHOLE = {"require_approval": False, "approval_ttl_seconds": 86400, "refuse_superseded_inline": False,
         "require_dry_run": False, "dry_run_canary_percent": 0, "dry_run_max_age_seconds": 604800}


@pytest.fixture
def key_a(client, issue_key):
    """Key A of finding 1, with every right a key can hold."""
    return Api(client, issue_key(permissions=ALL, holder=KEY_A_HOLDER)["api_key"])


@pytest.fixture
def approver(client, issue_key):
    return Api(client, issue_key(permissions="approve", holder=APPROVER_HOLDER)["api_key"])


def _policy(api: Api, method: str = "patch", **body):
    return getattr(api.client, method)(POLICY, json=body, headers=api.headers())


def _anchors(client) -> TrustAnchors:
    return TrustAnchors.from_registry_body(client.get("/api/decision/receipt-keys").get_data(), "key_registry_file")


def test_finding_1_one_key_can_no_longer_switch_approvals_off_and_activate_alone(client, issue_key, gate_env):
    """As filed: approvals on with a 3,600 s expiry, key A's activation pending, then key A sends
    `PUT {"require_approval": false}` (200) and activates alone (201), and the PUT reset the
    expiry to 86,400. Key A holds the rights it held in the report: publish, release, approve."""
    filed = Api(client, issue_key(permissions="decide,publish,release,approve")["api_key"])
    operator = _gate(gate_env, "release", "policy", "--scope", "tenant_a", "--require-approval", "--approval-ttl", "3600")
    assert operator.returncode == 0, operator.stderr
    filed.publish(version("v1"))
    assert filed.act("activate", version="v1").json["state"]["pending"][0]["action"] == "activate"
    as_filed = client.put(POLICY, json={"require_approval": False}, headers=filed.headers())
    assert as_filed.status_code == 403 and as_filed.json["permission"] == "admin"
    alone = filed.act("activate", version="v1")
    assert alone.status_code == 201 and alone.json["state"]["active"] is None  # only another request
    policy = client.get(POLICY, headers=filed.headers()).json["policy"]
    assert policy["require_approval"] is True and policy["approval_ttl_seconds"] == 3600


def test_even_an_admin_key_only_requests_a_weakening(client, key_a, approver):
    key_a.publish(version("v1"))
    assert _policy(key_a, require_approval=True, approval_ttl_seconds=3600).status_code == 200
    pending = key_a.act("activate", version="v1").json["state"]
    assert pending["active"] is None and len(pending["pending"]) == 1
    # The whole-policy PUT turning approvals off: a request, not a change.
    turned_off = _policy(key_a, "put", **{**WHOLE, "approval_ttl_seconds": 3600})
    assert turned_off.status_code == 202, turned_off.json
    assert turned_off.json["policy"]["require_approval"] is True
    request = turned_off.json["pending"][0]
    assert request["weakens"] == ["require_approval"] and request["requested_by"] == key_a_id(client, key_a)
    alone = key_a.act("activate", version="v1")
    assert alone.status_code == 201 and alone.json["state"]["active"] is None  # still only a request
    assert len(alone.json["state"]["pending"]) == 2
    # Nor can key A approve its own policy request.
    own = client.post(f"{POLICY}/approvals", json={"request_seq": request["request_seq"]}, headers=key_a.headers())
    assert own.status_code == 403 and own.json["error"] == "RELEASE_SELF_APPROVAL"
    assert client.get(POLICY, headers=key_a.headers()).json["policy"]["require_approval"] is True


def _gate(gate_env, *args: str) -> subprocess.CompletedProcess:
    environment = {**gate_env, "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PATH": os.environ.get("PATH", "")}
    return subprocess.run([sys.executable, "-m", "gate_cli.main", *args], capture_output=True, text=True,
                          env=environment, timeout=120)


def key_a_id(client, api: Api) -> str:
    from gate.keys.apikeys import hash_api_key

    return client.application.extensions["gate"].auth.ledger.api_key_by_hash(hash_api_key(api.key))["key_id"]


def test_a_second_principal_applies_a_weakening_and_the_history_shows_both(client, key_a, approver):
    key_a.publish(version("v1"))
    _policy(key_a, require_approval=True)
    request = _policy(key_a, require_approval=False).json["pending"][0]
    approved = client.post(f"{POLICY}/approvals", json={"request_seq": request["request_seq"], "reason": "pilot over"},
                           headers=approver.headers())
    assert approved.status_code == 200, approved.json
    assert approved.json["policy"]["require_approval"] is False and approved.json["pending"] == []
    event = approved.json["event"]
    assert event["principal"] == {"kind": "api_key", "id": key_a_id(client, approver), "holder": APPROVER_HOLDER}
    assert event["policy_before"]["require_approval"] is True and event["policy_after"]["require_approval"] is False
    again = client.post(f"{POLICY}/approvals", json={"request_seq": request["request_seq"]}, headers=approver.headers())
    assert again.status_code == 404 and again.json["error"] == "RELEASE_APPROVAL_NOT_FOUND"
    moved = key_a.act("activate", version="v1")
    assert moved.json["state"]["active"]["version"] == "v1"
    assert moved.json["event"]["principal"] == {"kind": "api_key", "id": key_a_id(client, key_a),
                                                "holder": KEY_A_HOLDER}
    assert moved.json["event"]["governance_seq"] == 3
    history = key_a.history().json
    check = verify_history(history["events"], _anchors(client), history["governance"])
    assert check.valid, check.problems
    assert [(c["action"], c["principal"]["id"]) for c in check.policy_changes] == [
        ("policy_set", key_a_id(client, key_a)), ("policy_request", key_a_id(client, key_a)),
        ("policy_approve", key_a_id(client, approver))]


def test_a_stale_policy_request_cannot_be_approved(client, key_a, approver):
    _policy(key_a, require_approval=True, approval_ttl_seconds=3600)
    request = _policy(key_a, approval_ttl_seconds=7200).json["pending"][0]
    assert request["weakens"] == ["approval_ttl_seconds"]
    assert _policy(key_a, approval_ttl_seconds=600).status_code == 200  # a stronger change applies at once
    stale = client.post(f"{POLICY}/approvals", json={"request_seq": request["request_seq"]}, headers=approver.headers())
    assert stale.status_code == 409 and stale.json["error"] == "RELEASE_POLICY_CHANGED"
    assert client.get(POLICY, headers=key_a.headers()).json["policy"]["approval_ttl_seconds"] == 600


def test_put_states_the_whole_policy_and_nothing_silently_resets(client, key_a):
    assert _policy(key_a, approval_ttl_seconds=3600).json["policy"]["approval_ttl_seconds"] == 3600
    partial = _policy(key_a, "put", require_approval=False)
    assert partial.status_code == 400 and partial.json["error"] == "RELEASE_POLICY_INVALID"
    assert partial.json["missing"] == ["approval_ttl_seconds", "refuse_superseded_inline", "require_dry_run",
                                       "dry_run_canary_percent", "dry_run_max_age_seconds"]
    assert "approval_ttl_seconds" in partial.json["message"]
    patched = _policy(key_a, refuse_superseded_inline=True)
    assert patched.json["policy"] == {**WHOLE, "approval_ttl_seconds": 3600, "refuse_superseded_inline": True}
    for bad in ({}, {"approval_ttl_seconds": 59}, {"require_dry_run": "yes"}, {"dry_run_canary_percent": 100},
                {"owner": "me"}):
        refused = _policy(key_a, **bad)
        assert refused.status_code == 400 and refused.json["error"] == "RELEASE_POLICY_INVALID", bad
    document = client.get(POLICY, headers=key_a.headers()).json
    assert document["policy"]["approval_ttl_seconds"] == 3600 and len(document["history"]) == 2
    unchanged = _policy(key_a, "put", **document["policy"])
    assert unchanged.status_code == 200 and unchanged.json["event"] is None  # nothing changed, nothing recorded


def test_the_policy_needs_admin_and_release_keys_no_longer_have_it(client, issue_key):
    releaser = Api(client, issue_key(permissions="publish,release,approve")["api_key"])
    for method in ("put", "patch"):
        denied = _policy(releaser, method, **WHOLE)
        assert denied.status_code == 403 and denied.json["permission"] == "admin"
    approve_only = client.post(f"{POLICY}/approvals", json={"request_seq": 1},
                               headers=Api(client, issue_key(permissions="admin")["api_key"]).headers())
    assert approve_only.status_code == 403 and approve_only.json["permission"] == "approve"
    assert client.get(POLICY, headers=releaser.headers()).json["history"] == []


def test_an_edited_or_deleted_policy_change_fails_verification(client, key_a, approver):
    key_a.publish(version("v1"))
    _policy(key_a, require_approval=True)
    key_a.act("shadow", version="v1")
    history = key_a.history().json
    anchors = _anchors(client)
    assert verify_history(history["events"], anchors, history["governance"]).valid
    edited = copy.deepcopy(history)
    edited["governance"][0]["policy_after"]["require_approval"] = False
    check = verify_history(edited["events"], anchors, edited["governance"])
    assert not check.valid and check.problems == ("policy event 1: event_hash does not match its content (tampered)",)
    deleted = verify_history(history["events"], anchors, [])
    assert not deleted.valid
    assert deleted.problems == ("event 1: names policy event 1, which the history lacks (deleted)",)


def test_a_version_its_guardrail_halted_needs_an_admin_override_with_a_reason(app, client, issue_key, key_a):
    releaser = Api(client, issue_key(permissions="publish,release")["api_key"])
    key_a.publish(version("v1"))
    key_a.publish(version("v2", approve_limit=10))
    key_a.act("activate", version="v1")
    key_a.act("canary", version="v2", percent=10)
    releases = app.extensions["gate"].releases
    scope = _scope(client, key_a)
    # What the guardrail's own halt records (ReleaseGuardrails._halt_for), as the guardrail.
    releases.act(scope, Principal.guardrail(), frozenset({"release"}), "pricing_exception",
                 {"action": "halt", "reason": "guardrail tripped: failure_rate",
                  "evidence": {"canary_version": "v2", "tripped": ["failure_rate"]}})
    refused = releaser.act("activate", version="v2")
    assert refused.status_code == 409 and refused.json["error"] == "RELEASE_VERSION_HALTED"
    not_admin = releaser.act("activate", version="v2", override="guardrail_halt", reason="fixed")
    assert not_admin.status_code == 403 and not_admin.json["permission"] == "admin"
    no_reason = key_a.act("activate", version="v2", override="guardrail_halt")
    assert no_reason.status_code == 409 and no_reason.json["error"] == "RELEASE_VERSION_HALTED"
    assert key_a.status().json["state"]["active"]["version"] == "v1"  # nothing changed
    overridden = key_a.act("activate", version="v2", override="guardrail_halt", reason="the failing adapter is fixed")
    assert overridden.status_code == 201 and overridden.json["state"]["active"]["version"] == "v2"
    assert overridden.json["event"]["override"] == "guardrail_halt"
    history = key_a.history().json
    assert verify_history(history["events"], _anchors(client), history["governance"]).valid
    # The override is part of the signed event: dropping it fails verification.
    history["events"][-1]["override"] = None
    assert not verify_history(history["events"], _anchors(client), history["governance"]).valid


def _scope(client, api: Api) -> str:
    from gate.keys.apikeys import hash_api_key

    return client.application.extensions["gate"].auth.ledger.api_key_by_hash(hash_api_key(api.key))["scope"]


def test_old_events_without_a_principal_still_verify(client, key_a):
    key_a.publish(version("v1"))
    key_a.act("activate", version="v1")
    history = key_a.history().json
    event = history["events"][0]
    for member in ("principal", "governance_seq", "override"):
        event.pop(member)
    from gate.chain.sealing import event_hash

    event["event_hash"] = event_hash(event)
    check = verify_history(history["events"], None, history["governance"])  # hashes and links (re-signed: no key)
    assert check.valid, check.problems
    assert json.loads(json.dumps(check.to_json()))["policy_changes"] == []


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_racing_policy_changes_make_one_gap_free_signed_chain(app, issue_key, backend):
    from concurrent.futures import ThreadPoolExecutor

    from gate.releases.governance import verify_governance

    client = app.test_client()
    key_a = Api(client, issue_key(permissions=ALL)["api_key"])

    def change(ttl: int) -> int:
        other = Api(app.test_client(), key_a.key)
        return _policy(other, approval_ttl_seconds=ttl).status_code

    with ThreadPoolExecutor(6) as pool:
        codes = list(pool.map(change, range(600, 1200, 100)))
    assert codes == [200] * 6
    history = client.get(POLICY, headers=key_a.headers()).json["history"]
    assert [e["seq"] for e in history] == [1, 2, 3, 4, 5, 6]
    assert all(e["previous_event_hash"] == p["event_hash"] for p, e in pairwise(history))
    check = verify_governance(history, _anchors(client), history[0]["scope_hash"])
    assert check.problem is None and check.policies[-1].approval_ttl_seconds == history[-1]["policy_after"][
        "approval_ttl_seconds"]
