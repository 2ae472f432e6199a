"""Every error code in `api.errors.ERROR_TABLE`, triggered over HTTP, with its exact status and body.

A code added to the table without a case here fails `test_every_code_is_pinned`.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import os
import shutil
import time
from urllib.parse import quote

import pytest

from api.errors import ERROR_TABLE
from tests.releases.support import ALL, Api, by_reference, inline, version
from tests.server.support import Server, raw_exchange

RULEBOOK_REQUEST_ERRORS = {
    "RULEBOOK_OUTPUT_MATERIAL_FORBIDDEN",
    "RULEBOOK_BINDING_MODE_UNSUPPORTED",
    "RULEBOOK_BINDING_MODE_CONFLICT",
}


def _decide(client, key, body, **headers):
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return client.post("/api/decide", data=data, headers={"x-api-key": key, "content-type": "application/json", **headers})


def _with(sample, **changes):
    body = copy.deepcopy(sample)
    body.update(changes)
    return body


# Each case: code → function(ctx) returning the response. `ctx` has client, key, sample, make_app, issue_key.
CASES = {
    "JSON_INVALID": lambda c: _decide(c.client, c.key, b'{"mode": "rulebook",'),
    "JSON_NON_FINITE_NUMBER": lambda c: _decide(c.client, c.key, b'{"mode": "rulebook", "x": NaN}'),
    "JSON_DUPLICATE_KEY": lambda c: _decide(c.client, c.key, b'{"mode": "rulebook", "mode": "single"}'),
    "JSON_UNSAFE_INTEGER": lambda c: _decide(c.client, c.key, b'{"context": {"inputs": {"n": 9007199254740993}}}'),
    "JSON_TOO_DEEP": lambda c: _decide(c.client, c.key, ("[" * 50_000 + "]" * 50_000).encode()),
    "REQUEST_INVALID": lambda c: _decide(c.client, c.key, b"[1, 2]"),
    "REQUEST_TOO_LARGE": lambda c: _decide(
        c.make_app({"GATE_MAX_BODY_BYTES": "64"}).test_client(), c.key, c.sample),
    "SVC_API_UNAUTHORIZED": lambda c: c.client.post("/api/decide", json=c.sample),
    "SVC_API_RATE_LIMITED": lambda c: _exhaust(c, rate_limit=1),
    "SVC_API_MONTHLY_CAP_EXCEEDED": lambda c: _exhaust(c, monthly_cap=1),
    "LEGACY_MODE_UNAVAILABLE": lambda c: _decide(
        c.make_app({"GATE_ADVISORY_MODES": "false"}).test_client(), c.key, {"question": "Refund?", "mode": "single"}),
    "ADVISOR_UNAVAILABLE": lambda c: _decide(c.client, c.key, {"question": "Refund?", "mode": "multi"}),
    "ADVISOR_UPSTREAM_FAILED": lambda c: _decide(
        c.make_app({"GATE_ADVISOR_BASE_URL": "http://127.0.0.1:9", "GATE_ADVISOR_MODEL": "m",
                    "GATE_ADVISOR_TIMEOUT": "1"}).test_client(), c.key, {"question": "Refund?"}),
    "RULEBOOK_INVALID": lambda c: _decide(c.client, c.key, _with(c.sample, rulebook={**c.sample["rulebook"], "code": "x"})),
    "RULEBOOK_BINDING_MODE_UNSUPPORTED": lambda c: _decide(
        c.client, c.key, _with(c.sample, binding_mode="customer_executable_rulebook")),
    "RULEBOOK_BINDING_MODE_CONFLICT": lambda c: _decide(
        c.client, c.key, _with(c.sample, binding_mode="trusted_adapter_facts_then_declarative_rulebook")),
    "RULEBOOK_OUTPUT_MATERIAL_FORBIDDEN": lambda c: _decide(
        c.client, c.key, _with(c.sample, action="apply_discount", runtime_binding={})),
    "RULEBOOK_VERSION_CONFLICT": lambda c: _rebind(c),
    "TRUSTED_ADAPTER_INVALID": lambda c: _decide(c.client, c.key, _adapter(c.sample, {"adapter_id": "crm"})),
    "TRUSTED_ADAPTER_NOT_REGISTERED": lambda c: _decide(c.client, c.key, _adapter(c.sample, {
        "adapter_id": "crm_account_facts", "version": "1.0.0", "manifest_hash": "a" * 64, "input": {}})),
    "TRUSTED_ADAPTER_MANIFEST_MISMATCH": lambda c: _decide(c.client, c.key, _shipped("refund-window", manifest_hash="b" * 64)),
    "TRUSTED_ADAPTER_INPUT_INVALID": lambda c: _decide(c.client, c.key, _shipped("refund-window", input={})),
    "TRUSTED_ADAPTER_EXECUTION_TIMEOUT": lambda c: _misbehave(c, "spin"),
    "TRUSTED_ADAPTER_OUTPUT_INVALID": lambda c: _misbehave(c, "bad_output"),
    "TRUSTED_ADAPTER_CAPABILITY_DENIED": lambda c: _misbehave(c, "socket"),
    "TRUSTED_ADAPTER_UNAVAILABLE": lambda c: _worker_cannot_start(c),
    "TRUSTED_ADAPTER_NOT_FOUND": lambda c: c.client.get("/api/decision/adapters?adapter_id=refund_window&version=9.0.0"),
    "SVC_API_IDEMPOTENCY_CONFLICT": lambda c: _conflict(c),
    "DECISION_NOT_FOUND": lambda c: c.client.get("/api/decision/dec_missing", headers={"x-api-key": c.key}),
    "RULEBOOK_NOT_FOUND": lambda c: c.client.get("/api/decision/rulebooks?hash=" + "0" * 64, headers={"x-api-key": c.key}),
    "RULEBOOK_LOOKUP_INVALID": lambda c: c.client.get("/api/decision/rulebooks?rulebook_id=x", headers={"x-api-key": c.key}),
    "POLICY_BUNDLE_NOT_FOUND": lambda c: c.client.get("/api/decision/policy-bundles?hash=" + "0" * 64),
    "PILOT_IDEMPOTENCY_CONFLICT": lambda c: _pilot_conflict(c),
    "PILOT_NOT_FOUND": lambda c: c.client.post("/api/pilot", json={"pilot_id": "pilot_" + "0" * 24,
                                                                  "confirmation_token": "pct_x"}),
    "METRICS_UNAVAILABLE": lambda c: c.client.get("/api/proof-metrics", headers={"x-metrics-token": "x" * 20}),
    # Policy releases (docs/releases.md).
    "RULEBOOK_REF_INVALID": lambda c: _releases(c).decide({**by_reference(), "rulebook_ref": "pricing_exception"}),
    "RULEBOOK_NOT_ACTIVE": lambda c: _releases(c).decide(by_reference()),
    "RULEBOOK_SUPERSEDED": lambda c: _superseded(c),
    "RELEASE_ACTION_INVALID": lambda c: _releases(c).act("launch"),
    "RELEASE_TRANSITION_REFUSED": lambda c: _releases(c, active="v1").act("shadow", version="v1"),
    "RELEASE_NOTHING_TO_HALT": lambda c: _releases(c).act("halt"),
    "RELEASE_NOTHING_TO_ROLL_BACK": lambda c: _releases(c).act("rollback"),
    "RELEASE_APPROVAL_NOT_FOUND": lambda c: _approve_unknown(_releases(c)),
    "RELEASE_APPROVAL_MISMATCH": lambda c: _approval(c, own=False, rulebook_hash="0" * 64),
    "RELEASE_SELF_APPROVAL": lambda c: _approval(c, own=True),
    "RELEASE_PERMISSION_DENIED": lambda c: Api(c.client, c.key).publish(version("v1")),
    "RELEASE_IDEMPOTENCY_CONFLICT": lambda c: _idempotency_conflict(_releases(c)),
    "RELEASE_POLICY_INVALID": lambda c: c.client.put("/api/decision/release-policy", json={"require_approval": 1},
                                                     headers=_releases(c).headers()),
    "EVENT_SUBSCRIPTION_INVALID": lambda c: _events_call(c, "post", "/api/events/subscriptions",
                                                         {"url": "https://example.com/h", "event_types": []}),
    "EVENT_TARGET_REFUSED": lambda c: _events_call(c, "post", "/api/events/subscriptions",
                                                   {"url": "http://169.254.169.254/latest"}),
    "EVENT_SUBSCRIPTION_LIMIT": lambda c: _subscription_limit(c),
    "EVENT_SETTINGS_INVALID": lambda c: _events_call(c, "put", "/api/events/settings", {"decision_created": 1}),
    "EVENT_SUBSCRIPTION_NOT_FOUND": lambda c: _events_call(c, "get", "/api/events/subscriptions/sub_nope", None),
    "EVENT_SUBSCRIPTION_PENDING": lambda c: _pending_subscription_replay(c),
    "EVENT_NOT_FOUND": lambda c: _events_call(c, "post", f"/api/events/subscriptions/{_loopback_sub(c)}/replay",
                                              {"seq": 5}),
    "EVENTS_PRUNED": lambda c: _pruned_read(c),
    "DECISION_INPUTS_REMOVED": lambda c: _removed_replay(c),
    "RELEASE_POLICY_CHANGED": lambda c: _stale_policy_request(c),
    "RELEASE_VERSION_HALTED": lambda c: _halted(c),
    "RELEASE_DRY_RUN_REQUIRED": lambda c: _dry_run(c, None),
    "RELEASE_DRY_RUN_REJECTED": lambda c: _dry_run(c, {"schema_version": "rulebook_migration_v1"}),
    "METRICS_UNAUTHORIZED": lambda c: c.make_app({"GATE_METRICS_TOKEN": "m" * 20}).test_client().get(
        "/api/proof-metrics", headers={"x-metrics-token": "x" * 20}),
    "POLICY_PATTERN_NOT_FOUND": lambda c: c.client.get("/api/decision/policy-patterns?pattern_id=no_such_pattern"),
    "NOT_FOUND": lambda c: c.client.get("/api/nothing-here"),
    "UNSUPPORTED_MEDIA_TYPE": lambda c: c.client.post(
        "/api/decide", data=json.dumps(c.sample), headers={"x-api-key": c.key, "content-type": "text/plain"}),
    "METHOD_NOT_ALLOWED": lambda c: c.client.get("/api/decide"),
    "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED": lambda c: _decide(
        c.make_app({"GATE_SIGNING_KEY_FILE": "/nonexistent/keys.json"}).test_client(), c.key, c.sample),
    "LEDGER_UNAVAILABLE": lambda c: _broken_ledger(c),
    "RATE_LIMITER_UNAVAILABLE": lambda c: _decide(
        c.make_app({"GATE_REDIS_URL": "redis://127.0.0.1:1/0"}).test_client(), c.key, c.sample),
    "INTERNAL_ERROR": lambda c: _crash(c),
    "PUBLIC_VERIFY_BUSY": lambda c: _busy(c),
    "CHAIN_NOT_FOUND": lambda c: c.client.get("/api/decision/chains/chain_nope", headers={"x-api-key": c.key}),
    "SVC_CHAIN_UNAUTHORIZED": lambda c: c.client.get("/api/decision/chains/chain_nope"),
    "SVC_POLICY_EFFECTIVENESS_UNAUTHORIZED": lambda c: c.client.get("/api/decision/policies/p/effectiveness"),
    "SVC_POLICY_CONFIDENCE_UNAUTHORIZED": lambda c: c.client.get("/api/decision/policies/p/confidence"),
    "SVC_POLICY_ANOMALIES_UNAUTHORIZED": lambda c: c.client.get("/api/decision/policies/p/anomalies"),
    "SVC_POLICY_BENCHMARKS_UNAUTHORIZED": lambda c: c.client.get("/api/decision/policies/p/benchmarks"),
    "SVC_POLICY_HOLDS_UNAUTHORIZED": lambda c: c.client.get("/api/decision/policies/p/holds"),
    "SVC_CRM_SYNC_CREDENTIALS_FORBIDDEN": lambda c: _lifecycle(c, "crm-sync", extra={"password": "hunter2"}),
    "PACKET_SOURCE_UNAVAILABLE": lambda c: _packet_without_chain_nodes(c),
    "REPORTS_UNAVAILABLE": lambda c: _report_without_analytics(c),
    "CHAIN_INTEGRITY_FAILED": lambda c: _packet_of_a_rolled_back_head(c),
    "EVALUATION_INPUT_TOO_LARGE": lambda c: _decide(c.client, c.key, _with(
        c.sample, context={"inputs": {**c.sample["context"]["inputs"], "items": [0] * 10_001}})),
    "EVALUATION_TOO_COSTLY": lambda c: _decide(c.client, c.key, _costly(c.sample)),
    # Answered by the HTTP server (api.serving) before or while the application reads the request.
    "REQUEST_TIMEOUT": lambda c: _served(c, b"POST /api/decision/verify HTTP/1.1\r\nHost: t\r\n"
                                            b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"),
    "REQUEST_URI_TOO_LONG": lambda c: _served(c, b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\nHost: t\r\n\r\n"),
    "REQUEST_HEADERS_TOO_LARGE": lambda c: _served(
        c, b"GET /api/decision/status HTTP/1.1\r\nHost: t\r\nX-Big: " + b"a" * 18_000 + b"\r\n\r\n"),
    "EXPECTATION_FAILED": lambda c: _served(
        c, b"POST /api/decide HTTP/1.1\r\nHost: t\r\nExpect: nonsense\r\nContent-Length: 0\r\n\r\n"),
    "TRANSFER_CODING_UNSUPPORTED": lambda c: _served(
        c, b"POST /api/decide HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: br\r\n\r\n"),
}

LIFECYCLE = {"execution": "SVC_EXECUTION", "outcome": "SVC_OUTCOME", "crm-sync": "SVC_CRM_SYNC"}
for _path, _prefix in LIFECYCLE.items():
    CASES[f"{_prefix}_UNAUTHORIZED"] = lambda c, p=_path: c.client.post(f"/api/decision/dec_x/{p}", json={})
    CASES[f"{_prefix}_IDEMPOTENCY_CONFLICT"] = lambda c, p=_path: _lifecycle_conflict(c, p)
    CASES[f"{_prefix}_IDEMPOTENCY_IN_PROGRESS"] = lambda c, p=_path: _lifecycle_in_progress(c, p)
    CASES[f"{_prefix}_RECORD_MISMATCH"] = lambda c, p=_path: _lifecycle(c, p, extra={"decision_record_hash": "e" * 64})
    CASES[f"{_prefix}_UNAVAILABLE"] = lambda c, p=_path: _lifecycle_broken(c, p)
# Issue 41 item 7: an outcome's link names no execution receipt of its decision.
CASES["SVC_OUTCOME_EXECUTION_MISMATCH"] = lambda c: _lifecycle(
    c, "outcome", extra={"execution_receipt_id": "exe_" + "0" * 24, "execution_hash": "0" * 64})

# Issue 11 (w11a): policy checks and workflow routes (tests/policychecks/ covers them in depth).
CASES.update({
    "POLICY_CHECK_UNDECIDED": lambda c: _policycheck_undecided(c),
    "WORKFLOW_UNSUPPORTED": lambda c: c.client.post("/api/v1/workflows/fax/refund", json={}),
    "WORKFLOW_UNAUTHORIZED": lambda c: c.make_app({"GATE_WORKFLOW_TOKEN": "t" * 32}).test_client().post(
        "/api/v1/workflows/zendesk/refund", json={}),
    "WORKFLOW_IDEMPOTENCY_CONFLICT": lambda c: [
        c.client.post("/api/v1/workflows/zendesk/trial", json={"vendor": "canva", "ticket_id": "9"}),
        c.client.post("/api/v1/workflows/zendesk/trial", json={"vendor": "zoom", "ticket_id": "9"})][1],
})

# Issue 8: replay, diff and counterfactuals (tests/api/test_replay*.py, test_counterfactuals.py in depth).
CASES.update({
    "REPLAY_MODE_INVALID": lambda c: _replay(c, "replay", {"replay_mode": "yesterday"}),
    "REPLAY_INPUT_OVERRIDE_FORBIDDEN": lambda c: _replay(c, "replay", {"input": {"discount_percent": 1}}),
    "REPLAY_INPUT_UNAVAILABLE": lambda c: _replay(c, "replay", None, "UPDATE decisions SET request_json = ''"),
    "REPLAY_LINEAGE_UNAVAILABLE": lambda c: _replay(c, "replay", None, "DELETE FROM rulebook_snapshots"),
    "REPLAY_LINEAGE_MISMATCH": lambda c: _replay(c, "replay", None, "UPDATE rulebook_snapshots SET body_json = '{}'"),
    "COUNTERFACTUAL_SCENARIOS_INVALID": lambda c: _replay(c, "counterfactuals", {"scenarios": []}),
    "COUNTERFACTUAL_BASE_INPUT_UNAVAILABLE": lambda c: _replay(
        c, "counterfactuals", {"scenarios": [{"scenario_id": "a", "context_patch": {}}]},
        "UPDATE decisions SET request_json = ''"),
})


# Issue 43: held actions (tests/holds/ covers them in depth).
CASES.update({
    "HOLD_NOT_FOUND": lambda c: _hold_api(c, "decide,resolve").show("dec_" + "0" * 24),
    "HOLD_ALREADY_RESOLVED": lambda c: _resolved_twice(c),
    "HOLD_ALREADY_VOTED": lambda c: _voted_twice(c),
    "HOLD_CLAIMED": lambda c: _claimed(c),
    "HOLD_NOT_ESCALABLE": lambda c: _hold_api(c, "decide,resolve").act(_held_id(c), "escalate"),
    "HOLD_MOVE_LOOSENS": lambda c: _moved_looser(c),
    "HOLD_BUSY": lambda c: _hold_busy(c),
    "HOLD_PERMISSION_DENIED": lambda c: _hold_api(c, "decide").resolve(_held_id(c)),
    "HOLD_FOUR_EYES": lambda c: _four_eyes(c),
    "HOLD_NOT_A_MEMBER": lambda c: _not_a_member(c),
    "HOLD_RESOLUTION_INVALID": lambda c: _hold_api(c, "decide,resolve").resolve(_held_id(c), "perhaps"),
    "HOLD_POLICY_INVALID": lambda c: _hold_api(c, "decide,admin").put_policy({"four_eyes": "yes"}),
})

# Issue 56: Slack's interactions (tests/holds/test_channels.py covers each in its context).
CASES.update({
    "SLACK_NOT_CONFIGURED": lambda c: c.client.post("/api/integrations/slack/interactions", data=b"payload=%7B%7D"),
    "SLACK_REQUEST_STALE": lambda c: _slack(c, b"payload=%7B%7D", stamp="1"),
    "SLACK_SIGNATURE_INVALID": lambda c: _slack(c, b"payload=%7B%7D", secret="w" * 32),
    "SLACK_INTERACTION_INVALID": lambda c: _slack(c, b"payload=%7B%7D"),
    "SLACK_USER_UNKNOWN": lambda c: _slack(c, b"payload=" + quote(json.dumps({
        "type": "block_actions", "team": {"id": "T0001"}, "user": {"id": "U0001"},
        "actions": [{"action_id": "hold_approve", "value": "dec_1"}]})).encode()),
})
_SLACK_SECRET = "s" * 32


def _slack(c, body: bytes, *, stamp: str | None = None, secret: str = _SLACK_SECRET):
    """A Slack interaction to a gate with Slack configured, signed with `secret` at `stamp`."""
    if not hasattr(c, "slack_client"):
        grants = c.request.getfixturevalue("tmp_path") / "slack-grants.json"
        grants.write_text(json.dumps({"users": {}}))
        c.slack_client = c.make_app({"GATE_SLACK_SIGNING_SECRET": _SLACK_SECRET,
                                     "GATE_GRANTS_FILE": str(grants)}).test_client()
    stamp = str(int(time.time())) if stamp is None else stamp
    signature = "v0=" + hmac.new(secret.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256).hexdigest()
    return c.slack_client.post("/api/integrations/slack/interactions", data=body, headers={
        "X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": signature})

# Issue 52: every safeguard setting changes through one governed path (tests/holds/test_safeguard_governance.py).
CASES.update({
    "GOVERNANCE_REQUEST_INVALID": lambda c: _hold_policy_approval(c, {"request_seq": "1"}),
    "GOVERNANCE_REQUEST_NOT_FOUND": lambda c: _hold_policy_approval(c, {"request_seq": 99}),
    "GOVERNANCE_SELF_APPROVAL": lambda c: _weaker_hold_policy(c, own=True),
    "GOVERNANCE_SETTING_CHANGED": lambda c: _weaker_hold_policy(c, own=False, changed=True),
    "EVENTS_PERMISSION_DENIED": lambda c: c.client.get("/api/events/settings", headers={
        "x-api-key": c.issue_key(scope="events", permissions="decide")["api_key"]}),
    "KEYS_PERMISSION_DENIED": lambda c: c.client.post("/api/keys/grants/approvals", json={"request_seq": 1}, headers={
        "x-api-key": c.issue_key(scope="keys", permissions="decide,admin")["api_key"]}),
})

# Issue 67: the data map and the masking rules (tests/privacy/test_privacy_settings.py).
CASES.update({
    "PRIVACY_SETTINGS_INVALID": lambda c: c.client.put("/api/privacy", json={"data_map": {}}, headers={
        "x-api-key": c.issue_key(scope="privacy", permissions="decide,admin")["api_key"]}),
    "PRIVACY_PERMISSION_DENIED": lambda c: c.client.get("/api/privacy", headers={
        "x-api-key": c.issue_key(scope="privacy", permissions="decide")["api_key"]}),
    # A subject's export (tests/privacy/test_subject_export.py): a scope that names no subject key.
    "SUBJECT_KEY_UNDECLARED": lambda c: c.client.post("/api/subjects/exports", json={"subject": "cus_1"}, headers={
        "x-api-key": c.issue_key(scope="privacy", permissions="decide,admin")["api_key"]}),
    "SUBJECT_EXPORT_INVALID": lambda c: c.client.post("/api/subjects/exports", json={"subject": ""}, headers={
        "x-api-key": c.issue_key(scope="privacy", permissions="decide,admin")["api_key"]}),
    # A subject's erasure (tests/privacy/test_erasure.py): a malformed body; a subject no decision names.
    "SUBJECT_ERASURE_INVALID": lambda c: c.client.post("/api/subjects/erasures", json={"subject": ""}, headers={
        "x-api-key": c.issue_key(scope="privacy", permissions="decide,admin", holder="service:dpo")["api_key"]}),
    "SUBJECT_NOT_FOUND": lambda c: _unknown_subject(c),
})


def _unknown_subject(c):
    """An erasure asked in a scope whose data map names the subject key, of a subject no decision holds."""
    from tests.privacy.support import privacy

    headers = {"x-api-key": c.issue_key(scope="erasures", permissions="decide,admin",
                                        holder="service:dpo")["api_key"]}
    assert c.client.put("/api/privacy", json=privacy(), headers=headers).status_code == 200
    return c.client.post("/api/subjects/erasures", json={"subject": "cus_nobody"}, headers=headers)


def _hold_policy_approval(c, body, permissions="approve"):
    return c.client.post("/api/holds/policy/approvals", json=body, headers={
        "x-api-key": c.issue_key(scope="holds", permissions=permissions)["api_key"]})


def _weaker_hold_policy(c, *, own: bool, changed: bool = False):
    """A request to turn four eyes off while approvals are required, approved by its requester,
    or by another principal after the policy changed."""
    from tests.holds.support import policy, queue

    admin = {"x-api-key": c.issue_key(scope="holds", permissions="admin,approve")["api_key"]}
    other = {"x-api-key": c.issue_key(scope="holds", permissions="approve")["api_key"]}  # before approvals
    c.client.patch("/api/decision/release-policy", json={"require_approval": True}, headers=admin)
    request = c.client.put("/api/holds/policy", json=policy(four_eyes=False), headers=admin).json["pending"][0]
    if changed:
        c.client.put("/api/holds/policy", json=policy({"default": queue(quorum="two")}), headers=admin)
    body = {"request_seq": request["request_seq"]}
    return c.client.post("/api/holds/policy/approvals", json=body, headers=admin if own else other)


def _hold_api(c, permissions):
    from tests.holds.support import Holds

    return Holds(c.client, c.issue_key(scope="holds", permissions=permissions)["api_key"])


def _held_id(c):
    from tests.holds.support import held_request

    return _hold_api(c, "decide").decide(held_request()).json["decision_id"]


def _resolved_twice(c):
    decision_id, api = _held_id(c), _hold_api(c, "decide,resolve")
    api.resolve(decision_id)
    return api.resolve(decision_id)


def _two_person_policy(c, **queue_args):
    from tests.holds.support import policy, queue

    assert _hold_api(c, "decide,admin").put_policy(policy({"default": queue(**queue_args)})).status_code == 200


def _moved_looser(c):
    from tests.holds.support import policy, queue

    assert _hold_api(c, "decide,admin").put_policy(policy({"default": queue(quorum="two"), "lax": queue()})
                                                   ).status_code == 200
    return _hold_api(c, "decide,resolve").act(_held_id(c), "reassign", {"queue": "lax"})


def _voted_twice(c):
    _two_person_policy(c, quorum="two")
    decision_id, api = _held_id(c), _hold_api(c, "decide,resolve")
    api.resolve(decision_id)
    return api.resolve(decision_id)


def _claimed(c):
    decision_id = _held_id(c)
    _hold_api(c, "decide,resolve").act(decision_id, "claim")
    return _hold_api(c, "decide,resolve").resolve(decision_id)


def _hold_busy(c):
    from gate.ledger.holds import HoldRace

    decision_id = _held_id(c)

    def always_raced(*args, **kwargs):
        raise HoldRace("busy")

    c.client.application.extensions["gate"].holds.holds.append = always_raced
    return _hold_api(c, "decide,resolve").resolve(decision_id)


def _four_eyes(c):
    from tests.holds.support import held_request

    api = _hold_api(c, "decide,resolve")
    return api.resolve(api.decide(held_request()).json["decision_id"])


def _not_a_member(c):
    _two_person_policy(c, quorum="all", members=["someone_else", "and_another"])
    return _hold_api(c, "decide,resolve").resolve(_held_id(c))


def _replay(c, path, body, statement=None):
    from sqlalchemy import text

    app = c.make_app()
    record = _decide(app.test_client(), c.key, c.sample).json
    if statement:
        with app.extensions["gate"].ledger.engine.begin() as connection:
            connection.execute(text(statement))
    client = c.make_app().test_client()  # a fresh app: no snapshot cached in process
    return client.post(f"/api/decision/{record['decision_id']}/{path}", json=body, headers={"x-api-key": c.key})


def _policycheck_undecided(c):
    from tests.policychecks.support import undecided_service

    app = c.make_app(policychecks=undecided_service(c.request.getfixturevalue("tmp_path")))
    return app.test_client().post("/api/v1/refund/eligibility", json={"vendor": "adobe", "days_since_purchase": 1})

# Extra members each body must carry (beyond c, v, error, message).
DETAILS = {
    "EVENTS_PRUNED": {"pruned_through", "oldest_kept"},
    "DECISION_INPUTS_REMOVED": {"removed"},
    "SVC_API_RATE_LIMITED": {"retry_after"},
    "SVC_API_MONTHLY_CAP_EXCEEDED": {"retry_after", "monthly_cap", "period"},
    "SVC_API_IDEMPOTENCY_CONFLICT": {"idempotency_key", "decision_id", "input_hash", "existing_input_hash"},
    "RULEBOOK_INVALID": {"errors"},
    "RELEASE_VERSION_HALTED": {"version"},
    "RELEASE_DRY_RUN_REJECTED": {"problems"},
    "RULEBOOK_BINDING_MODE_UNSUPPORTED": {"binding_mode", "supported_binding_modes"},
    "RULEBOOK_BINDING_MODE_CONFLICT": {"binding_mode", "inferred_binding_mode"},
    "RULEBOOK_OUTPUT_MATERIAL_FORBIDDEN": {"forbidden_fields"},
    "RULEBOOK_VERSION_CONFLICT": {"rulebook_id", "version", "registered_hash", "supplied_hash"},
    "TRUSTED_ADAPTER_INVALID": {"errors"},
    "TRUSTED_ADAPTER_NOT_REGISTERED": {"adapter_id", "version"},
    "TRUSTED_ADAPTER_MANIFEST_MISMATCH": {"adapter_id", "version", "expected_manifest_hash", "registered_manifest_hash"},
    "TRUSTED_ADAPTER_INPUT_INVALID": {"adapter_id", "version", "errors"},
    "TRUSTED_ADAPTER_EXECUTION_TIMEOUT": {"adapter_id", "version", "execution_timeout_ms"},
    "TRUSTED_ADAPTER_OUTPUT_INVALID": {"adapter_id", "version", "errors"},
    "TRUSTED_ADAPTER_CAPABILITY_DENIED": {"adapter_id", "version", "capabilities"},
    "TRUSTED_ADAPTER_UNAVAILABLE": {"adapter_id", "version", "reason"},
    "TRUSTED_ADAPTER_NOT_FOUND": {"adapter_id", "version"},
    "REQUEST_INVALID": {"errors"},
    "REQUEST_TOO_LARGE": {"max_bytes"},
    "EVALUATION_INPUT_TOO_LARGE": {"limit", "maximum"},
    "EVALUATION_TOO_COSTLY": {"work", "maximum"},
    "UNSUPPORTED_MEDIA_TYPE": {"content_type"},
    "LEGACY_MODE_UNAVAILABLE": {"mode", "supported_modes"},
    "ADVISOR_UNAVAILABLE": {"mode", "advisors"},
    "PILOT_IDEMPOTENCY_CONFLICT": {"idempotency_key"},
    "ADVISOR_UPSTREAM_FAILED": {"advisor_id", "advisor_error"},
    "SVC_CRM_SYNC_CREDENTIALS_FORBIDDEN": {"forbidden_fields"},
    "REPLAY_MODE_INVALID": {"replay_mode", "supported_replay_modes"},
    "REPLAY_LINEAGE_UNAVAILABLE": {"lineage_component"},
    "CHAIN_INTEGRITY_FAILED": {"chain_id", "failed_checks"},
    "REPLAY_LINEAGE_MISMATCH": {"lineage_component", "expected", "actual"},
    "COUNTERFACTUAL_SCENARIOS_INVALID": {"errors", "max_scenarios"},
    **{f"{p}_IDEMPOTENCY_CONFLICT": {"idempotency_key", "input_hash", "existing_input_hash"}
       for p in ("SVC_EXECUTION", "SVC_OUTCOME", "SVC_CRM_SYNC")},
    **{f"{p}_RECORD_MISMATCH": {"expected", "supplied"} for p in ("SVC_EXECUTION", "SVC_OUTCOME", "SVC_CRM_SYNC")},
    "SVC_OUTCOME_EXECUTION_MISMATCH": {"fields", "supplied"},
}


def _lifecycle_body(path, record, extra=None):
    body = {
        "execution": {"execution_status": "executed", "decision_record_hash": record["record_hash"],
                      "decision_receipt_hash": record["receipt_hash"]},
        "outcome": {"outcome_status": "succeeded"},
        "crm-sync": {"sync_status": "written", "crm_provider": "hubspot", "crm_object_id": "deal_1"},
    }[path]
    return {**body, **(extra or {})}


def _lifecycle(c, path, extra=None, key=None, client=None):
    client = client or c.client
    record = _decide(client, c.key, c.sample).json
    headers = {"x-api-key": c.key, **({"x-idempotency-key": key} if key else {})}
    return client.post(f"/api/decision/{record['decision_id']}/{path}",
                       json=_lifecycle_body(path, record, extra), headers=headers)


def _lifecycle_conflict(c, path):
    record = _decide(c.client, c.key, c.sample).json
    url = f"/api/decision/{record['decision_id']}/{path}"
    headers = {"x-api-key": c.key, "x-idempotency-key": "k"}
    c.client.post(url, json=_lifecycle_body(path, record), headers=headers)
    return c.client.post(url, json=_lifecycle_body(path, record, {"external_ref": "other"}), headers=headers)


def _lifecycle_in_progress(c, path):
    from gate.clock import SystemClock, iso_ms
    from gate.ledger.tables import idempotency_claims
    from gate.receipts import request_input_hash

    record = _decide(c.client, c.key, c.sample).json
    body = _lifecycle_body(path, record)
    app = c.client.application
    with app.extensions["gate"].ledger.engine.begin() as connection:
        connection.execute(idempotency_claims.insert().values(
            scope="tenant_a", kind=path.replace("-", "_"), idempotency_key="busy",
            decision_id=record["decision_id"], input_hash=request_input_hash(body), state="pending",
            claim_token="t" * 32, claimed_at=iso_ms(SystemClock().now()), receipt_id=None))
    return c.client.post(f"/api/decision/{record['decision_id']}/{path}", json=body,
                         headers={"x-api-key": c.key, "x-idempotency-key": "busy"})


def _lifecycle_broken(c, path):
    from sqlalchemy import text

    record = _decide(c.client, c.key, c.sample).json
    with c.client.application.extensions["gate"].ledger.engine.begin() as connection:
        connection.execute(text("DROP TABLE lifecycle_receipts"))
    return c.client.post(f"/api/decision/{record['decision_id']}/{path}",
                         json=_lifecycle_body(path, record), headers={"x-api-key": c.key})


def _packet_without_chain_nodes(c):
    from sqlalchemy import text

    records = [_decide(c.client, c.key, c.sample).json for _ in range(3)]  # its proof needs stored nodes
    record = records[0]
    with c.client.application.extensions["gate"].ledger.engine.begin() as connection:
        connection.execute(text("DROP TABLE merkle_nodes"))
    return c.client.get(f"/api/decision/{record['decision_id']}/packet", headers={"x-api-key": c.key})


def _report_without_analytics(c):
    from api.app import create_app  # the API alone: composed without report engines (issue 66, item 4)

    app = create_app(c.client.application.extensions["gate"].settings)
    try:
        return app.test_client().get("/api/decision/policies/pricing/effectiveness", headers={"x-api-key": c.key})
    finally:
        app.extensions["gate"].ledger.dispose()


def _packet_of_a_rolled_back_head(c):
    from sqlalchemy import text

    record = _decide(c.client, c.key, c.sample).json
    _decide(c.client, c.key, c.sample)
    with c.client.application.extensions["gate"].ledger.engine.begin() as connection:
        connection.execute(text("UPDATE chain_heads SET size = size - 1"))
    return c.client.get(f"/api/decision/{record['decision_id']}/packet", headers={"x-api-key": c.key})


def _adapter(sample, adapter):
    body = copy.deepcopy(sample)
    del body["context"]["inputs"]
    body["binding_mode"] = "trusted_adapter_facts_then_declarative_rulebook"
    body["adapter"] = adapter
    return body


def _costly(sample):
    body = copy.deepcopy(sample)
    body["context"]["inputs"]["items"] = [0] * 10_000
    leaves = [{"field": "items", "operator": "contains", "value": i} for i in range(1, 31)]
    body["rulebook"]["rules"][0]["condition"] = {"any": [body["rulebook"]["rules"][0]["condition"], *leaves]}
    return body


def _busy(c):
    from tests.api.test_public_limits import hold_a_verification_slot

    app = c.make_app({"GATE_PUBLIC_VERIFY_CONCURRENCY": "1"})
    give_back = hold_a_verification_slot(app)
    try:
        return app.test_client().post("/api/decision/verify", json={"record": {}})
    finally:
        give_back()


def _exhaust(c, **limits):
    from datetime import UTC, datetime

    from gate.clock import FixedClock

    # One instant for both decides: the rate limit's window is a minute of the service clock, and
    # a second decide in the next minute would rightly be admitted. The app is built with it.
    client = c.make_app(clock=FixedClock(datetime.now(UTC))).test_client()
    key = c.issue_key(**limits)["api_key"]
    _decide(client, key, c.sample)
    return _decide(client, key, c.sample)


def _rebind(c):
    _decide(c.client, c.key, c.sample)
    changed = copy.deepcopy(c.sample)
    changed["rulebook"]["default_outcome"]["reason_code"] = "CHANGED"
    return _decide(c.client, c.key, changed)


def _conflict(c):
    _decide(c.client, c.key, c.sample, **{"x-idempotency-key": "same"})
    changed = copy.deepcopy(c.sample)
    changed["question"] = "different"
    return _decide(c.client, c.key, changed, **{"x-idempotency-key": "same"})


def _shipped(name, **changes):
    from tests.adapters.support import sample

    body = sample(name)
    body["adapter"].update(changes)
    return body


def _misbehave(c, mode):
    from tests.adapters.support import adapter_request, generous_time_budget, register_test_adapters

    if mode != "spin":  # the refusal under test strikes, not the 1,000 ms budget of a loaded host
        generous_time_budget(c.client.application)
    misbehaving, _ = register_test_adapters(c.client.application)
    return _decide(c.client, c.key, adapter_request(misbehaving, {"mode": mode}))


def _worker_cannot_start(c):
    from gate.adapters import executor

    c.request.getfixturevalue("monkeypatch").setattr(executor, "WORKER_SCRIPT", "/nonexistent/worker.py")
    app = c.make_app({"GATE_ADAPTER_POOL_SIZE": "0"})
    return _decide(app.test_client(), c.key, _shipped("pricing-margin"))


def _broken_ledger(c):
    from sqlalchemy import text

    app = c.make_app()
    with app.extensions["gate"].ledger.engine.begin() as connection:
        connection.execute(text("DROP TABLE decisions"))
    return _decide(app.test_client(), c.key, c.sample)


def _pilot_conflict(c):
    intake = {"company": "Acme", "contact_name": "Ada", "contact_email": "ada@acme.example", "use_case": "other",
              "monthly_decisions": 10, "consent": True}
    assert c.client.post("/api/pilot", json=intake).status_code == 201
    return c.client.post("/api/pilot", json={**intake, "monthly_decisions": 11})


def _crash(c):
    app = c.make_app()

    def explode(*args, **kwargs):
        raise RuntimeError("boom")

    app.extensions["gate"].service.decide = explode
    return _decide(app.test_client(), c.key, c.sample)


def _releases(c, active: str | None = None) -> Api:
    """A key with every release permission, with v1 and v2 of the sample rulebook published."""
    api = Api(c.client, c.issue_key(scope="releases", permissions=ALL)["api_key"])
    api.publish(version("v1"))
    api.publish(version("v2", approve_limit=10))
    if active is not None:
        api.act("activate", version=active)
    return api


def _superseded(c):
    api = _releases(c, active="v2")
    c.client.patch("/api/decision/release-policy", json={"refuse_superseded_inline": True}, headers=api.headers())
    c.client.application.extensions["gate"].releases.reader.cache_seconds = 0
    return api.decide(inline(version("v1")))


def _approval(c, *, own: bool, rulebook_hash: str | None = None):
    api = _releases(c)
    approver = api if own else Api(c.client, c.issue_key(scope="releases", permissions="approve")["api_key"])
    c.client.patch("/api/decision/release-policy", json={"require_approval": True}, headers=api.headers())
    pending = api.act("activate", version="v1").json["state"]["pending"][0]
    return approver.act("approve", request_seq=pending["request_seq"], version="v1",
                        rulebook_hash=rulebook_hash or pending["rulebook_hash"])


def _stale_policy_request(c):
    api = _releases(c)
    approver = Api(c.client, c.issue_key(scope="releases", permissions="approve")["api_key"])
    policy = "/api/decision/release-policy"
    c.client.patch(policy, json={"require_approval": True, "approval_ttl_seconds": 3600}, headers=api.headers())
    request = c.client.patch(policy, json={"approval_ttl_seconds": 7200}, headers=api.headers()).json["pending"][0]
    c.client.patch(policy, json={"approval_ttl_seconds": 600}, headers=api.headers())
    return c.client.post(f"{policy}/approvals", json={"request_seq": request["request_seq"]},
                         headers=approver.headers())


def _halted(c):
    from gate.principals import Principal

    api = _releases(c, active="v1")
    api.act("canary", version="v2", percent=10)
    c.client.application.extensions["gate"].releases.act(
        "releases", Principal.guardrail(), frozenset({"release"}), "pricing_exception",
        {"action": "halt", "reason": "guardrail tripped", "evidence": {"canary_version": "v2"}})
    return api.act("activate", version="v2")


def _dry_run(c, manifest):
    api = _releases(c)
    c.client.patch("/api/decision/release-policy", json={"require_dry_run": True}, headers=api.headers())
    return api.act("activate", version="v1", **({"migration_manifest": manifest} if manifest else {}))


def _approve_unknown(api: Api):
    published = api.publish(version("v1")).json["rulebook"]
    return api.act("approve", request_seq=9, version="v1", rulebook_hash=published["hash"])


def _idempotency_conflict(api: Api):
    api.act("activate", version="v1", key="k-1")
    return api.act("activate", version="v2", key="k-1")


def _events_app(c):
    """An app that may call loopback webhooks, and an admin key's headers on it."""
    if not hasattr(c, "events_client"):
        c.events_client = c.make_app({"GATE_WEBHOOK_ALLOW_HOSTS": "127.0.0.1"}).test_client()
        c.events_headers = {"x-api-key": c.issue_key(scope="events", permissions="decide,admin")["api_key"]}
    return c.events_client, c.events_headers


def _events_call(c, method: str, path: str, body):
    client, headers = _events_app(c)
    return getattr(client, method)(path, json=body, headers=headers)


def _loopback_sub(c) -> str:
    response = _events_call(c, "post", "/api/events/subscriptions", {"url": "http://127.0.0.1:9/hook"})
    return response.json["subscription"]["subscription_id"]


def _pruned_read(c):
    """An event of the scope (its settings' change), pruned 31 days later, then read."""
    from datetime import UTC, datetime, timedelta

    client, headers = _events_app(c)
    assert _events_call(c, "put", "/api/events/settings", {"decision_created": True,
                                                           "anomaly_every_seconds": None}).status_code == 200
    events = client.application.extensions["gate"].events
    events.retention.clock = type("Later", (), {"now": staticmethod(lambda: datetime.now(UTC) + timedelta(days=31))})()
    assert events.retention.prune() == 1
    return client.get("/api/events?after=0", headers=headers)


def _removed_replay(c):
    """Issue 67: a decision whose inputs the facts' retention removed, then replayed."""
    from datetime import UTC, datetime

    from gate.clock import FixedClock
    from gate.services.removal import InputRemoval

    record = _decide(c.client, c.key, c.sample).json
    removal = InputRemoval(c.client.application.extensions["gate"].ledger, FixedClock(datetime.now(UTC)))
    assert removal.remove("tenant_a", [record["decision_id"]], removal.cause("retention", "30 days"))
    return c.client.post(f"/api/decision/{record['decision_id']}/replay", json={},
                         headers={"x-api-key": c.key})


def _pending_subscription_replay(c):
    """Issue 64: a subscription made while the scope requires approvals waits for a second holder;
    a replay to it meanwhile is refused."""
    client = c.make_app({"GATE_WEBHOOK_ALLOW_HOSTS": "127.0.0.1"}).test_client()
    headers = {"x-api-key": c.issue_key(scope="governed", permissions="admin,release")["api_key"]}
    assert client.patch("/api/decision/release-policy", json={"require_approval": True},
                        headers=headers).status_code == 200
    made = client.post("/api/events/subscriptions", json={"url": "http://127.0.0.1:9/hook"}, headers=headers)
    assert made.status_code == 202, made.json
    return client.post(f"/api/events/subscriptions/{made.json['subscription']['subscription_id']}/replay",
                       json={"seq": 1}, headers=headers)


def _subscription_limit(c):
    for _ in range(20):
        _loopback_sub(c)
    return _events_call(c, "post", "/api/events/subscriptions", {"url": "http://127.0.0.1:9/hook"})


def _served(c, payload: bytes):
    return raw_exchange(c.request.getfixturevalue("served").port, payload)


@pytest.fixture(scope="module")
def served(tmp_path_factory, sqlite_template):
    """One real `gate serve` (1 worker, 1 s read timeout) for the codes the HTTP server answers."""
    from gate.keys.signing import generate_keyring

    home = tmp_path_factory.mktemp("served")
    shutil.copyfile(sqlite_template, home / "gate.db")
    generate_keyring(home / "signing-keys.json", "2026-11-01T00:00:00.000Z")
    env = {**os.environ, "GATE_HOME": str(home), "GATE_DATABASE_URL": f"sqlite:///{home / 'gate.db'}",
           "GATE_SIGNING_KEY_FILE": str(home / "signing-keys.json"), "GATE_REQUEST_READ_TIMEOUT": "1"}
    env.pop("GATE_REDIS_URL", None)
    server = Server(env, home / "server.log", workers=1).start()
    yield server
    server.stop()


class Ctx:
    def __init__(self, client, key, sample, make_app, issue_key, request):
        self.client, self.key, self.sample, self.make_app, self.issue_key = client, key, sample, make_app, issue_key
        self.request = request


def test_every_code_is_pinned():
    assert set(CASES) == set(ERROR_TABLE)


@pytest.mark.parametrize("code", sorted(CASES))
def test_error_body(code, client, api_key, sample_request, make_app, issue_key, request):
    response = CASES[code](Ctx(client, api_key, sample_request, make_app, issue_key, request))
    status, word = ERROR_TABLE[code]
    assert response.status_code == status, response.get_data(as_text=True)
    body = response.json
    assert body["c"] == "unclear"
    assert body["v"] == word
    assert body["error"] == code
    assert isinstance(body["message"], str) and body["message"]
    assert DETAILS.get(code, set()) <= set(body)
    # SECURITY: an error never carries a verdict or decision material.
    assert not {"verdict", "record_hash", "receipt_signature", "application_verdict"} & set(body)
    assert response.mimetype == "application/json"


def test_forbidden_fields_are_listed_in_reference_order(client, api_key, sample_request):
    body = copy.deepcopy(sample_request)
    body.update(action="x", trusted_adapter={}, runtime_binding={})
    body["context"]["inputs"]["audit"] = {"rulebook_attestation": {}, "nested": [{"adapter_facts": 1}]}
    response = _decide(client, api_key, body)
    assert response.json["forbidden_fields"] == [
        "runtime_binding", "trusted_adapter", "action",
        "context.inputs.audit.nested[0].adapter_facts", "context.inputs.audit.rulebook_attestation"]


def test_unsupported_binding_mode_lists_the_supported_pair(client, api_key, sample_request):
    body = _decide(client, api_key, _with(sample_request, binding_mode="customer_executable_rulebook")).json
    assert body["binding_mode"] == "customer_executable_rulebook"
    assert body["supported_binding_modes"] == [
        "direct_declarative_rulebook", "trusted_adapter_facts_then_declarative_rulebook"]


def test_rulebook_invalid_names_exact_paths(client, api_key, sample_request):
    rulebook = copy.deepcopy(sample_request["rulebook"])
    rulebook["rules"][0]["condition"]["function"] = "return true"
    rulebook["rules"][1]["condition"]["operator"] = "matches"
    body = _decide(client, api_key, _with(sample_request, rulebook=rulebook)).json
    fields = {(e["field"], e["code"]) for e in body["errors"]}
    assert ("rulebook.rules[0].condition.function", "unknown_field") in fields
    assert ("rulebook.rules[1].condition.operator", "unsupported_operator") in fields


@pytest.mark.parametrize("mode", [None, "single", "multi", "runtime"])
def test_every_legacy_mode_is_refused_without_a_verdict_where_switched_off(make_app, api_key, mode):
    body = {"question": "Approve?", "context": {"x": 1}}
    if mode:
        body["mode"] = mode
    response = _decide(make_app({"GATE_ADVISORY_MODES": "false"}).test_client(), api_key, body)
    assert response.status_code == 422
    assert response.json["error"] == "LEGACY_MODE_UNAVAILABLE"
    assert response.json["mode"] == (mode or "single")


def test_an_unreadable_ledger_on_any_keyed_read_is_503(make_app, api_key):
    from sqlalchemy import text

    app = make_app()
    client = app.test_client()
    with app.extensions["gate"].ledger.engine.begin() as connection:
        connection.execute(text("DROP TABLE rulebook_snapshots"))
        connection.execute(text("DROP TABLE decisions"))
    for url in ("/api/decision/rulebooks?hash=" + "0" * 64, "/api/decision/policy-bundles?hash=" + "1" * 64,
                "/api/decision/dec_x", "/api/decision/dec_x/packet"):
        response = client.get(url, headers={"x-api-key": api_key})
        assert response.status_code == 503, url
        assert response.json["error"] == "LEDGER_UNAVAILABLE" and response.json["c"] == "unclear"
