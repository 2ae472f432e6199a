"""gate/services/releases.py called directly, its rules pinned by value: who may act, what an
action's event and its ledger row state, idempotency and races, the caches, the release policy
and its governance chain, guarded activation and a guardrail's halt. The HTTP tests of
tests/releases walk the same rules end to end; these fork in milliseconds under mutation testing
(docs/mutation-testing.md, suite `release_service`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gate.chain.links import scope_hash
from gate.errors import GateError, SigningUnavailable
from gate.events.cloudevent import full_type
from gate.keys.config import SigningSetup
from gate.ledger.releases import ReleaseRace
from gate.principals import Principal, require
from gate.protocol.canonical import canonical_text, sha256_hex
from gate.releases.events import verify_history
from gate.releases.governance import GOVERNANCE_ID
from gate.releases.model import ReleaseRefused, ReleaseState, Version
from gate.releases.policy import ReleasePolicy
from gate.services.chains import EventChainWitness
from gate.services.governance import GovernanceService, check_reason
from gate.services.governance import announcement as governance_announcement
from gate.services.release_moves import (
    RELEASE_DENIED,
    ReleaseMoves,
    _body_problems,
    _require,
    _utc,
    announcement,
)
from gate.services.release_reads import CACHE_SECONDS
from gate.services.root import release_service as composed_release_service
from tests.releases.service_support import (
    EVERY_RIGHT,
    KEY_A,
    KEY_B,
    RULEBOOK_ID,
    SCOPE,
    START,
    World,
    build_world,
    release_service,
    two_versions,
)
from tests.releases.support import version

H64 = "a" * 64
AT = "2026-11-26T12:00:00.000Z"


@pytest.fixture
def world(database_url, tmp_path):
    built = build_world(database_url, tmp_path)
    yield built
    built.ledger.dispose()


def _refusal(call, code: str) -> GateError:
    with pytest.raises(GateError) as refused:
        call()
    assert refused.value.code == code, (refused.value.code, refused.value.message)
    return refused.value


# ------------------------------------------------------------------ pure helpers


EVENT = {"rulebook_id": "r", "seq": 3, "action": "activate", "actor": "key_a", "principal": {"kind": "api_key"},
         "override": None, "created_at": AT, "version": "v1", "rulebook_hash": H64, "percent": None,
         "request_seq": None, "reason": "why", "evidence": None, "event_hash": "e" * 64,
         "previous_event_hash": "p" * 64, "key_id": "k1", "approval_expires_at": None, "state": {"x": 1},
         "subject": "context.x", "migration_manifest_hash": "m" * 64}


@pytest.mark.parametrize(("action", "expires", "name"), [
    ("shadow", None, "release.shadow"), ("canary", None, "release.canary"), ("activate", None, "release.activated"),
    ("halt", None, "release.halted"), ("rollback", None, "release.rolled_back"), ("approve", None, "release.approved"),
    ("canary", AT, "release.approval_requested"), ("activate", AT, "release.approval_requested"),
    ("halt", AT, "release.halted"), ("approve", AT, "release.approved"),
])
def test_an_announcement_names_the_move_or_the_request(action, expires, name):
    event = {**EVENT, "action": action, "approval_expires_at": expires}
    announced = announcement("acme", event)
    assert announced.name == name
    assert announced.data == {
        "scope": "acme", "rulebook_id": "r", "seq": 3, "action": action, "actor": "key_a",
        "principal": {"kind": "api_key"}, "override": None, "created_at": AT, "version": "v1", "rulebook_hash": H64,
        "percent": None, "request_seq": None, "reason": "why", "evidence": None, "event_hash": "e" * 64,
        "previous_event_hash": "p" * 64, "key_id": "k1", "approval_expires_at": expires}


def test_an_announcement_reads_missing_members_as_null():
    announced = announcement("s", {"action": "halt"})
    assert announced.data == {"scope": "s", "action": "halt", **dict.fromkeys((
        "rulebook_id", "seq", "actor", "principal", "override", "created_at", "version", "rulebook_hash", "percent",
        "request_seq", "reason", "evidence", "event_hash", "previous_event_hash", "key_id", "approval_expires_at"))}


@pytest.mark.parametrize(("action", "name"), [("policy_request", "release.policy_change_requested"),
                                              ("policy_set", "release.policy_changed"),
                                              ("policy_approve", "release.policy_changed")])
def test_a_governance_announcement_names_a_request_or_a_change(action, name):
    event = {"seq": 2, "action": action, "actor": "key_a", "principal": {"kind": "api_key"}, "created_at": AT,
             "request_seq": 1, "expires_at": AT, "reason": "r", "policy_before": {"a": 1}, "policy_after": {"a": 2},
             "weakens": ["a"], "event_hash": "e", "previous_event_hash": "p", "key_id": "k", "state": {}, "x": 1,
             "setting": "release_policy"}
    announced = governance_announcement("acme", event)
    assert announced.name == name
    assert announced.data == {"scope": "acme", **{k: v for k, v in event.items() if k not in ("state", "x")}}
    assert set(governance_announcement("s", {"action": action}).data) == {"scope", *(k for k in event
                                                                                       if k not in ("state", "x"))}


def test_require_names_the_missing_permission(world: World):
    require(world.caller(frozenset({"publish"})).permissions, "publish", RELEASE_DENIED)  # gate.principals
    refused = _refusal(lambda: require(world.caller(frozenset({"decide"})).permissions, "publish", RELEASE_DENIED),
                       "RELEASE_PERMISSION_DENIED")
    assert refused.details == {"permission": "publish"}
    assert refused.message == "this principal lacks the 'publish' permission in this scope"
    _require(KEY_A, frozenset({"admin"}), "admin")
    refused = _refusal(lambda: _require(KEY_A, frozenset({"release"}), "admin"), "RELEASE_PERMISSION_DENIED")
    assert refused.details == {"permission": "admin"}
    with pytest.raises(TypeError):
        _require("key_a", EVERY_RIGHT, "admin")  # type: ignore[arg-type]


@pytest.mark.parametrize(("reason", "ok"), [(None, True), ("x", True), ("x" * 500, True), ("", False),
                                            ("x" * 501, False), (5, False), (["x"], False)])
def test_a_reason_is_one_to_500_characters(reason, ok):
    if ok:
        check_reason("release_policy", reason)
    else:
        _refusal(lambda: check_reason("release_policy", reason), "RELEASE_POLICY_INVALID")


def test_a_refusal_of_the_rules_is_the_gate_error_the_api_answers():
    error = ReleaseRefused("RELEASE_SELF_APPROVAL", "not your own", 403)
    assert isinstance(error, GateError)  # raised through the service as it is: no translation
    assert (error.code, error.message, error.details, error.status, str(error)) == (
        "RELEASE_SELF_APPROVAL", "not your own", {}, 403, "not your own")


def test_utc_reads_a_naive_time_as_utc_and_keeps_an_aware_one():
    assert _utc(datetime(2026, 1, 2, 3, 4)) == datetime(2026, 1, 2, 3, 4, tzinfo=UTC)
    aware = datetime(2026, 1, 2, 3, 4, tzinfo=__import__("datetime").timezone(timedelta(hours=5)))
    assert _utc(aware) is aware


def test_a_service_built_with_the_defaults_caches_for_its_bound_and_trips_no_hook(world: World):
    from gate.clock import SystemClock

    clock = SystemClock()
    witness = EventChainWitness(world.signing, clock, None)
    bare = composed_release_service(world.ledger, world.signing, snapshots=world.decisions.snapshots, clock=clock,
                                    witness=witness,
                                    governance=GovernanceService(world.ledger, world.signing, clock, witness=witness))
    assert bare.moves.clock is clock and bare.reader.cache_seconds == CACHE_SECONDS and bare.guardrails.on_trip is None
    assert bare.state(SCOPE, RULEBOOK_ID) == ReleaseState(RULEBOOK_ID)


# ------------------------------------------------------------------ the body of an action

BODY_PROBLEMS = [
    ({"action": 5}, ["action is required: shadow, canary, activate, halt, rollback or approve"]),
    ({}, ["action is required: shadow, canary, activate, halt, rollback or approve"]),
    ({"action": "canary", "percent": True}, ["percent must be a number"]),
    ({"action": "canary", "percent": "5"}, ["percent must be a number"]),
    ({"action": "canary", "percent": 5}, []),
    ({"action": "canary", "percent": 5.5}, []),
    ({"action": "halt", "reason": ""}, ["reason must be a string of 1 to 500 characters"]),
    ({"action": "halt", "reason": "x" * 500}, []),
    ({"action": "halt", "reason": "x" * 501}, ["reason must be a string of 1 to 500 characters"]),
    ({"action": "halt", "reason": 7}, ["reason must be a string of 1 to 500 characters"]),
    ({"action": "activate", "version": "v" * 80}, []),
    ({"action": "activate", "version": "v" * 81}, ["version must be a string of 1 to 80 characters"]),
    ({"action": "activate", "version": ""}, ["version must be a string of 1 to 80 characters"]),
    ({"action": "activate", "version": 1}, ["version must be a string of 1 to 80 characters"]),
    ({"action": "canary", "subject": "context.source_record_id"}, []),
    ({"action": "canary", "subject": "_a." + ".".join(["b" * 64] * 7)}, []),
    ({"action": "canary", "subject": ".".join(["a"] * 9)}, [("subject must be a dotted path such as "
                                                            "context.source_record_id")]),
    ({"action": "canary", "subject": "a" * 65}, ["subject must be a dotted path such as context.source_record_id"]),
    ({"action": "canary", "subject": "1a"}, ["subject must be a dotted path such as context.source_record_id"]),
    ({"action": "canary", "subject": "a..b"}, ["subject must be a dotted path such as context.source_record_id"]),
    ({"action": "canary", "subject": 5}, ["subject must be a dotted path such as context.source_record_id"]),
    ({"action": "activate", "migration_manifest_hash": H64, "rulebook_hash": "0123456789abcdef" * 4}, []),
    ({"action": "activate", "migration_manifest_hash": "A" * 64}, [("migration_manifest_hash must be 64 lowercase "
                                                                    "hex characters")]),
    ({"action": "activate", "rulebook_hash": "a" * 63}, ["rulebook_hash must be 64 lowercase hex characters"]),
    ({"action": "activate", "rulebook_hash": "g" * 64}, ["rulebook_hash must be 64 lowercase hex characters"]),
    ({"action": "activate", "rulebook_hash": 5}, ["rulebook_hash must be 64 lowercase hex characters"]),
    ({"action": "halt", "request_seq": 1}, []),
    ({"action": "halt", "request_seq": 0}, ["request_seq must be a positive integer"]),
    ({"action": "halt", "request_seq": True}, ["request_seq must be a positive integer"]),
    ({"action": "halt", "request_seq": "1"}, ["request_seq must be a positive integer"]),
    ({"action": "approve", "request_seq": 1, "version": "v1", "rulebook_hash": H64}, []),
    ({"action": "approve", "version": "v1", "rulebook_hash": H64},
     ["approve needs request_seq, and the requested version with its rulebook_hash"]),
    ({"action": "approve", "request_seq": 1, "rulebook_hash": H64},
     ["approve needs request_seq, and the requested version with its rulebook_hash"]),
    ({"action": "approve", "request_seq": 1, "version": "v1"},
     ["approve needs request_seq, and the requested version with its rulebook_hash"]),
    ({"action": "halt", "evidence": {}}, []),
    ({"action": "halt", "evidence": []}, ["evidence must be an object"]),
    ({"action": "activate", "migration_manifest": {}}, []),
    ({"action": "activate", "migration_manifest": "x"}, [("migration_manifest must be a dry-run's manifest "
                                                         "(a JSON object)")]),
    ({"action": "activate", "override": "guardrail_halt"}, []),
    ({"action": "activate", "override": "other"}, [("override, when given, is 'guardrail_halt' (an admin making a "
                                                   "version its guardrail halted serve again, with a reason)")]),
    ({"action": 1, "percent": False, "reason": "", "version": "", "subject": "-", "migration_manifest_hash": "x",
      "rulebook_hash": "x", "request_seq": -1, "evidence": 1, "migration_manifest": 1, "override": 1},
     ["action is required: shadow, canary, activate, halt, rollback or approve", "percent must be a number",
      "reason must be a string of 1 to 500 characters", "version must be a string of 1 to 80 characters",
      "subject must be a dotted path such as context.source_record_id",
      "migration_manifest_hash must be 64 lowercase hex characters",
      "rulebook_hash must be 64 lowercase hex characters", "request_seq must be a positive integer",
      "evidence must be an object", "migration_manifest must be a dry-run's manifest (a JSON object)",
      "override, when given, is 'guardrail_halt' (an admin making a version its guardrail halted serve again, with a reason)"]),
]


@pytest.mark.parametrize(("body", "problems"), BODY_PROBLEMS)
def test_body_problems_name_each_wrong_member_in_order(body, problems):
    assert _body_problems(body) == problems


def test_a_checked_body_drops_null_members_and_refuses_the_rest():
    checked = ReleaseMoves._checked_body({"action": "halt", "reason": None, "evidence": {"a": 1}, "percent": None})
    assert checked == {"action": "halt", "evidence": {"a": 1}}
    assert _refusal(lambda: ReleaseMoves._checked_body(["halt"]), "RELEASE_ACTION_INVALID").message == (
        "the body must be a JSON object")
    unknown = _refusal(lambda: ReleaseMoves._checked_body({"action": "halt", "zeta": 1, "alpha": 2}),
                       "RELEASE_ACTION_INVALID")
    assert unknown.message == "unknown member(s): alpha, zeta" and "problems" not in unknown.details
    bad = _refusal(lambda: ReleaseMoves._checked_body({"action": "halt", "reason": "", "percent": "x"}),
                   "RELEASE_ACTION_INVALID")
    assert bad.message == "percent must be a number"
    assert bad.details == {"problems": ["percent must be a number", "reason must be a string of 1 to 500 characters"]}


# ------------------------------------------------------------------ publish, read, cache


def test_publishing_needs_the_publish_permission_and_binds_once(world: World):
    refused = _refusal(lambda: world.releases.publish(world.caller(frozenset({"decide", "release"})), version("v1")),
                       "RELEASE_PERMISSION_DENIED")
    assert refused.details == {"permission": "publish"}
    assert world.ledger.latest_rulebook_snapshot(SCOPE, RULEBOOK_ID) is None
    registry, created = world.releases.publish(world.caller(frozenset({"publish"})), version("v1"))
    assert created is True and registry["version"] == "v1"
    assert registry["hash"] == sha256_hex(version("v1"))
    assert world.releases.publish(world.caller(), version("v1")) == (registry, False)


def test_a_version_is_resolved_to_its_published_hash(world: World):
    hashes = two_versions(world)
    assert world.releases.reader.version(SCOPE, RULEBOOK_ID, "v2") == Version("v2", hashes["v2"])
    for bad in ("", None, 5):
        _refusal(lambda bad=bad: world.releases.reader.version(SCOPE, RULEBOOK_ID, bad), "RELEASE_ACTION_INVALID")
    missing = _refusal(lambda: world.releases.reader.version(SCOPE, RULEBOOK_ID, "v9"), "RULEBOOK_NOT_FOUND")
    assert "'v9'" in missing.message
    _refusal(lambda: world.releases.reader.version("other", RULEBOOK_ID, "v1"), "RULEBOOK_NOT_FOUND")


def test_an_unknown_rulebook_or_a_non_string_id_is_not_found(world: World):
    two_versions(world)
    for rulebook_id in ("nope", 7, None):
        _refusal(lambda rulebook_id=rulebook_id: world.releases.act(SCOPE, KEY_A, EVERY_RIGHT, rulebook_id,
                                                                    {"action": "halt"}), "RULEBOOK_NOT_FOUND")
    _refusal(lambda: world.releases.history_document("other", RULEBOOK_ID), "RULEBOOK_NOT_FOUND")
    _refusal(lambda: world.releases.status("other", RULEBOOK_ID), "RULEBOOK_NOT_FOUND")
    world.releases.reader.known(SCOPE, RULEBOOK_ID)


def test_the_release_state_is_cached_until_a_fresh_read(world: World):
    hashes = two_versions(world)
    assert world.releases.state(SCOPE, RULEBOOK_ID) == ReleaseState(RULEBOOK_ID)
    other = world.another_worker()
    event, created = other.act(SCOPE, KEY_A, EVERY_RIGHT, RULEBOOK_ID, {"action": "activate", "version": "v1"})
    assert created is True
    assert world.releases.state(SCOPE, RULEBOOK_ID).active is None  # this worker's cache, within its bound
    fresh = world.releases.state(SCOPE, RULEBOOK_ID, fresh=True)
    assert (fresh.seq, fresh.head_event_hash, fresh.active) == (1, event["event_hash"], Version("v1", hashes["v1"]))
    assert world.releases.state(SCOPE, RULEBOOK_ID) == fresh  # the fresh read refreshed the cache
    assert world.releases.state("other", RULEBOOK_ID) == ReleaseState(RULEBOOK_ID)  # keyed by scope


def test_a_worker_without_a_cache_reads_every_transition_at_once(world: World):
    two_versions(world)
    uncached = world.another_worker(cache_seconds=0.0)
    assert uncached.state(SCOPE, RULEBOOK_ID).seq == 0
    world.act("activate", version="v1")
    assert uncached.state(SCOPE, RULEBOOK_ID).seq == 1


def test_the_caches_are_cleared_when_they_reach_4096_entries(world: World):
    releases = world.releases
    stale = (1e18, ReleaseState("x"))
    releases.reader._cache.update({("s", str(n)): stale for n in range(4095)})
    releases.state(SCOPE, RULEBOOK_ID)
    assert len(releases.reader._cache) == 4096
    releases.state(SCOPE, "another")
    assert list(releases.reader._cache) == [(SCOPE, "another")]
    releases.safeguards._cache.update({str(n): (1e18, None) for n in range(4095)})
    releases.governance(SCOPE)
    assert len(releases.safeguards._cache) == 4096
    releases.governance("other")
    assert list(releases.safeguards._cache) == ["other"]


def test_the_running_rulebook_is_the_active_version_else_the_newest_inline_one(world: World):
    assert world.releases.running_rulebook(SCOPE, RULEBOOK_ID) is None
    world.publish(version("v1"))
    assert world.releases.running_rulebook(SCOPE, RULEBOOK_ID) == (version("v1"), "newest inline version (no release)")
    world.publish(version("v2", approve_limit=10))
    world.act("shadow", version="v1")  # the newest, v2, is no candidate: it runs
    assert world.releases.running_rulebook(SCOPE, RULEBOOK_ID) == (version("v2", approve_limit=10),
                                                                   "newest inline version (no release)")
    world.act("shadow", version="v2")
    assert world.releases.running_rulebook(SCOPE, RULEBOOK_ID) is None  # published for the shadow
    world.act("activate", version="v1")
    world.publish(version("v3", approve_limit=12))
    assert world.releases.running_rulebook(SCOPE, RULEBOOK_ID) == (version("v1"), "active release v1")


def test_a_version_pending_approval_is_not_the_running_rulebook(world: World):
    world.publish(version("v1"))
    world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"require_approval": True}, partial=True)
    world.act("activate", version="v1")
    assert world.releases.state(SCOPE, RULEBOOK_ID).pending
    assert world.releases.running_rulebook(SCOPE, RULEBOOK_ID) is None


# ------------------------------------------------------------------ transitions


def test_an_action_is_taken_by_a_principal_with_its_permission(world: World):
    two_versions(world)
    with pytest.raises(TypeError):
        world.releases.act(SCOPE, "key_a", EVERY_RIGHT, RULEBOOK_ID, {"action": "activate", "version": "v1"})
    for action, body, needed in (("activate", {"version": "v1"}, "release"), ("halt", {}, "release"),
                                 ("approve", {"request_seq": 1, "version": "v1", "rulebook_hash": H64}, "approve")):
        others = EVERY_RIGHT - {needed}
        refused = _refusal(lambda action=action, body=body, others=others: world.act(action, permissions=others, **body),
                           "RELEASE_PERMISSION_DENIED")
        assert refused.details == {"permission": needed}
    assert world.releases.history(SCOPE, RULEBOOK_ID) == []
    assert world.act("activate", permissions=frozenset({"release"}), version="v1")["seq"] == 1


def test_an_action_writes_its_signed_event_its_row_and_its_announcement(world: World):
    hashes = two_versions(world)
    event, created = world.releases.act(SCOPE, KEY_A, EVERY_RIGHT, RULEBOOK_ID,
                                        {"action": "activate", "version": "v1", "reason": "first", "percent": None},
                                        idempotency_key="rel-1")
    assert created is True
    assert {k: event[k] for k in ("seq", "action", "actor", "created_at", "version", "rulebook_hash", "percent",
                                  "subject", "request_seq", "approval_expires_at", "reason", "migration_manifest_hash",
                                  "evidence", "previous_event_hash", "principal", "governance_seq", "override",
                                  "scope_hash", "rulebook_id")} == {
        "seq": 1, "action": "activate", "actor": "key_a", "created_at": AT, "version": "v1",
        "rulebook_hash": hashes["v1"], "percent": None, "subject": None, "request_seq": None,
        "approval_expires_at": None, "reason": "first", "migration_manifest_hash": None, "evidence": None,
        "previous_event_hash": None, "principal": {"kind": "api_key", "id": "key_a"}, "governance_seq": 0,
        "override": None, "scope_hash": scope_hash(SCOPE), "rulebook_id": RULEBOOK_ID}
    assert event["key_id"] == world.signing.receipt_signer().key_id and event["signature"]
    row = world.releases.reader.store.by_idempotency(SCOPE, RULEBOOK_ID, "rel-1")
    request_hash = sha256_hex({"actor": "key_a", "body": {"action": "activate", "version": "v1", "reason": "first"}})
    assert {k: row[k] for k in ("scope", "rulebook_id", "seq", "action", "event_hash", "idempotency_key",
                                "request_hash", "created_at", "event_json")} == {
        "scope": SCOPE, "rulebook_id": RULEBOOK_ID, "seq": 1, "action": "activate", "event_hash": event["event_hash"],
        "idempotency_key": "rel-1", "request_hash": request_hash, "created_at": AT, "event_json": canonical_text(event)}
    [announced] = [e for e in world.outbox() if ".release." in e["type"]]
    assert announced["type"] == full_type("release.activated")
    assert announced["data"] == announcement(SCOPE, event).data and announced["subject"] == RULEBOOK_ID
    assert verify_history(world.releases.history(SCOPE, RULEBOOK_ID), world.signing.trust_anchors()).valid
    assert world.releases.state(SCOPE, RULEBOOK_ID).active == Version("v1", hashes["v1"])  # the cache refreshed


def test_the_same_idempotency_key_replays_only_the_same_request_of_the_same_principal(world: World):
    two_versions(world)
    first, created = world.releases.act(SCOPE, KEY_A, EVERY_RIGHT, RULEBOOK_ID, {"action": "activate", "version": "v1"},
                                        idempotency_key="k")
    again, replayed = world.releases.act(SCOPE, KEY_A, EVERY_RIGHT, RULEBOOK_ID,
                                         {"action": "activate", "version": "v1", "reason": None}, idempotency_key="k")
    assert (created, replayed, again) == (True, False, first)
    for principal, body in ((KEY_A, {"action": "activate", "version": "v2"}),
                            (KEY_B, {"action": "activate", "version": "v1"})):
        _refusal(lambda principal=principal, body=body: world.releases.act(
            SCOPE, principal, EVERY_RIGHT, RULEBOOK_ID, body, idempotency_key="k"), "RELEASE_IDEMPOTENCY_CONFLICT")
    other_key, created = world.releases.act(SCOPE, KEY_A, EVERY_RIGHT, RULEBOOK_ID,
                                            {"action": "activate", "version": "v1"}, idempotency_key="k2")
    assert created is True and other_key["seq"] == 2
    no_key, created = world.releases.act(SCOPE, KEY_A, EVERY_RIGHT, RULEBOOK_ID, {"action": "activate", "version": "v1"})
    assert created is True and no_key["seq"] == 3


def test_a_transition_that_loses_a_race_is_retried_on_the_new_head_eight_times_at_most(world: World, monkeypatch):
    two_versions(world)
    store, append = world.releases.reader.store, world.releases.reader.store.append
    calls = []

    def lose_once(row, announce=None):
        calls.append(row["seq"])
        if len(calls) == 1:
            other = world.another_worker()
            other.act(SCOPE, KEY_B, EVERY_RIGHT, RULEBOOK_ID, {"action": "activate", "version": "v2"})
            raise ReleaseRace(str(row["seq"]))
        append(row, announce)

    monkeypatch.setattr(store, "append", lose_once)
    event = world.act("activate", version="v1")
    assert calls == [1, 2] and event["seq"] == 2 and event["previous_event_hash"] is not None
    assert [e["actor"] for e in world.releases.history(SCOPE, RULEBOOK_ID)] == ["key_b", "key_a"]

    calls.clear()

    def always_lose(row, announce=None):
        calls.append(row["seq"])
        raise ReleaseRace(str(row["seq"]))

    monkeypatch.setattr(store, "append", always_lose)
    _refusal(lambda: world.act("halt"), "RELEASE_NOTHING_TO_HALT")  # refused before any write
    assert _refusal(lambda: world.act("activate", version="v1"), "LEDGER_UNAVAILABLE").message == (
        "release transitions raced too often; retry")
    assert calls == [3] * 8


def test_an_action_reads_the_state_and_the_policy_fresh_whatever_the_cache_holds(world: World):
    hashes = two_versions(world)
    assert world.releases.state(SCOPE, RULEBOOK_ID).seq == 0 and world.releases.policy(SCOPE) == ReleasePolicy()
    other = world.another_worker()
    other.act(SCOPE, KEY_B, EVERY_RIGHT, RULEBOOK_ID, {"action": "activate", "version": "v1"})
    other.act(SCOPE, KEY_B, EVERY_RIGHT, RULEBOOK_ID, {"action": "activate", "version": "v2"})
    other.set_policy(SCOPE, KEY_B, EVERY_RIGHT, {"require_approval": True, "approval_ttl_seconds": 600}, partial=True)
    assert world.releases.policy(SCOPE) == ReleasePolicy()  # cached
    rolled = world.act("rollback")
    assert (rolled["seq"], rolled["state"]["active"]) == (3, {"version": "v1", "rulebook_hash": hashes["v1"]})
    requested = world.act("activate", version="v2")
    assert requested["approval_expires_at"] == "2026-11-26T12:10:00.000Z" and requested["governance_seq"] == 1
    assert requested["state"]["active"]["version"] == "v1"


def test_a_refused_transition_answers_the_state_machines_code_and_message(world: World):
    two_versions(world)
    refused = _refusal(lambda: world.act("halt"), "RELEASE_NOTHING_TO_HALT")
    assert refused.message == "no canary or shadow is running"
    assert _refusal(lambda: world.act("canary", version="v2", percent=10), "RULEBOOK_NOT_ACTIVE").message == (
        "a canary needs an active version to compare against")
    assert world.releases.history(SCOPE, RULEBOOK_ID) == []
    assert [e["type"] for e in world.outbox() if ".release." in e["type"]] == []


def test_a_canary_records_its_subject_and_other_actions_drop_it(world: World):
    two_versions(world)
    world.act("activate", version="v1")
    shadow = world.act("shadow", version="v2", subject="context.workflow")
    assert shadow["subject"] is None
    canary = world.act("canary", version="v2", percent=12.5, subject="context.workflow", reason="try")
    assert (canary["subject"], canary["percent"], canary["reason"]) == ("context.workflow", 12.5, "try")
    assert canary["state"]["canary"] == {"version": "v2", "rulebook_hash": canary["rulebook_hash"], "percent": 12.5,
                                         "subject": "context.workflow", "since_seq": 3}


def test_approvals_expire_after_the_policys_ttl_and_bind_the_version_hash(world: World):
    hashes = two_versions(world)
    world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"require_approval": True, "approval_ttl_seconds": 120},
                              partial=True)
    world.clock.moment = START + timedelta(minutes=1)
    requested = world.act("activate", version="v1")
    assert requested["approval_expires_at"] == "2026-11-26T12:03:00.000Z"
    assert requested["state"]["pending"][0]["expires_at"] == "2026-11-26T12:03:00.000Z"
    shadow = world.act("shadow", version="v2")  # a shadow applies at once, approvals or not
    assert shadow["approval_expires_at"] is None and shadow["state"]["shadow"]["version"] == "v2"
    wrong = _refusal(lambda: world.act("approve", principal=KEY_B, request_seq=1, version="v1",
                                       rulebook_hash=hashes["v2"]), "RELEASE_APPROVAL_MISMATCH")
    assert wrong.message == "rulebook_hash is not the published hash of this version"
    _refusal(lambda: world.act("approve", request_seq=1, version="v1", rulebook_hash=hashes["v1"]),
             "RELEASE_SELF_APPROVAL")
    approved = world.act("approve", principal=KEY_B, request_seq=1, version="v1", rulebook_hash=hashes["v1"])
    assert (approved["request_seq"], approved["approval_expires_at"]) == (1, None)
    assert approved["state"]["active"]["version"] == "v1" and approved["state"]["pending"] == []
    world.act("activate", version="v2")
    world.clock.moment = START + timedelta(minutes=4)
    _refusal(lambda: world.act("approve", principal=KEY_B, request_seq=4, version="v2", rulebook_hash=hashes["v2"]),
             "RELEASE_APPROVAL_NOT_FOUND")


def test_an_event_without_a_signing_key_is_refused_where_signing_is_required(world: World, database_url, tmp_path):
    unsigned_home = tmp_path / "unsigned"
    unsigned_home.mkdir()
    for required in (True, False):
        signing = SigningSetup.load(None, None, "hmac", required=required)
        bare = release_service(world.ledger, signing, world.decisions.snapshots, world.clock)
        world.publish(version("v1"))
        if required:
            with pytest.raises(SigningUnavailable):
                bare.act(SCOPE, KEY_A, EVERY_RIGHT, RULEBOOK_ID, {"action": "activate", "version": "v1"})
            with pytest.raises(SigningUnavailable):
                bare.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"require_approval": True}, partial=True)
            assert bare.history(SCOPE, RULEBOOK_ID) == [] and bare.governance_history(SCOPE) == []
        else:
            event, _created = bare.act(SCOPE, KEY_A, EVERY_RIGHT, RULEBOOK_ID, {"action": "activate", "version": "v1"})
            assert "signature" not in event and "key_id" not in event
            policy_event, _state = bare.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"require_approval": True}, partial=True)
            assert "signature" not in policy_event


def test_the_history_document_carries_the_release_and_the_scopes_policy_changes(world: World):
    two_versions(world)
    world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"approval_ttl_seconds": 600}, partial=True)
    world.act("activate", version="v1")
    document = world.releases.history_document(SCOPE, RULEBOOK_ID)
    assert document == {"release_history_version": "release_history_v1", "scope_hash": scope_hash(SCOPE),
                        "rulebook_id": RULEBOOK_ID, "events": world.releases.history(SCOPE, RULEBOOK_ID),
                        "governance": world.releases.governance_history(SCOPE)}
    assert [e["action"] for e in document["events"]] == ["activate"]
    assert [e["action"] for e in document["governance"]] == ["policy_set"]
    assert verify_history(document["events"], world.signing.trust_anchors(), document["governance"]).valid


# ------------------------------------------------------------------ the release policy and its governance

WHOLE = ReleasePolicy().to_json()


def test_the_policy_in_force_is_the_chains_else_the_stored_one_else_the_default(world: World):
    assert world.releases.policy(SCOPE) == ReleasePolicy()
    world.store_policy({"require_approval": True, "approval_ttl_seconds": 600, "retired_member": 1})
    stored = ReleasePolicy(require_approval=True, approval_ttl_seconds=600)
    assert world.releases.policy(SCOPE) == stored  # read whenever the chain states none
    assert world.releases.policy("other", fresh=True) == ReleasePolicy()
    event, state = world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"approval_ttl_seconds": 300}, partial=True)
    assert event["policy_before"] == stored.to_json() and event["action"] == "policy_set"
    assert world.releases.policy(SCOPE) == state.policy == ReleasePolicy(require_approval=True, approval_ttl_seconds=300)


def test_the_governance_state_is_cached_until_a_fresh_read(world: World):
    other = world.another_worker()
    assert world.releases.governance(SCOPE).seq == 0
    other.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"refuse_superseded_inline": True}, partial=True)
    assert world.releases.governance(SCOPE).seq == 0
    assert world.releases.governance(SCOPE, fresh=True).policy == ReleasePolicy(refuse_superseded_inline=True)
    assert world.releases.governance(SCOPE).seq == 1
    uncached = world.another_worker(cache_seconds=0.0)
    assert uncached.governance(SCOPE).seq == 1
    other.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"refuse_superseded_inline": False}, partial=True)
    assert uncached.governance(SCOPE).seq == 2


def test_changing_the_policy_needs_admin_and_a_principal(world: World):
    refused = _refusal(lambda: world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT - {"admin"}, WHOLE),
                       "RELEASE_PERMISSION_DENIED")
    assert refused.details == {"permission": "admin"}
    with pytest.raises(TypeError):
        world.releases.set_policy(SCOPE, "key_a", EVERY_RIGHT, WHOLE)  # type: ignore[arg-type]
    _refusal(lambda: world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"require_approval": True}, partial=True,
                                               reason=""), "RELEASE_POLICY_INVALID")
    assert world.releases.governance_history(SCOPE) == []


def test_a_put_states_the_whole_policy_and_a_patch_names_members(world: World):
    missing = _refusal(lambda: world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"require_approval": True}),
                       "RELEASE_POLICY_INVALID")
    assert "approval_ttl_seconds" in missing.details["missing"]
    assert world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, WHOLE) == (None, world.releases.governance(SCOPE))
    assert world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"require_dry_run": False}, partial=True)[0] is None
    assert world.releases.governance_history(SCOPE) == []  # nothing changed, nothing recorded
    event, state = world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {**WHOLE, "approval_ttl_seconds": 900},
                                             reason="shorter")
    assert (event["seq"], event["reason"], event["expires_at"], event["request_seq"]) == (1, "shorter", None, None)
    assert state.policy == ReleasePolicy(approval_ttl_seconds=900) and state.seq == 1
    patched, _state = world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"require_dry_run": True}, partial=True)
    assert patched["policy_after"] == {**WHOLE, "approval_ttl_seconds": 900, "require_dry_run": True}


def test_a_policy_change_is_a_signed_governance_event_with_its_row_and_announcement(world: World):
    world.clock.moment = START + timedelta(seconds=7)
    event, state = world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"require_approval": True}, partial=True,
                                             reason="pilot")
    assert {k: event[k] for k in ("seq", "action", "actor", "principal", "created_at", "request_seq", "expires_at",
                                  "reason", "policy_before", "policy_after", "weakens", "previous_event_hash",
                                  "scope_hash")} == {
        "seq": 1, "action": "policy_set", "actor": "key_a", "principal": {"kind": "api_key", "id": "key_a"},
        "created_at": "2026-11-26T12:00:07.000Z", "request_seq": None, "expires_at": None, "reason": "pilot",
        "policy_before": WHOLE, "policy_after": {**WHOLE, "require_approval": True}, "weakens": [],
        "previous_event_hash": None, "scope_hash": scope_hash(SCOPE)}
    assert event["key_id"] == world.signing.receipt_signer().key_id
    assert (state.seq, state.head_event_hash, state.policy) == (1, event["event_hash"],
                                                                ReleasePolicy(require_approval=True))
    [row] = world.releases.reader.store.events(SCOPE, GOVERNANCE_ID)
    assert {k: row[k] for k in ("scope", "rulebook_id", "seq", "action", "event_hash", "idempotency_key",
                                "request_hash", "created_at", "event_json")} == {
        "scope": SCOPE, "rulebook_id": GOVERNANCE_ID, "seq": 1, "action": "policy_set",
        "event_hash": event["event_hash"], "idempotency_key": None, "request_hash": event["event_hash"],
        "created_at": "2026-11-26T12:00:07.000Z", "event_json": canonical_text(event)}
    [announced] = [e for e in world.outbox() if ".release." in e["type"]]
    assert announced["type"] == full_type("release.policy_changed")
    assert announced["data"] == governance_announcement(SCOPE, event).data
    assert announced["subject"] == GOVERNANCE_ID
    assert world.releases.governance(SCOPE) == state  # the cache refreshed after the write
    assert world.releases.governance_history(SCOPE) == [event]


def test_a_weakening_while_approvals_are_required_is_a_request_a_second_principal_applies(world: World):
    world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"require_approval": True, "approval_ttl_seconds": 600},
                              partial=True)
    world.clock.moment = START + timedelta(minutes=1)
    request, state = world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"approval_ttl_seconds": 7200},
                                               partial=True, reason="longer")
    assert (request["action"], request["expires_at"], request["weakens"]) == (
        "policy_request", "2026-11-26T12:11:00.000Z", ["approval_ttl_seconds"])
    assert state.policy.approval_ttl_seconds == 600 and [p.seq for p in state.pending] == [2]
    assert [e["type"] for e in world.outbox() if ".release." in e["type"]][-1] == full_type(
        "release.policy_change_requested")
    for request_seq in (True, 0, -1, "2", None):
        _refusal(lambda request_seq=request_seq: world.releases.approve_policy(SCOPE, KEY_B, EVERY_RIGHT, request_seq),
                 "RELEASE_POLICY_INVALID")
    refused = _refusal(lambda: world.releases.approve_policy(SCOPE, KEY_B, EVERY_RIGHT - {"approve"}, 2),
                       "RELEASE_PERMISSION_DENIED")
    assert refused.details == {"permission": "approve"}
    with pytest.raises(TypeError):
        world.releases.approve_policy(SCOPE, "key_b", EVERY_RIGHT, 2)  # type: ignore[arg-type]
    _refusal(lambda: world.releases.approve_policy(SCOPE, KEY_B, EVERY_RIGHT, 2, reason=""), "RELEASE_POLICY_INVALID")
    _refusal(lambda: world.releases.approve_policy(SCOPE, KEY_B, EVERY_RIGHT, 1), "RELEASE_APPROVAL_NOT_FOUND")
    own = _refusal(lambda: world.releases.approve_policy(SCOPE, KEY_A, EVERY_RIGHT, 2), "RELEASE_SELF_APPROVAL")
    assert own.message == "a principal cannot approve its own request (nor another key of the same holder)"
    world.clock.moment = START + timedelta(minutes=2)
    approved, after = world.releases.approve_policy(SCOPE, KEY_B, frozenset({"approve"}), 2, reason="agreed")
    assert {k: approved[k] for k in ("seq", "action", "actor", "created_at", "request_seq", "reason",
                                     "policy_before", "policy_after", "expires_at")} == {
        "seq": 3, "action": "policy_approve", "actor": "key_b", "created_at": "2026-11-26T12:02:00.000Z",
        "request_seq": 2, "reason": "agreed", "policy_before": {**WHOLE, "require_approval": True,
                                                                 "approval_ttl_seconds": 600},
        "policy_after": {**WHOLE, "require_approval": True, "approval_ttl_seconds": 7200}, "expires_at": None}
    assert after.policy.approval_ttl_seconds == 7200 and after.pending == ()
    assert world.releases.policy(SCOPE).approval_ttl_seconds == 7200


def test_a_policy_request_expires_with_the_ttl_of_the_policy_it_weakens(world: World):
    world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"require_approval": True, "approval_ttl_seconds": 60},
                              partial=True)
    world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"require_approval": False}, partial=True)
    world.clock.moment = START + timedelta(seconds=59)
    document = world.releases.policy_document(SCOPE)
    assert [p["request_seq"] for p in document["pending"]] == [2]
    assert document["policy"]["require_approval"] is True and document["governance_seq"] == 2
    assert document["history"] == world.releases.governance_history(SCOPE) and len(document["history"]) == 2
    world.clock.moment = START + timedelta(seconds=60)
    document = world.releases.policy_document(SCOPE)
    assert document["pending"] == [] and len(world.releases.governance(SCOPE).pending) == 1
    _refusal(lambda: world.releases.approve_policy(SCOPE, KEY_B, EVERY_RIGHT, 2), "RELEASE_APPROVAL_NOT_FOUND")


def test_a_policy_document_reads_the_chain_fresh(world: World):
    assert world.releases.policy_document(SCOPE) == {"policy": WHOLE, "pending": [], "governance_seq": 0,
                                                     "history": []}
    world.another_worker().set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"require_dry_run": True}, partial=True)
    document = world.releases.policy_document(SCOPE)
    assert document["policy"]["require_dry_run"] is True and document["governance_seq"] == 1


def test_a_policy_change_that_loses_a_race_is_retried_eight_times_at_most(world: World, monkeypatch):
    store, append = world.releases.safeguards.store, world.releases.safeguards.store.append
    calls = []

    def lose_once(row, announce=None):
        calls.append(row["seq"])
        if len(calls) == 1:
            world.another_worker().set_policy(SCOPE, KEY_B, EVERY_RIGHT, {"approval_ttl_seconds": 900}, partial=True)
            raise ReleaseRace(str(row["seq"]))
        append(row, announce)

    monkeypatch.setattr(store, "append", lose_once)
    event, state = world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"require_dry_run": True}, partial=True)
    assert calls == [1, 2] and event["policy_before"]["approval_ttl_seconds"] == 900
    assert state.policy == ReleasePolicy(approval_ttl_seconds=900, require_dry_run=True)

    monkeypatch.setattr(store, "append", append)
    world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"require_approval": True}, partial=True)
    world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"require_dry_run": False}, partial=True)  # request 4
    calls.clear()

    def always_lose(row, announce=None):
        calls.append(row["seq"])
        raise ReleaseRace(str(row["seq"]))

    monkeypatch.setattr(store, "append", always_lose)
    raced = _refusal(lambda: world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"approval_ttl_seconds": 60},
                                                       partial=True), "LEDGER_UNAVAILABLE")
    assert raced.message == "safeguard setting changes raced too often; retry" and calls == [5] * 8
    calls.clear()
    raced = _refusal(lambda: world.releases.approve_policy(SCOPE, KEY_B, EVERY_RIGHT, 4), "LEDGER_UNAVAILABLE")
    assert raced.message == "safeguard setting changes raced too often; retry" and calls == [5] * 8


def test_a_policy_approval_that_loses_a_race_to_another_approval_is_not_found(world: World, monkeypatch):
    world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"require_approval": True}, partial=True)
    world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"require_approval": False}, partial=True)
    store, append = world.releases.safeguards.store, world.releases.safeguards.store.append

    def lose_to_another_approver(row, announce=None):
        monkeypatch.setattr(store, "append", append)
        world.another_worker().approve_policy(SCOPE, Principal.api_key("key_c"), EVERY_RIGHT, 2)
        raise ReleaseRace(str(row["seq"]))

    monkeypatch.setattr(store, "append", lose_to_another_approver)
    _refusal(lambda: world.releases.approve_policy(SCOPE, KEY_B, EVERY_RIGHT, 2), "RELEASE_APPROVAL_NOT_FOUND")
    assert [e["actor"] for e in world.releases.governance_history(SCOPE)] == ["key_a", "key_a", "key_c"]


def test_a_scopes_stored_policy_rules_its_moves_until_its_first_change(world: World):
    two_versions(world)
    world.store_policy({"require_approval": True, "approval_ttl_seconds": 300, "refuse_superseded_inline": True})
    requested = world.act("activate", version="v1")
    assert requested["approval_expires_at"] == "2026-11-26T12:05:00.000Z" and requested["state"]["active"] is None
    document = world.releases.policy_document(SCOPE)
    assert document["policy"] == {**WHOLE, "require_approval": True, "approval_ttl_seconds": 300,
                                  "refuse_superseded_inline": True}
    assert world.releases.status(SCOPE, RULEBOOK_ID)["policy"] == document["policy"]


def test_a_canary_waits_for_approval_as_an_activation_does(world: World):
    two_versions(world)
    world.act("activate", version="v1")
    world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"require_approval": True, "approval_ttl_seconds": 60},
                              partial=True)
    requested = world.act("canary", version="v2", percent=10)
    assert requested["approval_expires_at"] == "2026-11-26T12:01:00.000Z"
    assert requested["state"]["canary"] is None and requested["state"]["pending"][0]["action"] == "canary"
    for action, body in (("shadow", {"version": "v2"}), ("halt", {})):
        assert world.act(action, **body)["approval_expires_at"] is None
    assert world.act("activate", version="v2")["approval_expires_at"] == "2026-11-26T12:01:00.000Z"


def test_a_fresh_policy_read_sees_another_workers_change(world: World):
    assert world.releases.policy(SCOPE) == ReleasePolicy()
    world.another_worker().set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"require_dry_run": True}, partial=True)
    assert world.releases.policy(SCOPE) == ReleasePolicy()  # cached
    assert world.releases.policy(SCOPE, fresh=True) == ReleasePolicy(require_dry_run=True)


def test_a_status_states_the_scopes_policy_and_its_running_comparison(world: World):
    two_versions(world)
    world.act("activate", version="v1")
    world.act("canary", version="v2", percent=20)
    world.releases.set_policy(SCOPE, KEY_A, EVERY_RIGHT, {"refuse_superseded_inline": True}, partial=True)
    world.add_rows("canary", ["review", "review"], release_seq=2, effects=["success", "failure"])
    status = world.releases.status(SCOPE, RULEBOOK_ID)
    assert status["policy"] == {**WHOLE, "refuse_superseded_inline": True}
    state = world.releases.state(SCOPE, RULEBOOK_ID)
    assert status["comparison"] == world.releases.comparison(SCOPE, state)
    assert status["comparison"]["canary"]["arms"][1]["decisions"] == 2


def _policy_changes(world: World, first: int, last: int) -> None:
    """Governance rows `first` to `last` written straight into the ledger (their bodies name their seq)."""
    from sqlalchemy import insert

    from gate.ledger.tables import release_events

    rows = [{"scope": SCOPE, "rulebook_id": GOVERNANCE_ID, "seq": seq, "action": "policy_set",
             "event_hash": f"{seq:064x}", "idempotency_key": None, "request_hash": f"{seq:064x}", "created_at": AT,
             "event_json": f'{{"seq": {seq}}}'} for seq in range(first, last + 1)]
    with world.ledger.write() as connection:
        connection.execute(insert(release_events), rows)


def test_the_governance_history_holds_more_than_a_thousand_changes(world: World):
    _policy_changes(world, 1, 1001)
    history = world.releases.governance_history(SCOPE)
    assert len(history) == 1001 and history[0] == {"seq": 1} and history[-1] == {"seq": 1001}


def test_the_governance_history_reads_the_newest_100000_changes_at_most(world: World):
    _policy_changes(world, 1, 100_001)
    history = world.releases.governance_history(SCOPE)
    assert len(history) == 100_000 and history[0] == {"seq": 2} and history[-1] == {"seq": 100_001}


def test_a_key_acts_for_its_holder_in_the_signed_event(world: World):
    """Issue 52: the event states the acting key's holder in its signed principal."""
    from gate.principals import Principal

    two_versions(world)
    ann = "person:https://id.example#ann"
    event, created = world.releases.act(SCOPE, Principal.api_key("key_ann1", ann), EVERY_RIGHT, RULEBOOK_ID,
                                        {"action": "activate", "version": "v1"})
    assert created and event["principal"] == {"kind": "api_key", "id": "key_ann1", "holder": ann}
