"""Policy releases through HTTP: publish, decide by reference, transitions, approvals, permissions,
idempotency, scope isolation, superseded inline decides (docs/releases.md)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise

import pytest
from sqlalchemy import func, select

from gate.ledger.tables import release_decisions, release_events
from tests.releases.support import ALL, Api, by_reference, inline, version


@pytest.fixture
def author(client, issue_key):
    return Api(client, issue_key(permissions=ALL)["api_key"])


def test_publish_answers_201_then_200_and_409_for_other_content(author):
    first = author.publish(version("v1"))
    assert first.status_code == 201 and first.json["created"] is True
    assert first.json["rulebook"]["version"] == "v1"
    again = author.publish(version("v1"))
    assert again.status_code == 200 and again.json["created"] is False
    assert again.json["rulebook"]["hash"] == first.json["rulebook"]["hash"]
    other = author.publish(version("v1", approve_limit=10))
    assert other.status_code == 409 and other.json["error"] == "RULEBOOK_VERSION_CONFLICT"


def test_publish_refuses_an_invalid_rulebook_and_binds_nothing(author):
    broken = version("v1")
    broken["rules"] = []
    answer = author.publish(broken)
    assert answer.status_code == 422 and answer.json["error"] == "RULEBOOK_INVALID"
    assert author.publish(version("v1")).status_code == 201  # nothing was bound by the refusal


@pytest.mark.parametrize(("method", "template"), [
    ("post", "/api/decision/rulebooks"),
    ("post", "/api/decision/rulebooks/{rulebook_id}/release"),
    ("put", "/api/decision/release-policy"),
])
def test_the_release_routes_refuse_bad_bodies_with_the_statuses_they_document(client, author, method, template):
    """Found by the contract test: publishing answered 400 for an integer that cannot be hashed
    exactly, a status its operation did not document. Each body route's refusals are checked
    here against its own OpenAPI operation, and nothing is published by them."""
    operation = client.get("/openapi.json").json["paths"][template][method]
    path, send = template.format(rulebook_id="pricing_exception"), getattr(client, method)
    unsafe = b'{"rulebook_id": "pricing_exception", "version": "v1", "n": 9007199254740993}'
    refusals = [
        (send(path, data=unsafe, headers=author.headers({"content-type": "application/json"})),
         400, "JSON_UNSAFE_INTEGER"),
        (send(path, data=b"{}", headers=author.headers({"content-type": "text/plain"})), 415, "UNSUPPORTED_MEDIA_TYPE"),
        (send(path, data=b"{" + b" " * 1_100_000 + b"}", headers=author.headers({"content-type": "application/json"})),
         413, "REQUEST_TOO_LARGE"),
        (send(path, data=b"{}", headers={"content-type": "application/json"}), 401, "SVC_API_UNAUTHORIZED"),
    ]
    for answer, status, code in refusals:
        assert (answer.status_code, answer.json["error"]) == (status, code)
        assert str(status) in operation["responses"], (template, status)
        assert code in operation["responses"][str(status)].get("x-error-codes", []), (template, status, code)
    assert author.status().status_code == 404  # nothing was published


def test_default_keys_keep_todays_rights_only(client, issue_key, author):
    plain = Api(client, issue_key()["api_key"])
    refused = plain.publish(version("v1"))
    assert refused.status_code == 403 and refused.json["error"] == "RELEASE_PERMISSION_DENIED"
    assert refused.json["c"] == "unclear"
    author.publish(version("v1"))
    moved = plain.act("activate", version="v1")
    assert moved.status_code == 403 and moved.json["permission"] == "release"
    assert plain.decide(inline(version("v1"))).status_code == 200  # deciding is every key's right


def test_decide_by_reference_fails_closed_before_an_activation(author):
    unknown = author.decide(by_reference("no_such_rulebook"))
    assert unknown.status_code == 404 and unknown.json["error"] == "RULEBOOK_NOT_FOUND"
    author.publish(version("v1"))
    inactive = author.decide(by_reference())
    assert inactive.status_code == 409 and inactive.json["error"] == "RULEBOOK_NOT_ACTIVE"
    assert inactive.json["c"] == "unclear"
    missing_version = author.decide(by_reference(version_name="v9"))
    assert missing_version.status_code == 404


@pytest.mark.parametrize("ref", [
    {"rulebook_id": 7},
    {"rulebook_id": "pricing_exception", "version": 3},
    {"rulebook_id": "pricing_exception", "extra": True},
    "pricing_exception",
])
def test_a_malformed_reference_is_400(author, ref):
    author.publish(version("v1"))
    body = by_reference()
    body["rulebook_ref"] = ref
    answer = author.decide(body)
    assert answer.status_code == 400 and answer.json["error"] == "RULEBOOK_REF_INVALID"


def test_reference_and_inline_rulebook_together_is_400(author):
    author.publish(version("v1"))
    body = by_reference()
    body["rulebook"] = version("v1")
    assert author.decide(body).json["error"] == "RULEBOOK_REF_INVALID"


def test_decide_by_reference_is_the_inline_record_and_verifies(client, author):
    author.publish(version("v1"))
    author.act("activate", version="v1")
    by_ref = author.decide(by_reference(subject="order-1"))
    direct = author.decide(inline(version("v1"), subject="order-1"))
    assert by_ref.status_code == direct.status_code == 200
    ref_record, inline_record = by_ref.json, direct.json
    # The same request an inline decide of that version is: same input hash, rulebook and outcome.
    for member in ("input_hash", "policy_hash", "policy_version", "verdict", "reason_code", "rulebook",
                   "output_hash", "rulebook_registry"):
        assert ref_record[member] == inline_record[member], member
    assert ref_record["release_arm"]["arm"] == "active" and ref_record["release_arm"]["version"] == "v1"
    assert "release_arm" not in inline_record
    assert by_ref.headers["x-decision-release-arm"] == "active"
    # Verifies offline (the reference's hash and signature rules) and in the hosted verifier.
    verified = client.post("/api/decision/verify", json={"record": ref_record, "input": inline(
        version("v1"), subject="order-1")}, headers=author.headers()).json
    assert verified["verified"] is True, verified.get("failed_checks")
    hosted = client.get(f"/api/decision/{ref_record['decision_id']}/verify", headers=author.headers()).json
    assert hosted["verified"] is True, hosted.get("failed_checks")
    replay = client.post(f"/api/decision/{ref_record['decision_id']}/replay", json={"replay_mode": "historical"},
                         headers=author.headers())
    assert replay.status_code == 200, replay.json
    assert replay.json["replay_status"] == "matched" and replay.json["drift"] == []


def test_a_tampered_release_arm_fails_verification(client, author):
    author.publish(version("v1"))
    author.act("activate", version="v1")
    record = author.decide(by_reference()).json
    record["release_arm"]["arm"] = "canary"
    verified = client.post("/api/decision/verify", json={"record": record}, headers=author.headers()).json
    assert verified["verified"] is False and "release_arm_hash" in verified["failed_checks"]
    record["release_arm"]["release_arm_hash"] = __import__("gate.protocol.release_arm", fromlist=["x"]) \
        .release_arm_hash(record["release_arm"])
    verified = client.post("/api/decision/verify", json={"record": record}, headers=author.headers()).json
    assert verified["verified"] is False and "release_arm_signature" in verified["failed_checks"]


def test_activation_rollback_and_history(author):
    for name, limit in (("v1", 20), ("v2", 10)):
        author.publish(version(name, approve_limit=limit))
    author.act("activate", version="v1", reason="first release")
    assert author.decide(by_reference()).json["verdict"] == "yes"
    author.act("activate", version="v2", reason="tighter limit")
    decided = author.decide(by_reference())
    assert decided.json["verdict"] == "review" and decided.headers["x-decision-rulebook-version"] == "v2"
    rolled = author.act("rollback", reason="v2 sends too much to review")
    assert rolled.status_code == 201 and rolled.json["state"]["active"]["version"] == "v1"
    assert author.decide(by_reference()).json["verdict"] == "yes"
    nothing = author.act("rollback")
    assert nothing.status_code == 409 and nothing.json["error"] == "RELEASE_NOTHING_TO_ROLL_BACK"
    status = author.status().json
    assert [e["action"] for e in status["history"]] == ["activate", "activate", "rollback"]
    assert [e["seq"] for e in status["history"]] == [1, 2, 3]
    assert status["history"][1]["reason"] == "tighter limit"


def test_superseded_inline_decides_say_so_and_an_opted_in_scope_refuses_them(client, author):
    author.publish(version("v1"))
    author.publish(version("v2", approve_limit=10))
    author.act("activate", version="v2")
    old = author.decide(inline(version("v1")))
    assert old.status_code == 200 and old.headers["x-decision-rulebook-superseded-by"] == "v2"
    assert "release_arm" not in old.json  # an inline decide's record is exactly what the spec says
    current = author.decide(inline(version("v2", approve_limit=10)))
    assert current.status_code == 200 and "x-decision-rulebook-superseded-by" not in current.headers
    client.patch("/api/decision/release-policy", json={"refuse_superseded_inline": True}, headers=author.headers())
    author.client.application.extensions["gate"].releases.reader.cache_seconds = 0
    refused = author.decide(inline(version("v1")))
    assert refused.status_code == 409 and refused.json["error"] == "RULEBOOK_SUPERSEDED"
    assert refused.json["active_version"] == "v2"
    assert author.decide(inline(version("v2", approve_limit=10))).status_code == 200


def test_release_policy_input_is_checked(client, author, issue_key):
    bad = client.put("/api/decision/release-policy", json={"require_approval": "yes"}, headers=author.headers())
    assert bad.status_code == 400 and bad.json["error"] == "RELEASE_POLICY_INVALID"
    plain = issue_key()["api_key"]
    denied = client.patch("/api/decision/release-policy", json={"require_approval": True},
                          headers={"x-api-key": plain})
    assert denied.status_code == 403
    assert client.get("/api/decision/release-policy", headers=author.headers()).json["policy"] == {
        "require_approval": False, "approval_ttl_seconds": 86400, "refuse_superseded_inline": False,
        "require_dry_run": False, "dry_run_canary_percent": 0, "dry_run_max_age_seconds": 604800}


@pytest.mark.parametrize(("body", "code"), [
    ({"action": "launch"}, "RELEASE_ACTION_INVALID"),
    ({"action": "canary", "version": "v2", "percent": 0}, "RELEASE_ACTION_INVALID"),
    ({"action": "canary", "version": "v2", "percent": 100}, "RELEASE_ACTION_INVALID"),
    ({"action": "canary", "version": "v2", "percent": 10.001}, "RELEASE_ACTION_INVALID"),
    ({"action": "canary", "version": "v2", "percent": 10, "subject": "<script>"}, "RELEASE_ACTION_INVALID"),
    ({"action": "activate", "version": "v2", "unknown": 1}, "RELEASE_ACTION_INVALID"),
    ({"action": "activate", "version": "v2", "evidence": {}}, "RELEASE_ACTION_INVALID"),
    ({"action": "activate", "version": "v2", "migration_manifest_hash": "xyz"}, "RELEASE_ACTION_INVALID"),
    ({"action": "activate"}, "RELEASE_ACTION_INVALID"),
    ({"action": "activate", "version": "v9"}, "RULEBOOK_NOT_FOUND"),
    ({"action": "halt"}, "RELEASE_NOTHING_TO_HALT"),
    ({"action": "shadow", "version": "v1"}, "RELEASE_TRANSITION_REFUSED"),
])
def test_bad_actions_are_refused_and_change_nothing(author, body, code):
    author.publish(version("v1"))
    author.publish(version("v2", approve_limit=10))
    author.act("activate", version="v1")
    answer = author.client.post("/api/decision/rulebooks/pricing_exception/release", json=body,
                                headers=author.headers())
    assert answer.json["error"] == code and answer.json["c"] == "unclear"
    assert [e["seq"] for e in author.status().json["history"]] == [1]


def test_idempotent_transitions(author):
    author.publish(version("v1"))
    first = author.act("activate", version="v1", key="rel-1")
    again = author.act("activate", version="v1", key="rel-1")
    assert first.status_code == 201 and again.status_code == 200
    assert again.headers["x-idempotency-status"] == "replayed"
    assert again.json["event"] == first.json["event"]
    other = author.act("shadow", version="v1", key="rel-1")
    assert other.status_code == 409 and other.json["error"] == "RELEASE_IDEMPOTENCY_CONFLICT"
    assert len(author.status().json["history"]) == 1


def test_another_scope_can_neither_see_nor_move_a_release(client, issue_key, author):
    author.publish(version("v1"))
    author.act("activate", version="v1")
    other = Api(client, issue_key(scope="tenant_b", permissions=ALL)["api_key"])
    for answer in (other.status(), other.history(), other.act("halt"), other.act("activate", version="v1"),
                   other.decide(by_reference())):
        assert answer.status_code == 404 and answer.json["error"] == "RULEBOOK_NOT_FOUND"
    # Its own publication of the same id is its own release, invisible to the first scope.
    other.publish(version("v1", approve_limit=5))
    other.act("activate", version="v1")
    assert author.decide(by_reference()).json["verdict"] == "yes"
    assert other.decide(by_reference()).json["verdict"] == "review"


def test_approvals_need_a_second_identity_and_bind_the_version_hash(client, issue_key, author):
    approver = Api(client, issue_key(permissions="approve")["api_key"])
    author.publish(version("v1"))
    published = author.publish(version("v2", approve_limit=10)).json["rulebook"]
    client.patch("/api/decision/release-policy", json={"require_approval": True, "approval_ttl_seconds": 600},
               headers=author.headers())
    requested = author.act("activate", version="v1", reason="first release")
    assert requested.status_code == 201
    state = requested.json["state"]
    assert state["active"] is None and state["pending"][0]["action"] == "activate"
    seq = state["pending"][0]["request_seq"]
    self_approval = author.act("approve", request_seq=seq, version="v1",
                               rulebook_hash=state["pending"][0]["rulebook_hash"])
    assert self_approval.status_code == 403 and self_approval.json["error"] == "RELEASE_SELF_APPROVAL"
    wrong_hash = approver.act("approve", request_seq=seq, version="v1", rulebook_hash=published["hash"])
    assert wrong_hash.status_code == 409 and wrong_hash.json["error"] == "RELEASE_APPROVAL_MISMATCH"
    approved = approver.act("approve", request_seq=seq, version="v1",
                            rulebook_hash=state["pending"][0]["rulebook_hash"])
    assert approved.status_code == 201 and approved.json["state"]["active"]["version"] == "v1"
    assert approved.json["state"]["pending"] == []
    assert approver.act("activate", version="v2").status_code == 403  # approve is not release
    history = author.status().json["history"]
    assert [(e["action"], e["actor"]) for e in history] == [
        ("activate", author_key_id(client, author)), ("approve", author_key_id(client, approver))]


def author_key_id(client, api: Api) -> str:
    return client.application.extensions["gate"].auth.ledger.api_key_by_hash(
        __import__("gate.keys.apikeys", fromlist=["x"]).hash_api_key(api.key))["key_id"]


def test_an_expired_approval_request_cannot_be_approved(client, issue_key, author):
    approver = Api(client, issue_key(permissions="approve")["api_key"])
    author.publish(version("v1"))
    client.patch("/api/decision/release-policy", json={"require_approval": True, "approval_ttl_seconds": 60},
               headers=author.headers())
    pending = author.act("activate", version="v1").json["state"]["pending"][0]
    clock = client.application.extensions["gate"].service.clock
    original = clock.now
    later = original().__class__.fromtimestamp(original().timestamp() + 3600, original().tzinfo)
    clock.now = lambda: later
    try:
        late = approver.act("approve", request_seq=pending["request_seq"], version="v1",
                            rulebook_hash=pending["rulebook_hash"])
    finally:
        clock.now = original
    assert late.status_code == 404 and late.json["error"] == "RELEASE_APPROVAL_NOT_FOUND"


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_racing_transitions_make_one_gap_free_chain(app, issue_key, backend):
    author = Api(app.test_client(), issue_key(permissions=ALL)["api_key"])
    for index in range(6):
        author.publish(version(f"v{index}", approve_limit=10 + index))

    def activate(index: int) -> int:
        return Api(app.test_client(), author.key).act("activate", version=f"v{index}").status_code

    with ThreadPoolExecutor(6) as pool:
        codes = list(pool.map(activate, range(6)))
    assert codes == [201] * 6
    with app.extensions["gate"].ledger.engine.connect() as connection:
        seqs = [r[0] for r in connection.execute(select(release_events.c.seq)  # the key's grant is another chain
                                                 .where(release_events.c.rulebook_id != "@api-keys")
                                                 .order_by(release_events.c.seq))]
    assert seqs == [1, 2, 3, 4, 5, 6]
    history = author.status().json["history"]
    assert all(e["previous_event_hash"] == p["event_hash"] for p, e in pairwise(history))


def test_shadow_evaluates_beside_live_decides_without_changing_them(app, author):
    author.publish(version("v1"))
    author.publish(version("v2", approve_limit=10))
    author.act("activate", version="v1")
    author.act("shadow", version="v2", reason="try the tighter limit")
    records = [author.decide(by_reference(subject=f"order-{i}")).json for i in range(5)]
    assert {r["verdict"] for r in records} == {"yes"}  # the shadow never answers
    assert all(r["release_arm"]["arm"] == "active" for r in records)
    author.outcome(records[0], "failed")
    status = author.status().json
    shadow = status["comparison"]["shadow"]
    assert shadow["version"] == "v2" and shadow["decisions"] == 5
    assert shadow["agreement"]["events"] == 0 and shadow["agreement"]["interval_95"][1] < 0.6
    assert shadow["transitions"] == [{"live": "yes", "shadow": "review", "n": 5}]
    assert shadow["flips"][0]["failed"] == 1 and shadow["flips"][0]["open_or_unreported"] == 4
    with app.extensions["gate"].ledger.engine.connect() as connection:
        rows = connection.execute(select(release_decisions)).mappings().all()
    assert {(r["arm"], r["shadow_version"], r["shadow_verdict"]) for r in rows} == {("active", "v2", "review")}
    # Inline decides of the released id are evaluated beside the shadow too.
    author.decide(inline(version("v1")))
    with app.extensions["gate"].ledger.engine.connect() as connection:
        assert connection.execute(select(func.count()).select_from(release_decisions)).scalar() == 6


def test_a_retry_under_the_same_key_stays_in_its_version(author):
    author.publish(version("v1"))
    author.publish(version("v2", approve_limit=10))
    author.act("activate", version="v1")
    first = author.decide(by_reference(subject="order-1"), key="idem-1")
    author.act("activate", version="v2")
    retry = author.decide(by_reference(subject="order-1"), key="idem-1")
    assert retry.status_code == 200 and retry.headers["x-idempotency-status"] == "replayed"
    assert retry.json["decision_id"] == first.json["decision_id"]


def test_a_key_used_for_another_rulebook_is_an_idempotency_conflict_not_a_lookup(author):
    author.publish(version("v1"))
    author.act("activate", version="v1")
    other = version("v9")  # a version this rulebook never published
    other["rulebook_id"] = "other_book"
    author.decide(inline(other), key="shared-key")
    answer = author.decide(by_reference(), key="shared-key")
    assert answer.status_code == 409 and answer.json["error"] == "SVC_API_IDEMPOTENCY_CONFLICT"


def test_history_document_is_what_the_release_states(author):
    author.publish(version("v1"))
    author.act("activate", version="v1")
    document = author.history().json
    assert document["release_history_version"] == "release_history_v1"
    assert [e["seq"] for e in document["events"]] == [1]
    assert document["events"][0]["state"]["active"] == author.status().json["state"]["active"]


def test_keys_carry_their_permissions_through_the_cli(gate_env):
    import subprocess
    import sys

    env = {**gate_env, "PATH": ""}
    run = [sys.executable, "-m", "gate_cli.main", "keys"]
    made = subprocess.run([*run, "create", "--scope", "s1", "--permissions", "publish,release",
                           "--holder", "service:s1-releaser", "--json"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["permissions"] == "decide,publish,release"
    listed = subprocess.run([*run, "list"], capture_output=True, text=True, env=env, timeout=120)
    assert "permissions=decide,publish,release" in listed.stdout
    bad = subprocess.run([*run, "create", "--scope", "s1", "--permissions", "decide,root"], capture_output=True,
                         text=True, env=env, timeout=120)
    assert bad.returncode != 0 and "unknown permission(s) root" in bad.stderr
