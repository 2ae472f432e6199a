"""The one service every safeguard setting changes through (gate/services/governance.py, issue 52),
called directly on a SQLite ledger with a clock that stays where it is put: each change's event,
announcement, refusal and stored row by value (the `safeguards` mutation suite's direct tests; the
HTTP paths are tests/holds/test_safeguard_governance.py)."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from datetime import timedelta, timezone

import pytest
from sqlalchemy import insert

import gate.services.governance as governance_service
from gate.chain.links import scope_hash
from gate.errors import GateError, SigningUnavailable
from gate.events.egress import EventSettings
from gate.holds.policy import HoldPolicy
from gate.keys.config import SigningSetup
from gate.ledger.event_settings import EventSettingsLedger
from gate.ledger.releases import ReleaseRace, witnessed_chain_id
from gate.ledger.tables import hold_events, release_events
from gate.principals import Principal
from gate.releases.governance import GOVERNANCE_ID, GovernanceState
from gate.releases.policy import ReleasePolicy
from gate.services.governance import (
    RETRIES,
    GovernanceService,
    announcement,
    check_reason,
    require_permission,
)
from tests.releases.service_support import KEY_A, SCOPE, START, Clock, build_world

ADMIN = frozenset({"admin"})
APPROVE = frozenset({"approve"})
KEY_B = Principal.api_key("key_b", holder="service:b")
OFF = {"decision_created": False, "anomaly_every_seconds": None}


@pytest.fixture
def world(database_url, tmp_path):
    built = build_world(database_url, tmp_path)
    yield built
    built.ledger.dispose()


@pytest.fixture
def service(world):
    return GovernanceService(world.ledger, world.signing, world.clock, cache_seconds=60.0)


def _settings(body):
    return lambda _before: EventSettings.from_json(body)


def _require_approvals(service):
    event, _state = service.change(SCOPE, "release_policy", KEY_A, ADMIN,
                                   lambda policy: replace(policy, require_approval=True))
    assert event is not None and event["action"] == "policy_set"


def test_permission_and_reason_are_refused_with_the_settings_own_code():
    require_permission("event_settings", KEY_A, ADMIN, "admin")  # held: nothing raised
    with pytest.raises(TypeError):
        require_permission("release_policy", "key_a", ADMIN, "admin")  # type: ignore[arg-type]
    for setting, code in (("release_policy", "RELEASE_PERMISSION_DENIED"), ("hold_policy", "HOLD_PERMISSION_DENIED"),
                          ("event_settings", "EVENTS_PERMISSION_DENIED")):
        with pytest.raises(GateError) as refused:
            require_permission(setting, KEY_A, APPROVE, "admin")
        assert refused.value.code == code
    check_reason("hold_policy", None)
    check_reason("hold_policy", "x")
    check_reason("hold_policy", "x" * 500)
    for bad in ("", "x" * 501, 7):
        with pytest.raises(GateError) as refused:
            check_reason("hold_policy", bad)
        assert refused.value.code == "GOVERNANCE_REQUEST_INVALID"
    with pytest.raises(GateError) as refused:
        check_reason("release_policy", "")
    assert refused.value.code == "RELEASE_POLICY_INVALID"


def test_each_change_is_announced_by_its_setting_with_every_member():
    event = {"seq": 3, "setting": "hold_policy", "action": "policy_set", "actor": "key_a", "principal": {"id": "a"},
             "created_at": "t", "request_seq": None, "expires_at": None, "reason": "r", "policy_before": {"b": 1},
             "policy_after": {"a": 2}, "weakens": [], "event_hash": "h", "previous_event_hash": "p", "key_id": "k",
             "state": {"ignored": True}}
    members = {member: event[member] for member in (
        "seq", "setting", "action", "actor", "principal", "created_at", "request_seq", "expires_at", "reason",
        "policy_before", "policy_after", "weakens", "event_hash", "previous_event_hash", "key_id")}
    changed = announcement("acme", event)
    assert (changed.name, changed.data) == ("hold.policy_changed", {"scope": "acme", **members, "policy": {"a": 2}})
    requested = announcement("acme", {**event, "action": "policy_request"})
    assert requested.name == "hold.policy_change_requested"
    assert requested.data == {"scope": "acme", **members, "action": "policy_request"}  # no `policy` member
    for setting, names in (("release_policy", ("release.policy_change_requested", "release.policy_changed")),
                           ("event_settings", ("events.settings_change_requested", "events.settings_changed"))):
        assert announcement("s", {**event, "setting": setting, "action": "policy_request"}).name == names[0]
        approved = announcement("s", {**event, "setting": setting, "action": "policy_approve"})
        assert approved.name == names[1] and "policy" not in approved.data
    unnamed = {key: value for key, value in event.items() if key != "setting"}
    assert announcement("s", {**unnamed, "action": "policy_set"}).name == "release.policy_changed"


def test_a_change_that_changes_nothing_writes_nothing(service):
    assert service.change(SCOPE, "event_settings", KEY_A, ADMIN, _settings(OFF)) == (None, GovernanceState())
    assert service.history(SCOPE) == []


def test_event_settings_changed_are_written_where_the_decide_path_reads_them(world, service):
    world.clock.moment = START
    event, state = service.change(SCOPE, "event_settings", KEY_A, ADMIN,
                                  _settings({"decision_created": True, "anomaly_every_seconds": 3600}), reason="why")
    assert (event["action"], event["setting"], event["reason"], event["seq"]) == ("policy_set", "event_settings",
                                                                                  "why", 1)
    assert state.value("event_settings") == EventSettings(True, 3600) and state.seq == 1
    row = EventSettingsLedger(world.ledger).get(SCOPE)
    assert {key: row[key] for key in ("decision_created", "anomaly_every_seconds", "anomaly_next_at", "updated_at",
                                      "updated_by")} == {
        "decision_created": 1, "anomaly_every_seconds": 3600, "anomaly_next_at": "2026-11-26T12:00:00.000Z",
        "updated_at": "2026-11-26T12:00:00.000Z", "updated_by": "key_a"}
    world.clock.moment = START + timedelta(minutes=5)
    service.change(SCOPE, "event_settings", KEY_A, ADMIN, _settings(OFF))
    row = EventSettingsLedger(world.ledger).get(SCOPE)
    assert (row["decision_created"], row["anomaly_every_seconds"], row["anomaly_next_at"], row["updated_at"]) == (
        0, None, None, "2026-11-26T12:05:00.000Z")
    assert [announced["type"] for announced in world.outbox()] == ["dev.decision-gate.events.settings_changed"] * 2


def test_a_weakening_while_approvals_are_required_is_a_request_that_expires_after_the_ttl(world, service):
    _require_approvals(service)
    event, state = service.change(SCOPE, "event_settings", KEY_A, ADMIN,
                                  _settings({"decision_created": True, "anomaly_every_seconds": None}))
    ttl = ReleasePolicy().approval_ttl_seconds
    assert event["action"] == "policy_request" and event["approvals_required"] is True
    assert event["expires_at"] == (START + timedelta(seconds=ttl)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    assert event["weakens"] == ["decision_created"]
    assert EventSettingsLedger(world.ledger).get(SCOPE) is None  # nothing in force yet
    assert service.value(SCOPE, "event_settings") == EventSettings()
    [pending] = state.pending
    assert (pending.seq, pending.setting) == (2, "event_settings")
    # a naive clock reads as UTC
    world.clock.moment = START.replace(tzinfo=None)
    naive, _ = service.change(SCOPE, "hold_policy", KEY_A, ADMIN,
                              lambda policy: replace(policy, four_eyes=False))
    assert naive["expires_at"] == event["expires_at"] and naive["action"] == "policy_request"
    # a strengthening applies at once, approvals required or not
    world.clock.moment = START
    shorter, _ = service.change(SCOPE, "event_settings", KEY_A, ADMIN,
                                _settings({"decision_created": False, "anomaly_every_seconds": 300}))
    assert shorter["action"] == "policy_set" and shorter["expires_at"] is None


def test_an_approval_by_another_holder_applies_the_request_and_writes_the_row(world, service):
    _require_approvals(service)
    requested, _ = service.change(SCOPE, "event_settings", KEY_A, ADMIN,
                                  _settings({"decision_created": True, "anomaly_every_seconds": None}))
    world.clock.moment = START + timedelta(seconds=1)
    for bad in (True, 0, -1, "2", None):
        with pytest.raises(GateError) as refused:
            service.approve(SCOPE, "event_settings", KEY_B, APPROVE, bad)
        assert refused.value.code == "GOVERNANCE_REQUEST_INVALID"
    with pytest.raises(GateError) as refused:
        service.approve(SCOPE, "release_policy", KEY_B, APPROVE, 0)
    assert refused.value.code == "RELEASE_POLICY_INVALID"
    with pytest.raises(GateError) as refused:
        service.approve(SCOPE, "hold_policy", KEY_B, APPROVE, requested["seq"])  # another setting's request
    assert refused.value.code == "GOVERNANCE_REQUEST_NOT_FOUND"
    with pytest.raises(GateError) as refused:
        service.approve(SCOPE, "event_settings", KEY_B, ADMIN, requested["seq"])
    assert refused.value.code == "EVENTS_PERMISSION_DENIED"
    event, state = service.approve(SCOPE, "event_settings", KEY_B, APPROVE, requested["seq"], reason="ok")
    assert (event["action"], event["request_seq"], event["reason"], event["approvals_required"]) == (
        "policy_approve", requested["seq"], "ok", True)
    assert event["policy_before"] == OFF and event["policy_after"]["decision_created"] is True
    assert state.value("event_settings") == EventSettings(True, None) and state.pending == ()
    row = EventSettingsLedger(world.ledger).get(SCOPE)
    assert (row["decision_created"], row["updated_by"], row["updated_at"]) == (1, "key_b", "2026-11-26T12:00:01.000Z")
    with pytest.raises(GateError) as refused:
        service.approve(SCOPE, "event_settings", KEY_B, APPROVE, requested["seq"])  # applied: gone
    assert refused.value.code == "GOVERNANCE_REQUEST_NOT_FOUND"


def test_the_document_lists_only_live_requests_of_its_setting(world, service):
    _require_approvals(service)
    service.change(SCOPE, "event_settings", KEY_A, ADMIN,
                   _settings({"decision_created": True, "anomaly_every_seconds": None}))
    service.change(SCOPE, "hold_policy", KEY_A, ADMIN, lambda policy: replace(policy, four_eyes=False))
    document = service.document(SCOPE, "event_settings")
    assert document["policy"] == OFF and document["governance_seq"] == 3
    assert [p["request_seq"] for p in document["pending"]] == [2]
    assert document["pending"][0]["setting"] == "event_settings"
    ttl = ReleasePolicy().approval_ttl_seconds
    world.clock.moment = START + timedelta(seconds=ttl) - timedelta(milliseconds=1)
    assert len(service.document(SCOPE, "event_settings")["pending"]) == 1
    world.clock.moment = START + timedelta(seconds=ttl)
    assert service.document(SCOPE, "event_settings")["pending"] == []  # at its instant it has expired


def test_before_the_first_change_each_setting_is_read_where_the_scope_kept_it(world, service):
    assert service.value(SCOPE, "release_policy") == ReleasePolicy()
    world.store_policy({**ReleasePolicy().to_json(), "require_approval": True})
    assert service.value(SCOPE, "release_policy").require_approval is True
    EventSettingsLedger(world.ledger).put({"scope": SCOPE, "decision_created": 1, "anomaly_every_seconds": 60,
                                           "anomaly_next_at": None, "updated_at": "t", "updated_by": "x"})
    assert service.value(SCOPE, "event_settings") == EventSettings(True, 60)
    assert service.value("other", "event_settings") == EventSettings()
    assert service.value(SCOPE, "hold_policy") == service.value("other", "hold_policy")  # the default


def test_the_state_is_cached_for_its_seconds_and_the_cache_is_bounded(world, service):
    other = GovernanceService(world.ledger, world.signing, world.clock, cache_seconds=60.0)
    assert other.state(SCOPE).seq == 0
    service.change(SCOPE, "event_settings", KEY_A, ADMIN,
                   _settings({"decision_created": True, "anomaly_every_seconds": None}))
    assert service.state(SCOPE).seq == 1  # its own change refreshed it at once
    assert other.state(SCOPE).seq == 0  # another worker's cached state, within its seconds
    assert other.state(SCOPE, fresh=True).seq == 1
    uncached = GovernanceService(world.ledger, world.signing, world.clock, cache_seconds=0)
    assert uncached.state(SCOPE).seq == 1
    other._cache.update({str(n): (1e18, GovernanceState()) for n in range(4095)})
    assert len(other._cache) == 4096
    other.state("another", fresh=True)
    assert list(other._cache) == ["another"]


def test_a_chain_written_before_issue_52_is_folded(world, service):
    service.change(SCOPE, "release_policy", KEY_A, ADMIN, lambda policy: replace(policy, require_approval=True))
    from sqlalchemy import update

    from gate.ledger.tables import release_events

    with world.ledger.write() as connection:  # its head states no `applied`, as before issue 52
        row = connection.execute(release_events.select().where(release_events.c.rulebook_id == GOVERNANCE_ID)).one()
        event = json.loads(row.event_json)
        del event["state"]["applied"]
        connection.execute(update(release_events).where(release_events.c.rulebook_id == GOVERNANCE_ID)
                           .values(event_json=json.dumps(event)))
    state = service.state(SCOPE, fresh=True)
    assert state.seq == 1 and state.value("release_policy").require_approval is True
    assert state.applied == {"release_policy": 1}


def test_no_unsigned_change_where_signing_is_required(world):
    unsigned = GovernanceService(world.ledger, SigningSetup.load(None, None, "hmac", required=True), Clock())
    with pytest.raises(SigningUnavailable):
        unsigned.change(SCOPE, "event_settings", KEY_A, ADMIN,
                        _settings({"decision_created": True, "anomaly_every_seconds": None}))
    assert unsigned.history(SCOPE) == []
    optional = GovernanceService(world.ledger, SigningSetup.load(None, None, "hmac", required=False), Clock())
    event, _ = optional.change(SCOPE, "event_settings", KEY_A, ADMIN,
                               _settings({"decision_created": True, "anomaly_every_seconds": None}))
    assert "signature" not in event and event["event_hash"]


# The rest pins what the `safeguards` mutation suite's first run left surviving (docs/mutation-testing.md).


def _request_event_settings(service):
    """A weakening of the event settings while the scope requires approvals: a pending request."""
    event, _state = service.change(SCOPE, "event_settings", KEY_A, ADMIN,
                                   _settings({"decision_created": True, "anomaly_every_seconds": None}))
    assert event["action"] == "policy_request"
    return event


def test_a_bad_reason_is_refused_with_the_release_policys_own_codes(service):
    for bad in ("", 7):
        with pytest.raises(GateError) as refused:
            service.change(SCOPE, "release_policy", KEY_A, ADMIN, lambda policy: policy, reason=bad)
        assert refused.value.code == "RELEASE_POLICY_INVALID"
        with pytest.raises(GateError) as refused:
            service.approve(SCOPE, "release_policy", KEY_B, APPROVE, 1, reason=bad)
        assert refused.value.code == "RELEASE_POLICY_INVALID"
    with pytest.raises(GateError) as refused:  # a well-formed request_seq that names no request
        service.approve(SCOPE, "release_policy", KEY_B, APPROVE, 1)
    assert refused.value.code == "RELEASE_APPROVAL_NOT_FOUND"
    assert service.history(SCOPE) == []


def test_a_scope_that_stored_its_policy_before_the_chain_requires_approvals_from_it(world, service):
    world.store_policy({**ReleasePolicy().to_json(), "require_approval": True})
    assert service.approvals_required(SCOPE) is True  # read from the scope's stored policy, not a default
    requested = _request_event_settings(service)  # the chain's first event: request_seq 1
    assert (requested["seq"], requested["approvals_required"]) == (1, True)
    event, state = service.approve(SCOPE, "event_settings", KEY_B, APPROVE, 1)
    assert (event["request_seq"], event["approvals_required"], event["policy_before"]) == (1, True, OFF)
    assert state.value("event_settings") == EventSettings(True, None)
    # a hold-policy request is approved against the hold policy in force, not another setting's value
    held, _ = service.change(SCOPE, "hold_policy", KEY_A, ADMIN, lambda policy: replace(policy, four_eyes=False))
    event, state = service.approve(SCOPE, "hold_policy", KEY_B, APPROVE, held["seq"])
    assert event["policy_before"] == HoldPolicy().to_json() and event["policy_after"]["four_eyes"] is False
    assert state.value("hold_policy") == replace(HoldPolicy(), four_eyes=False)


def test_a_change_starts_from_the_settings_the_scope_kept_before_its_chain(world, service):
    EventSettingsLedger(world.ledger).put({"scope": SCOPE, "decision_created": 1, "anomaly_every_seconds": 300,
                                           "anomaly_next_at": None, "updated_at": "t", "updated_by": "x"})
    assert service.document(SCOPE, "event_settings")["policy"] == {"decision_created": True,
                                                                   "anomaly_every_seconds": 300}
    assert service.document(SCOPE, "hold_policy")["policy"] == HoldPolicy().to_json()
    event, _ = service.change(SCOPE, "event_settings", KEY_A, ADMIN,
                              lambda settings: replace(settings, anomaly_every_seconds=600))
    assert event["policy_before"] == {"decision_created": True, "anomaly_every_seconds": 300}
    assert event["policy_after"] == {"decision_created": True, "anomaly_every_seconds": 600}


def test_the_hold_policy_in_force_before_the_chain_is_the_hold_chains_newest_step(world, service):
    relaxed = replace(HoldPolicy(), four_eyes=False)
    with world.ledger.write() as connection:
        connection.execute(insert(hold_events).values(
            scope=SCOPE, seq=1, decision_id=None, action="policy_set", event_hash="h", created_at="t",
            event_json=json.dumps({"policy": relaxed.to_json()})))
    assert service.value(SCOPE, "hold_policy") == relaxed
    assert service.value("other", "hold_policy") == HoldPolicy()


def test_the_value_in_force_is_the_chains_once_it_changed_there(service):
    _require_approvals(service)  # the chain's, not the stored (none: the default) policy
    assert service.value(SCOPE, "release_policy").require_approval is True


def test_each_event_names_its_scopes_hash_and_is_witnessed(world):
    published = []

    class Witness:
        def check(self, chain_id, read_hashes):
            return list(read_hashes())

        def publish(self, chain_id, hashes):
            published.append((chain_id, list(hashes)))

    service = GovernanceService(world.ledger, world.signing, world.clock, witness=Witness())
    first, _ = service.change(SCOPE, "event_settings", KEY_A, ADMIN, _settings({"decision_created": True,
                                                                                "anomaly_every_seconds": None}))
    second, _ = service.change(SCOPE, "event_settings", KEY_A, ADMIN, _settings(OFF))
    assert first["scope_hash"] == scope_hash(SCOPE)
    chain = witnessed_chain_id(SCOPE, GOVERNANCE_ID)
    assert published == [(chain, [first["event_hash"]]), (chain, [first["event_hash"], second["event_hash"]])]


def test_a_change_and_an_approval_read_the_chain_afresh_after_another_workers_change(world, service):
    other = GovernanceService(world.ledger, world.signing, world.clock, cache_seconds=60.0)
    assert other.state(SCOPE).seq == 0  # cached for its 60 seconds
    _require_approvals(service)
    assert other.document(SCOPE, "release_policy")["governance_seq"] == 1
    assert other.state(SCOPE).seq == 1
    requested = _request_event_settings(service)
    event, state = other.approve(SCOPE, "event_settings", KEY_B, APPROVE, requested["seq"])
    assert (event["seq"], state.seq) == (3, 3)
    changed, _ = service.change(SCOPE, "event_settings", KEY_A, ADMIN, _settings(OFF))
    assert changed["seq"] == 4
    event, _ = other.change(SCOPE, "release_policy", KEY_A, ADMIN,
                            lambda policy: replace(policy, approval_ttl_seconds=600))
    assert event["seq"] == 5


def test_each_attempt_decides_on_one_read_of_the_chain(world):
    service = GovernanceService(world.ledger, world.signing, world.clock, cache_seconds=0)
    world.store_policy({**ReleasePolicy().to_json(), "require_approval": True})
    reads = []
    head = service.store.head
    service.store.head = lambda *args: reads.append(args) or head(*args)  # type: ignore[method-assign]
    requested = _request_event_settings(service)
    assert len(reads) == 2  # the snapshot it decided on, and the refresh after its event
    reads.clear()
    service.approve(SCOPE, "event_settings", KEY_B, APPROVE, requested["seq"])
    assert len(reads) == 2
    reads.clear()
    assert service.document(SCOPE, "event_settings")["governance_seq"] == 2
    assert len(reads) == 1


def test_changes_that_race_every_time_give_up_with_ledger_unavailable(world, service):
    _require_approvals(service)
    requested = _request_event_settings(service)
    attempts = []

    def raced(row, announce=None):
        attempts.append(row["seq"])
        raise ReleaseRace(str(row["seq"]))

    service.store.append = raced  # type: ignore[method-assign]
    with pytest.raises(GateError) as refused:
        service.change(SCOPE, "event_settings", KEY_A, ADMIN, _settings({"decision_created": False,
                                                                         "anomaly_every_seconds": 300}))
    assert refused.value.code == "LEDGER_UNAVAILABLE" and attempts == [3] * RETRIES
    attempts.clear()
    with pytest.raises(GateError) as refused:
        service.approve(SCOPE, "event_settings", KEY_B, APPROVE, requested["seq"])
    assert refused.value.code == "LEDGER_UNAVAILABLE" and attempts == [3] * RETRIES


def test_a_request_expires_after_its_ttl_in_utc_whatever_the_clocks_zone(world, service, monkeypatch):
    _require_approvals(service)
    ttl = ReleasePolicy().approval_ttl_seconds
    expected = (START + timedelta(seconds=ttl)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    world.clock.moment = START.astimezone(timezone(timedelta(hours=2)))  # the same instant at +02:00
    event = _request_event_settings(service)
    assert event["expires_at"] == expected
    monkeypatch.setenv("TZ", "Asia/Tokyo")  # a naive clock is read as UTC, not as the machine's zone
    time.tzset()
    try:
        world.clock.moment = START.replace(tzinfo=None)
        naive, _ = service.change(SCOPE, "hold_policy", KEY_A, ADMIN, lambda policy: replace(policy, four_eyes=False))
    finally:
        monkeypatch.undo()
        time.tzset()
    assert naive["expires_at"] == expected


def test_the_cached_state_expires_at_its_instant(world, service, monkeypatch):
    other = GovernanceService(world.ledger, world.signing, world.clock, cache_seconds=1.0)
    now = [100.0]
    monkeypatch.setattr(governance_service.time, "monotonic", lambda: now[0])
    assert other.state(SCOPE).seq == 0
    _require_approvals(service)
    now[0] = 100.5
    assert other.state(SCOPE).seq == 0
    now[0] = 101.0
    assert other.state(SCOPE).seq == 1


def test_a_head_that_states_what_applied_is_read_alone(service):
    _require_approvals(service)
    folded = []
    history = service.history
    service.history = lambda scope: folded.append(scope) or history(scope)  # type: ignore[method-assign]
    assert service.state(SCOPE, fresh=True).applied == {"release_policy": 1}
    assert folded == []


def test_the_history_keeps_the_newest_changes_up_to_its_bound(world, service, monkeypatch):
    monkeypatch.setattr(governance_service, "HISTORY_LIMIT", 3)
    with world.ledger.write() as connection:
        connection.execute(insert(release_events), [
            {"scope": SCOPE, "rulebook_id": GOVERNANCE_ID, "seq": seq, "action": "policy_set", "event_hash": "h",
             "idempotency_key": None, "request_hash": "h", "created_at": "t", "event_json": f'{{"seq":{seq}}}'}
            for seq in range(1, 6)])
    assert service.history(SCOPE) == [{"seq": 3}, {"seq": 4}, {"seq": 5}]


def test_a_head_that_states_no_applied_is_folded_with_every_settings_rules(world, service):
    service.change(SCOPE, "event_settings", KEY_A, ADMIN, _settings({"decision_created": True,
                                                                     "anomaly_every_seconds": None}))
    from sqlalchemy import update

    with world.ledger.write() as connection:  # its head states no `applied`
        row = connection.execute(release_events.select().where(release_events.c.rulebook_id == GOVERNANCE_ID)).one()
        event = json.loads(row.event_json)
        del event["state"]["applied"]
        connection.execute(update(release_events).where(release_events.c.rulebook_id == GOVERNANCE_ID)
                           .values(event_json=json.dumps(event)))
    state = service.state(SCOPE, fresh=True)
    assert (state.seq, state.value("event_settings"), state.applied) == (1, EventSettings(True, None),
                                                                         {"event_settings": 1})


def test_an_approval_body_is_refused_by_its_shape_alone_with_the_settings_own_code():
    """`approval_members`: the body's shape (an object of `request_seq` and `reason` only) is
    refused here with the setting's own invalid code and the schema's words; its members' values
    are left to `approve`, after the approver's permission."""
    from gate.services.governance import approval_members

    for setting, code in (("release_policy", "RELEASE_POLICY_INVALID"), ("hold_policy", "GOVERNANCE_REQUEST_INVALID"),
                          ("event_settings", "GOVERNANCE_REQUEST_INVALID"), ("api_keys", "GOVERNANCE_REQUEST_INVALID")):
        for body in ([1], "x", None, 7, {"request_seq": 1, "extra": True}, {"reason": "r", "seq": 2}):
            with pytest.raises(GateError) as refused:
                approval_members(setting, body)
            assert (refused.value.code, refused.value.message) == (code, "the body is {request_seq, reason?}"), body
        assert approval_members(setting, {"request_seq": 3, "reason": "checked"}) == (3, "checked")
        assert approval_members(setting, {"request_seq": 4}) == (4, None)
        assert approval_members(setting, {"reason": "alone"}) == (None, "alone")
        assert approval_members(setting, {}) == (None, None)
        # a member of the wrong type is the value check's to refuse, after the permission check
        assert approval_members(setting, {"request_seq": "x", "reason": 5}) == ("x", 5)
        assert approval_members(setting, {"request_seq": 0}) == (0, None)


def test_approvals_are_required_by_the_scopes_own_release_policy_read_afresh(world, service):
    """`approvals_required` reads the scope's release policy from the chain as it is now, whatever
    the reader cached, and only that scope's."""
    reader = governance_service.SafeguardSettings(world.ledger, cache_seconds=3600.0)
    assert reader.approvals_required(SCOPE) is False
    reader.state(SCOPE)  # cached before the change another service makes
    _require_approvals(service)
    assert reader.approvals_required(SCOPE) is True
    assert reader.approvals_required("other-scope") is False
    assert service.approvals_required(SCOPE) is True


def _key_row(key_id, scope, status, permissions, holder):
    return {"key_id": key_id, "key_hash": key_id.ljust(64, "0"), "scope": scope, "plan": "starter",
            "rate_limit": None, "monthly_cap": None, "status": status, "label": None,
            "created_at": "2026-11-26T12:00:00.000Z", "disabled_at": None, "permissions": permissions,
            "holder": holder}


def test_the_keys_in_force_are_the_scopes_active_keys_that_act_on_production(world, service):
    """The `api_keys` value is read from the ledger's key rows, never the chain: this scope's active
    keys with a right that acts on production, each with its holder."""
    for row in (_key_row("k_admin", SCOPE, "active", "decide,admin", "person:https://id.example#ann"),
                _key_row("k_release", SCOPE, "active", "release", None),
                _key_row("k_decide", SCOPE, "active", "decide", "service:billing"),
                _key_row("k_disabled", SCOPE, "disabled", "admin", None),
                _key_row("k_pending", SCOPE, "pending", "approve", None),
                _key_row("k_other", "other-scope", "active", "admin", None)):
        world.ledger.insert_api_key(row)
    value = service.value(SCOPE, "api_keys")
    assert value.to_json() == {"keys": {
        "k_admin": {"holder": "person:https://id.example#ann", "permissions": "decide,admin"},
        "k_release": {"holder": "key:k_release", "permissions": "decide,release"}}}  # as stored: decide implied
    assert service.value("other-scope", "api_keys").to_json() == {
        "keys": {"k_other": {"holder": "key:k_other", "permissions": "decide,admin"}}}
