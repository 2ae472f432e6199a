"""The keys that act on production, recorded and governed (gate/services/keys.py, issue 52), called
directly on a SQLite ledger with a clock that stays where it is put: each change's key row, signed
grant event and governance event by value, each refusal by its code (the `keys` mutation suite's
direct tests; the HTTP and command-line walks are test_key_grant_approval.py and
tests/cli/test_key_holders_cli.py)."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import delete

import gate.services.keys as keys_module
from gate.chain.links import scope_hash
from gate.clock import iso_ms
from gate.errors import GateError, SigningUnavailable
from gate.keys.config import SigningSetup
from gate.keys.signing import generate_keyring
from gate.ledger import Ledger
from gate.ledger.tables import api_keys
from gate.principals import Principal
from gate.releases.key_grants import verify_key_grants
from gate.services.governance import GovernanceService
from gate.services.keys import RETRIES, KeyChange, KeyService, acts_on_production
from gate.services.root import key_service
from tests.releases.service_support import START, Clock

SCOPE = "acme"
ANN = "person:https://id.example#ann"
OPS = Principal.operator("ops")
EVERY = frozenset({"decide", "publish", "release", "approve", "resolve", "admin"})
APPROVER = Principal.api_key("key_z", holder="service:b")
NOW = iso_ms(START)


@pytest.fixture
def signing(tmp_path):
    keyring = tmp_path / "signing-keys.json"
    generate_keyring(keyring, "2026-11-01T00:00:00.000Z")
    return SigningSetup.load(keyring, None, "hmac")


@pytest.fixture
def ledger(database_url):
    built = Ledger(database_url)
    yield built
    built.dispose()


@pytest.fixture
def keys(ledger, signing):
    return key_service(ledger, signing, Clock())


def _row(key_id: str, permissions: str | None, holder: str | None = ANN, status: str = "active") -> dict[str, Any]:
    return {"key_id": key_id, "key_hash": hashlib.sha256(key_id.encode()).hexdigest(), "scope": SCOPE,
            "plan": "starter", "rate_limit": None, "monthly_cap": None, "status": status, "label": None,
            "created_at": "2026-11-01T00:00:00.000Z", "permissions": permissions, "holder": holder}


def _stored(keys: KeyService, key_id: str) -> tuple[Any, ...]:
    row = keys.ledger.api_key(key_id)
    assert row is not None
    return row["status"], row["permissions"], row["holder"], row["disabled_at"]


def _grant(event: dict[str, Any]) -> tuple[Any, ...]:
    return (event["seq"], event["action"], event["api_key_id"], event["holder"], event["permissions"],
            event["actor"], event["created_at"])


def _require_approvals(keys: KeyService) -> None:
    event, _state = keys.governance.change(SCOPE, "release_policy", OPS, EVERY,
                                           lambda policy: replace(policy, require_approval=True))
    assert event is not None and event["seq"] == 1


def _chain(keys: KeyService) -> list[dict[str, Any]]:
    return keys.history_document(SCOPE)["events"]


def test_what_acts_on_production_and_what_is_pending():
    assert [acts_on_production(p) for p in (None, "decide,publish", "decide,release", "decide,approve",
                                             "decide,resolve", "decide,admin")] == [False, False, True, True, True, True]
    assert KeyChange().pending is False and KeyChange() == KeyChange((), None)
    assert KeyChange(governance={"action": "policy_set"}).pending is False
    assert KeyChange(governance={"action": "policy_request"}).pending is True


def test_a_key_that_acts_on_no_production_right_is_stored_as_it_is(keys):
    _require_approvals(keys)
    assert keys.create(OPS, EVERY, _row("key_p", "decide,publish", None)) == KeyChange()
    assert _stored(keys, "key_p") == ("active", "decide,publish", None, None)
    assert _chain(keys) == [] and len(keys.governance.history(SCOPE)) == 1  # no grant, no governance event


def test_without_approvals_a_grant_acts_at_once_with_its_signed_chained_event(keys, signing):
    made = keys.create(OPS, EVERY, _row("key_a", "decide,approve"))
    assert made.governance is None and len(made.grants) == 1 and made.pending is False
    first = made.grants[0]
    assert _grant(first) == (1, "key_created", "key_a", ANN, "decide,approve", "operator:ops", NOW)
    assert (first["scope_hash"], first["previous_event_hash"], first["principal"]) == (
        scope_hash(SCOPE), None, {"kind": "operator", "id": "operator:ops"})
    assert first["key_id"] == signing.receipt_signer().key_id
    assert _stored(keys, "key_a") == ("active", "decide,approve", ANN, None)
    widened = keys.widen(APPROVER, EVERY, "key_a", "admin", None)  # the holder kept: the row's
    assert widened is not None and widened.governance is None
    assert _grant(widened.grants[0]) == (2, "key_widened", "key_a", ANN, "decide,approve,admin", "key_z", NOW)
    assert widened.grants[0]["previous_event_hash"] == first["event_hash"]
    assert _stored(keys, "key_a") == ("active", "decide,approve,admin", ANN, None)
    assert _chain(keys) == [first, widened.grants[0]]
    check = verify_key_grants(keys.history_document(SCOPE), signing.trust_anchors())
    assert (check.valid, check.events, check.problem) == (True, 2, None)


def test_a_key_of_no_stated_holder_is_granted_as_its_own(keys):
    made = keys.create(OPS, EVERY, _row("key_o", "decide,release", None))
    assert _grant(made.grants[0])[3] == "key:key_o"
    assert _stored(keys, "key_o") == ("active", "decide,release", None, None)


def test_the_first_production_key_is_the_bootstrap_and_the_next_one_waits_for_a_second_holder(keys):
    _require_approvals(keys)
    boot = keys.create(OPS, EVERY, _row("key_0", "decide,admin"))
    assert boot.governance is not None and boot.governance["action"] == "policy_set" and not boot.pending
    assert [_grant(e)[:3] for e in boot.grants] == [(1, "key_created", "key_0")]
    asked = keys.create(OPS, EVERY, _row("key_1", "decide,approve"))
    assert asked.grants == () and asked.pending is True
    request = asked.governance
    assert request is not None and (request["action"], request["seq"], request["setting"]) == (
        "policy_request", 3, "api_keys")
    assert request["policy_after"] == {"keys": {"key_0": {"holder": ANN, "permissions": "decide,admin"},
                                                "key_1": {"holder": ANN, "permissions": "decide,approve"}}}
    assert (request["expires_at"], request["weakens"]) == (
        iso_ms(START + timedelta(seconds=86_400)), ["key_1: approve"])  # the service's clock
    assert _stored(keys, "key_1") == ("pending", "decide,approve", ANN, None)
    assert len(_chain(keys)) == 1
    before = {"keys": {"key_0": {"holder": ANN, "permissions": "decide,admin"}}}
    assert keys.document(SCOPE) == {
        "ok": True, "policy": before, "governance_seq": 3,
        "pending": [{"setting": "api_keys", "request_seq": 3, "policy_before": before,
                     "policy_after": request["policy_after"], "weakens": ["key_1: approve"],
                     "requested_by": "operator:ops", "expires_at": request["expires_at"]}]}
    done = keys.approve(SCOPE, APPROVER, frozenset({"approve"}), 3, "checked")
    assert done.governance is not None and (done.governance["action"], done.governance["reason"]) == (
        "policy_approve", "checked")
    # only the key the request grants gets an event (key_0, unchanged and first by id, gets none)
    assert [_grant(e) for e in done.grants] == [(2, "key_created", "key_1", ANN, "decide,approve", "key_z", NOW)]
    assert _stored(keys, "key_1") == ("active", "decide,approve", ANN, None)
    assert keys.document(SCOPE)["pending"] == []


def test_an_approved_grant_of_a_key_of_no_stated_holder_keeps_its_row_holder_none(keys):
    _require_approvals(keys)
    keys.create(OPS, EVERY, _row("key_0", "decide,admin"))
    asked = keys.create(OPS, EVERY, _row("key_1", "decide,release", None))
    assert asked.governance is not None
    done = keys.approve(SCOPE, APPROVER, frozenset({"approve"}), asked.governance["seq"])
    assert done.governance is not None and done.governance["reason"] is None
    assert [_grant(e)[2:5] for e in done.grants] == [("key_1", "key:key_1", "decide,release")]
    assert _stored(keys, "key_1") == ("active", "decide,release", None, None)


def test_an_approval_of_no_such_request_is_refused_with_its_code(keys):
    _require_approvals(keys)
    with pytest.raises(GateError) as refused:
        keys.approve(SCOPE, APPROVER, frozenset({"approve"}), 9)
    assert refused.value.code == "GOVERNANCE_REQUEST_NOT_FOUND"


def test_enabling_a_key_again(keys):
    assert keys.enable(OPS, EVERY, "key_none") is None
    keys.ledger.insert_api_key(_row("key_p", "decide,publish", None, "disabled"))
    keys.ledger.set_api_key_status("key_p", "disabled", "2026-11-02T00:00:00.000Z")
    assert keys.enable(OPS, EVERY, "key_p") == KeyChange()
    assert _stored(keys, "key_p") == ("active", "decide,publish", None, None)
    keys.create(OPS, EVERY, _row("key_a", "decide,resolve"))
    assert keys.disable("key_a") == KeyChange()
    enabled = keys.enable(OPS, EVERY, "key_a")
    assert enabled is not None and enabled.governance is None
    assert [_grant(e) for e in enabled.grants] == [(2, "key_enabled", "key_a", ANN, "decide,resolve",
                                                    "operator:ops", NOW)]
    assert _stored(keys, "key_a") == ("active", "decide,resolve", ANN, None)
    assert keys.enable(OPS, EVERY, "key_a") == KeyChange()  # already active as granted: nothing written
    assert len(_chain(keys)) == 2


def test_enabling_a_production_key_is_a_request_while_approvals_are_required(keys):
    _require_approvals(keys)
    keys.create(OPS, EVERY, _row("key_0", "decide,admin"))
    keys.ledger.insert_api_key(_row("key_d", "decide,release", ANN, "disabled"))
    asked = keys.enable(OPS, EVERY, "key_d")
    assert asked is not None and asked.pending and asked.grants == ()
    assert _stored(keys, "key_d")[0] == "disabled"
    assert asked.governance is not None
    done = keys.approve(SCOPE, APPROVER, frozenset({"approve"}), asked.governance["seq"])
    assert [_grant(e)[:5] for e in done.grants] == [(2, "key_enabled", "key_d", ANN, "decide,release")]
    assert _stored(keys, "key_d") == ("active", "decide,release", ANN, None)


def test_widening_a_key(keys):
    assert keys.widen(OPS, EVERY, "key_none", "admin", ANN) is None
    keys.ledger.insert_api_key(_row("key_p", None, None))
    assert keys.widen(OPS, EVERY, "key_p", "publish", None) == KeyChange()
    assert _stored(keys, "key_p") == ("active", "decide,publish", None, None)
    assert keys.widen(OPS, EVERY, "key_p", "publish", "service:ci") == KeyChange()
    assert _stored(keys, "key_p") == ("active", "decide,publish", "service:ci", None)
    keys.ledger.insert_api_key(_row("key_q", None, None))
    with pytest.raises(GateError) as unnamed:
        keys.widen(OPS, EVERY, "key_q", "admin", None)
    assert unnamed.value.code == "GOVERNANCE_REQUEST_INVALID"
    assert _stored(keys, "key_q") == ("active", None, None, None)
    widened = keys.widen(OPS, EVERY, "key_q", "admin", ANN)
    assert widened is not None and [_grant(e)[:5] for e in widened.grants] == [
        (1, "key_widened", "key_q", ANN, "decide,admin")]
    assert _stored(keys, "key_q") == ("active", "decide,admin", ANN, None)
    assert keys.widen(OPS, EVERY, "key_q", "admin", ANN) == KeyChange()  # the same rights, the same holder
    moved = keys.widen(OPS, EVERY, "key_q", "admin", "service:b")  # the same rights, another holder
    assert moved is not None and [_grant(e)[:5] for e in moved.grants] == [
        (2, "key_widened", "key_q", "service:b", "decide,admin")]
    assert _stored(keys, "key_q") == ("active", "decide,admin", "service:b", None)
    assert keys.disable("key_q") == KeyChange()
    with pytest.raises(GateError) as disabled:
        keys.widen(OPS, EVERY, "key_q", "release", ANN)
    assert disabled.value.code == "GOVERNANCE_REQUEST_INVALID"


def test_disabling_a_key_applies_at_once_at_the_clocks_time(keys):
    assert keys.disable("key_none") is None
    keys.create(OPS, EVERY, _row("key_a", "decide,admin"))
    assert keys.disable("key_a") == KeyChange()
    assert _stored(keys, "key_a") == ("disabled", "decide,admin", ANN, NOW)


def test_the_roots_key_service_takes_the_governance_given_or_builds_one_on_the_system_clock(ledger, signing):
    given = GovernanceService(ledger, signing, Clock())
    assert key_service(ledger, signing, Clock(), governance=given).governance is given
    plain = key_service(ledger, signing)
    ledger.insert_api_key(_row("key_p", None, None))
    before = datetime.now(UTC)
    assert plain.disable("key_p") == KeyChange()
    at = datetime.fromisoformat(_stored(plain, "key_p")[3].replace("Z", "+00:00"))
    assert before - timedelta(seconds=1) <= at <= datetime.now(UTC)


def test_the_history_document_is_the_key_chain_with_the_governance_chain(keys, monkeypatch):
    _require_approvals(keys)
    made = keys.create(OPS, EVERY, _row("key_a", "decide,admin"))
    document = keys.history_document(SCOPE)
    assert document == {"api_key_grants_version": "api_key_grants_v1", "scope_hash": scope_hash(SCOPE),
                        "events": list(made.grants), "governance": keys.governance.history(SCOPE)}
    assert [e["seq"] for e in document["governance"]] == [1, 2]
    for key_id in ("key_b", "key_c", "key_d", "key_e"):
        keys.disable("key_a")
        keys.enable(OPS, EVERY, "key_a")
        keys.ledger.insert_api_key(_row(key_id, None, None))
    assert [e["seq"] for e in _chain(keys)] == [1, 2, 3, 4, 5]
    monkeypatch.setattr(keys_module, "HISTORY_LIMIT", 3)
    assert [e["seq"] for e in _chain(keys)] == [3, 4, 5]  # the newest, oldest first


def _stale_heads(keys: KeyService, monkeypatch: pytest.MonkeyPatch, stale: int) -> list[int]:
    """The key chain's head reads as empty `stale` times (another writer took seq 1 meanwhile),
    so each of those appends collides with the stored seq in the ledger, then reads as it is."""
    calls: list[int] = []
    head = keys.store.head

    def reading(scope: str, chain: str) -> dict[str, Any] | None:
        calls.append(len(calls))
        return None if len(calls) <= stale else head(scope, chain)
    monkeypatch.setattr(keys.store, "head", reading)
    return calls


def test_a_lost_race_is_retried_and_eight_are_busy(keys, monkeypatch):
    keys.create(OPS, EVERY, _row("key_a", "decide,admin"))
    calls = _stale_heads(keys, monkeypatch, RETRIES - 1)
    made = keys.create(OPS, EVERY, _row("key_b", "decide,approve"))
    assert len(calls) == RETRIES and [e["seq"] for e in made.grants] == [2]
    calls = _stale_heads(keys, monkeypatch, RETRIES)
    with pytest.raises(GateError) as busy:
        keys.create(OPS, EVERY, _row("key_c", "decide,approve"))
    assert busy.value.code == "LEDGER_UNAVAILABLE" and len(calls) == RETRIES
    assert keys.ledger.api_key("key_c") is None  # the key's row went with its event
    assert [e["seq"] for e in _chain(keys)] == [1, 2]


def test_no_unsigned_grant_where_signing_is_required(ledger):
    unsigned_required = key_service(ledger, SigningSetup(None, None), Clock())
    with pytest.raises(SigningUnavailable):
        unsigned_required.create(OPS, EVERY, _row("key_a", "decide,admin"))
    assert ledger.api_key("key_a") is None
    unsigned = key_service(ledger, SigningSetup(None, None, required=False), Clock())
    made = unsigned.create(OPS, EVERY, _row("key_a", "decide,admin"))
    assert "signature" not in made.grants[0] and "key_id" not in made.grants[0]
    assert _grant(made.grants[0]) == (1, "key_created", "key_a", ANN, "decide,admin", "operator:ops", NOW)


def test_widening_while_approvals_are_required_is_a_request_an_approval_applies(keys):
    _require_approvals(keys)
    keys.create(OPS, EVERY, _row("key_0", "decide,admin"))
    keys.ledger.insert_api_key(_row("key_w", "decide,release"))
    for call in (lambda: keys.widen(APPROVER, frozenset({"approve"}), "key_w", "admin", "service:w"),
                 lambda: keys.create(APPROVER, frozenset({"approve"}), _row("key_x", "decide,admin"))):
        with pytest.raises(GateError) as denied:
            call()
        assert denied.value.code == "KEYS_PERMISSION_DENIED"
    assert keys.ledger.api_key("key_x") is None
    asked = keys.widen(OPS, EVERY, "key_w", "admin", "service:w")
    assert asked is not None and asked.pending and asked.grants == () and asked.governance is not None
    assert asked.governance["weakens"] == ["key_w: release,admin"]  # another holder: all it holds
    assert _stored(keys, "key_w") == ("active", "decide,release", ANN, None)  # as it was until approved
    done = keys.approve(SCOPE, APPROVER, frozenset({"approve"}), asked.governance["seq"])
    assert [_grant(e) for e in done.grants] == [(2, "key_widened", "key_w", "service:w", "decide,release,admin",
                                                 "key_z", NOW)]
    assert _stored(keys, "key_w") == ("active", "decide,release,admin", "service:w", None)


def test_a_grant_that_is_the_scopes_bootstrap_reports_its_governance_event(keys):
    _require_approvals(keys)
    keys.ledger.insert_api_key(_row("key_p", "decide,publish", None))
    widened = keys.widen(OPS, EVERY, "key_p", "admin", ANN)
    assert widened is not None and widened.governance is not None
    assert (widened.governance["action"], widened.governance["seq"], widened.governance["weakens"]) == (
        "policy_set", 2, [])
    assert [_grant(e)[:5] for e in widened.grants] == [(1, "key_widened", "key_p", ANN, "decide,publish,admin")]
    assert keys.disable("key_p") == KeyChange()
    enabled = keys.enable(OPS, EVERY, "key_p")  # no other key acts on production: a bootstrap again
    assert enabled is not None and enabled.governance is not None and enabled.governance["action"] == "policy_set"
    assert [_grant(e)[:3] for e in enabled.grants] == [(2, "key_enabled", "key_p")]


def test_a_grant_over_a_key_read_before_another_change_is_refused_and_writes_nothing(keys, monkeypatch):
    """A widening lands between enable's read of the row and its governance step: the grant is
    refused (409) rather than recording a narrowing of the key that the ledger does not hold."""
    _require_approvals(keys)
    keys.create(OPS, EVERY, _row("key_0", "decide,admin"))
    keys.ledger.insert_api_key(_row("key_a", "decide,release,admin"))
    stale = {**_row("key_a", "decide,release"), "disabled_at": None}  # as read before a widening elsewhere
    monkeypatch.setattr(keys.ledger, "api_key", lambda key_id: dict(stale))
    governance_before, chain_before = len(keys.governance.history(SCOPE)), _chain(keys)
    with pytest.raises(GateError) as refused:
        keys.enable(OPS, EVERY, "key_a")
    assert (refused.value.code, str(refused.value)) == (
        "GOVERNANCE_SETTING_CHANGED", "key_a changed while this grant was asked for: ask again")
    assert len(keys.governance.history(SCOPE)) == governance_before and _chain(keys) == chain_before
    monkeypatch.undo()
    assert _stored(keys, "key_a")[:3] == ("active", "decide,release,admin", ANN)


def test_a_grant_over_a_key_disabled_since_its_read_is_refused(keys, monkeypatch):
    _require_approvals(keys)
    keys.create(OPS, EVERY, _row("key_0", "decide,admin"))
    keys.ledger.insert_api_key(_row("key_b", "decide,release", ANN, "disabled"))
    stale = {**_row("key_b", "decide,release"), "disabled_at": None}  # read active, disabled since
    monkeypatch.setattr(keys.ledger, "api_key", lambda key_id: dict(stale))
    with pytest.raises(GateError) as refused:
        keys.widen(OPS, EVERY, "key_b", "approve", None)
    assert refused.value.code == "GOVERNANCE_SETTING_CHANGED"


def test_a_created_key_is_stored_with_the_status_its_row_states(keys):
    made = keys.create(OPS, EVERY, _row("key_d", "decide,admin", ANN, "disabled"))
    assert [_grant(e)[:3] for e in made.grants] == [(1, "key_created", "key_d")]
    assert _stored(keys, "key_d")[:3] == ("disabled", "decide,admin", ANN)


def test_a_key_row_gone_while_its_grant_is_written_reports_no_grant_and_writes_none(keys, monkeypatch):
    keys.create(OPS, EVERY, _row("key_a", "decide,admin"))
    keys.disable("key_a")
    head = keys.store.head

    def removed_first(scope: str, chain: str) -> dict[str, Any] | None:
        with keys.ledger.write() as connection:  # the key's row is deleted from the ledger meanwhile
            connection.execute(delete(api_keys).where(api_keys.c.key_id == "key_a"))
        return head(scope, chain)
    monkeypatch.setattr(keys.store, "head", removed_first)
    assert keys.enable(OPS, EVERY, "key_a") == KeyChange()
    assert keys.ledger.api_key("key_a") is None
    assert [e["seq"] for e in _chain(keys)] == [1]


def test_a_key_of_no_stated_holder_is_read_as_its_own_holder_when_asked_for_again(keys):
    """A key made before holders (no stated holder) that acts on production is `key:<id>` in the
    keys in force: enabling it again, unchanged, is no stale read and changes nothing."""
    _require_approvals(keys)
    keys.create(OPS, EVERY, _row("key_0", "decide,admin"))
    keys.ledger.insert_api_key(_row("key_l", "decide,release", None))
    before = keys.document(SCOPE)["policy"]["keys"]["key_l"]
    assert before == {"holder": "key:key_l", "permissions": "decide,release"}
    enabled = keys.enable(OPS, EVERY, "key_l")
    assert enabled == KeyChange()  # no grant event, no governance event
    assert _stored(keys, "key_l")[:3] == ("active", "decide,release", None)
