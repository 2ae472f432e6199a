"""The `api_keys` safeguard pinned by value (issue 52, defect 3): the value a scope's keys that act
on production have (`KeyGrants`: read, written, checked), what a grant weakens (`grant_weakenings`,
the scope's bootstrap included), the value in force read from the ledger's key rows
(`key_grants_of`), and the governance fold over a value the chain does not hold (`chained`: a
change states the ledger's value; a request is bound to the sequence). The HTTP and command-line
walk: test_key_grant_approval.py. Then the key chain itself (`build_grant_event`, `verify_key_grants`,
`_form_problem`): every member of a sealed grant and each problem the offline check names, a
malformed event resealed so that only its form is wrong."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest

from gate.chain.sealing import SIGNATURE_MEMBERS, seal, signature_payload
from gate.errors import GateError
from gate.governance.table import API_KEYS, SAFEGUARDS
from gate.keys.anchors import TrustAnchors
from gate.keys.signing import Ed25519Key, Ed25519ReceiptSigner
from gate.principals import Principal
from gate.protocol.canonical import canonical_bytes
from gate.releases.governance import GovernanceState, PolicyAction, govern
from gate.releases.key_grants import (
    GRANT_MEMBERS,
    GrantsCheck,
    KeyGrant,
    KeyGrants,
    _form_problem,
    build_grant_event,
    grant_weakenings,
    grants_document,
    key_grants_of,
    verify_key_grants,
)
from gate.releases.model import ReleaseRefused
from gate.releases.policy import ReleasePolicy

ANN = "person:https://id.example#ann"
BOB = "person:https://id.example#bob"
AT, END = "2026-11-26T00:00:00.000Z", "2026-11-26T00:10:00.000Z"
ONE = KeyGrants({"key_a": (ANN, "decide,approve")})


def test_a_value_reads_writes_and_compares_by_its_keys():
    value = KeyGrants({"key_b": (BOB, "decide,admin"), "key_a": (ANN, "decide,approve")})
    assert value.to_json() == {"keys": {"key_a": {"holder": ANN, "permissions": "decide,approve"},
                                        "key_b": {"holder": BOB, "permissions": "decide,admin"}}}
    assert list(value.to_json()["keys"]) == ["key_a", "key_b"]  # sorted by key id
    assert KeyGrants.from_json(value.to_json()) == value
    assert KeyGrants.from_json({"keys": {}}) == KeyGrants() and KeyGrants().to_json() == {"keys": {}}
    own = {"keys": {"key_c": {"holder": "key:key_c", "permissions": "decide,release"}}}
    assert KeyGrants.from_json(own).keys == {"key_c": ("key:key_c", "decide,release")}


@pytest.mark.parametrize("body", [
    None, [], {}, {"keys": []}, {"keys": {}, "more": 1}, {"keys": {"key_a": "x"}},
    {"keys": {"key_a": {"holder": ANN}}}, {"keys": {"key_a": {"holder": ANN, "permissions": "approve", "x": 1}}},
    {"keys": {"key_a": {"holder": "ann", "permissions": "decide,approve"}}},
    {"keys": {"key_a": {"holder": "key:key_b", "permissions": "decide,approve"}}},
    {"keys": {"key_a": {"holder": ANN, "permissions": "decide,fly"}}},
    {"keys": {"key_a": {"holder": ANN, "permissions": 7}}},
    {"keys": {"key_a": {"holder": ANN, "permissions": "decide,publish"}}},  # acts on no production right
    {"keys": {"key_a": {"holder": ANN, "permissions": "approve"}}},  # not the stored form
    {"keys": {"key_a": {"holder": ANN, "permissions": "decide,admin,approve"}}},  # not in the vocabulary's order
])
def test_a_malformed_value_is_refused_with_the_governance_code(body):
    with pytest.raises(GateError) as refused:
        KeyGrants.from_json(body)
    assert refused.value.code == "GOVERNANCE_REQUEST_INVALID"


def test_a_grant_states_its_holder_and_its_stored_permissions():
    assert ONE.with_key("key_b", BOB, "admin").keys == {"key_a": (ANN, "decide,approve"),
                                                        "key_b": (BOB, "decide,admin")}
    assert ONE.with_key("key_a", None, "approve,release").keys == {"key_a": ("key:key_a", "decide,release,approve")}
    assert ONE.without("key_a") == KeyGrants() and ONE.without("key_z") == ONE
    assert ONE.keys == {"key_a": (ANN, "decide,approve")}  # unchanged: values are new


def test_what_a_grant_weakens():
    assert grant_weakenings(KeyGrants(), ONE) == ()  # the scope's bootstrap
    assert grant_weakenings(KeyGrants(), ONE.with_key("key_b", BOB, "admin")) == ()
    assert grant_weakenings(ONE, ONE.with_key("key_b", BOB, "admin,release")) == ("key_b: release,admin",)
    assert grant_weakenings(ONE, ONE.with_key("key_a", ANN, "approve,admin")) == ("key_a: admin",)  # widened
    assert grant_weakenings(ONE, ONE.with_key("key_a", BOB, "approve")) == ("key_a: approve",)  # another holder
    assert grant_weakenings(ONE, ONE) == () and grant_weakenings(ONE, KeyGrants({})) == ()
    assert grant_weakenings(ONE.with_key("key_b", BOB, "admin"), ONE) == ()  # a key removed
    narrowed = KeyGrants({"key_a": (ANN, "decide,approve,admin")})
    assert grant_weakenings(narrowed, ONE) == ()
    two = ONE.with_key("key_c", ANN, "resolve").with_key("key_b", BOB, "release")
    assert grant_weakenings(ONE, two) == ("key_b: release", "key_c: resolve")  # by key id


def test_the_value_in_force_is_the_scopes_active_keys_that_act_on_production():
    rows = [{"key_id": "key_a", "scope": "s", "status": "active", "permissions": "decide,approve", "holder": ANN},
            {"key_id": "key_b", "scope": "s", "status": "active", "permissions": "admin", "holder": None},
            {"key_id": "key_c", "scope": "s", "status": "disabled", "permissions": "decide,admin", "holder": BOB},
            {"key_id": "key_d", "scope": "s", "status": "pending", "permissions": "decide,admin", "holder": BOB},
            {"key_id": "key_e", "scope": "t", "status": "active", "permissions": "decide,admin", "holder": BOB},
            {"key_id": "key_f", "scope": "s", "status": "active", "permissions": None, "holder": None},
            {"key_id": "key_g", "scope": "s", "status": "active", "permissions": "decide,publish", "holder": None},
            {"key_id": "key_h", "scope": "s", "status": "active", "permissions": "decide,fly", "holder": None}]
    assert key_grants_of(rows, "s").keys == {"key_a": (ANN, "decide,approve"),
                                              "key_b": ("key:key_b", "decide,admin")}
    assert key_grants_of(rows, "u") == KeyGrants()


def _action(kind, before, after, principal, **more):
    return PolicyAction(kind, principal, AT, before, after, setting=API_KEYS, approvals_required=True, **more)


def test_the_fold_takes_the_value_a_change_read_and_binds_a_request_to_the_sequence():
    assert SAFEGUARDS[API_KEYS].chained is False and SAFEGUARDS["hold_policy"].chained is True
    operator, bob = Principal.operator("ops"), Principal.api_key("key_a", BOB)
    state = replace(govern(GovernanceState(), PolicyAction("policy_set", operator, AT, ReleasePolicy(),
                                                           ReleasePolicy(require_approval=True)), 1), seq=1)
    wider = ONE.with_key("key_b", ANN, "admin")
    with pytest.raises(ReleaseRefused) as refused:
        govern(state, _action("policy_set", ONE, wider, operator), 2, SAFEGUARDS)
    assert refused.value.code == "GOVERNANCE_APPROVAL_REQUIRED"
    asked = replace(govern(state, _action("policy_request", ONE, wider, operator, expires_at=END), 2, SAFEGUARDS),
                    seq=2)
    assert asked.pending[0].weakens == ("key_b: admin",) and asked.pending[0].requested_by == "operator:ops"
    # a key disabled meanwhile (no governance event): the change states another value in force, and
    # the request, made over the old one, is stale
    other = KeyGrants()
    assert govern(asked, _action("policy_set", other, other, operator), 3, SAFEGUARDS).value(API_KEYS) == other
    with pytest.raises(ReleaseRefused) as stale:
        govern(asked, _action("policy_approve", other, wider, bob, request_seq=2), 3, SAFEGUARDS)
    assert stale.value.code == "GOVERNANCE_SETTING_CHANGED"
    twin = Principal.api_key("key_x", "operator:ops")  # another key of the requester's holder
    with pytest.raises(ReleaseRefused) as own:
        govern(asked, _action("policy_approve", ONE, wider, twin, request_seq=2), 3, SAFEGUARDS)
    assert own.value.code == "GOVERNANCE_SELF_APPROVAL"
    done = govern(asked, _action("policy_approve", ONE, wider, bob, request_seq=2), 3, SAFEGUARDS)
    assert (done.value(API_KEYS), done.pending, done.applied[API_KEYS]) == (wider, (), 3)


# -- the key chain itself: its sealed events and their offline check (gate verify) ---------------

KEY = Ed25519Key.from_seed(b"\x05" * 32)
SIGNER = Ed25519ReceiptSigner(KEY)
ANCHORS = TrustAnchors.from_public_key_pem(KEY.public_key_pem, key_id=KEY.key_id)
SCOPE_HASH = "c" * 64
LATER = "2026-11-26T00:05:00.000Z"
REMOVED = object()
HOLDER_FORM = "a holder is person:<issuer>#<subject>, service:<name> or operator:<login>"


def _chain() -> list[dict]:
    """Two signed grants: key_a created for ANN by the operator, then widened by a key of BOB."""
    first = build_grant_event(KeyGrant("key_created", "key_a", ANN, "decide,approve", Principal.operator("ops"), AT),
                              scope_hash=SCOPE_HASH, seq=1, previous_event_hash=None, signer=SIGNER)
    second = build_grant_event(KeyGrant("key_widened", "key_a", "key:key_a", "decide,approve,admin",
                                        Principal.api_key("key_b", BOB), LATER),
                               scope_hash=SCOPE_HASH, seq=2, previous_event_hash=first["event_hash"], signer=SIGNER)
    return [first, second]


def _document(events) -> dict:
    return grants_document(SCOPE_HASH, events)


def _resealed(event: dict, **changes) -> dict:
    """`event` with `changes` (REMOVED drops a member), hashed and signed again: only its form is wrong."""
    changed = {k: v for k, v in {**event, **changes}.items() if k not in SIGNATURE_MEMBERS and v is not REMOVED}
    seal(changed, SIGNER)
    return changed


def _failed(events: int, problem: str, *grants: dict) -> GrantsCheck:
    """What a key chain that fails on `problem` reports, checked with ANCHORS: the grants before it."""
    return GrantsCheck(valid=False, signatures_checked=True, events=events, problems=(problem,), grants=grants)


def _listed(event: dict) -> dict:
    return {name: event[name] for name in ("seq", "action", "api_key_id", "holder", "permissions", "actor",
                                           "created_at")}


def test_a_grant_event_states_every_member_hashed_and_signed():
    first, second = _chain()
    body = {k: v for k, v in first.items() if k not in SIGNATURE_MEMBERS}
    assert body == {"api_key_grant_event_version": "api_key_grant_event_v1", "scope_hash": SCOPE_HASH, "seq": 1,
                    "previous_event_hash": None, "action": "key_created", "api_key_id": "key_a", "holder": ANN,
                    "permissions": "decide,approve", "principal": {"kind": "operator", "id": "operator:ops"},
                    "actor": "operator:ops", "created_at": AT}
    assert list(body) == list(GRANT_MEMBERS)
    assert first["event_hash"] == hashlib.sha256(canonical_bytes(body)).hexdigest()
    assert (first["key_id"], first["signature_algorithm"], first["public_key_fingerprint"]) == (
        KEY.key_id, "ed25519", KEY.fingerprint)
    assert first["signature"] == SIGNER.sign_payload(signature_payload(first["event_hash"], KEY.key_id))
    assert (second["previous_event_hash"], second["seq"], second["actor"], second["created_at"]) == (
        first["event_hash"], 2, "key_b", LATER)
    assert second["principal"] == {"kind": "api_key", "id": "key_b", "holder": BOB}
    unsigned = build_grant_event(KeyGrant("key_enabled", "key_c", "key:key_c", "decide,resolve",
                                          Principal.operator("ops"), AT),
                                 scope_hash=SCOPE_HASH, seq=3, previous_event_hash="p" * 64, signer=None)
    assert set(unsigned) == set(GRANT_MEMBERS) | {"event_hash"} and unsigned["action"] == "key_enabled"
    assert unsigned["event_hash"] == hashlib.sha256(canonical_bytes(
        {k: v for k, v in unsigned.items() if k != "event_hash"})).hexdigest()


def test_a_grant_of_an_unknown_action_is_not_built():
    for action in ("key_disabled", "", "KEY_CREATED"):
        with pytest.raises(ValueError) as refused:
            build_grant_event(KeyGrant(action, "key_a", ANN, "decide,approve", Principal.operator("ops"), AT),
                              scope_hash=SCOPE_HASH, seq=1, previous_event_hash=None, signer=SIGNER)
        assert str(refused.value) == f"unknown key grant action {action!r}"


def test_a_whole_key_chain_verifies_and_lists_each_grant():
    events = _chain()
    check = verify_key_grants(_document(events), ANCHORS)
    assert check == GrantsCheck(valid=True, signatures_checked=True, events=2,
                                grants=(_listed(events[0]), _listed(events[1])))
    assert check.verified and check.problem is None
    assert check.grants[1] == {"seq": 2, "action": "key_widened", "api_key_id": "key_a", "holder": "key:key_a",
                               "permissions": "decide,approve,admin", "actor": "key_b", "created_at": LATER}
    assert verify_key_grants(_document(events), None) == replace(check, signatures_checked=False)  # hashes, links
    assert verify_key_grants(_document(events), TrustAnchors()) == replace(  # no trusted key: no signature holds
        _failed(2, "grant event 1: signature has no trusted key"), signatures_checked=False)
    assert verify_key_grants(_document([]), ANCHORS) == GrantsCheck(valid=True, signatures_checked=True, events=0)
    assert check.to_json() == {"verified": True, "valid": True, "signatures_checked": True, "events": 2,
                               "problems": [], "grants": list(check.grants)}
    failed = _failed(1, "grant event 1: x")
    assert failed.to_json() == {"verified": False, "valid": False, "signatures_checked": True, "events": 1,
                                "problems": ["grant event 1: x"], "grants": []}
    assert _document(events) == {"api_key_grants_version": "api_key_grants_v1", "scope_hash": SCOPE_HASH,
                                 "events": events, "governance": []}
    assert grants_document(SCOPE_HASH, (), ({"seq": 1},))["governance"] == [{"seq": 1}]


@pytest.mark.parametrize("document", [
    None, [], "api_key_grants_v1", {"events": []}, {"api_key_grants_version": "api_key_grants_v2", "events": []},
    {"api_key_grants_version": "api_key_grants_v1", "events": {}},
    {"api_key_grants_version": "api_key_grants_v1"},
])
def test_what_is_not_a_key_chain_document_is_named(document):
    assert verify_key_grants(document, ANCHORS) == _failed(0, "not an api_key_grants_v1 document with an events array")
    assert verify_key_grants(document, None) == replace(_failed(0, "not an api_key_grants_v1 document with an events "
                                                                   "array"), signatures_checked=False)


def test_the_first_bad_event_is_named_with_its_place_and_the_grants_before_it():
    first, second = _chain()
    assert verify_key_grants(_document([first, "x"]), ANCHORS) == _failed(2, "grant event 2: not a JSON object",
                                                                          _listed(first))
    assert verify_key_grants(_document([first, second, [1]]), ANCHORS) == _failed(
        3, "grant event 3: not a JSON object", _listed(first), _listed(second))
    assert verify_key_grants(_document([second]), ANCHORS) == _failed(
        1, "grant event 1: seq 2, expected 1 (gap or reorder)")
    assert verify_key_grants(_document([first, first]), ANCHORS).problem == \
        "grant event 2: seq 1, expected 2 (gap or reorder)"
    unlinked = _resealed(second, previous_event_hash="0" * 64)
    assert verify_key_grants(_document([first, unlinked]), ANCHORS) == _failed(
        2, "grant event 2: previous_event_hash does not link to the event before it", _listed(first))
    other_scope = grants_document("d" * 64, [first, second])
    assert verify_key_grants(other_scope, ANCHORS).problem == "grant event 1: belongs to another scope"
    edited = {**second, "permissions": "decide,admin"}
    assert verify_key_grants(_document([first, edited]), None).problem == \
        "grant event 2: event_hash does not match its content (tampered)"


def test_a_signature_is_checked_only_against_the_anchors_given():
    first, second = _chain()
    forged = {**second, "signature": first["signature"]}
    assert verify_key_grants(_document([first, forged]), ANCHORS) == _failed(2, "grant event 2: signature fails",
                                                                             _listed(first))
    unkeyed = verify_key_grants(_document([first, forged]), None)  # hashes and links only
    assert unkeyed.valid is True and unkeyed.signatures_checked is False and unkeyed.verified is False
    other = TrustAnchors.from_public_key_pem(Ed25519Key.from_seed(b"\x06" * 32).public_key_pem)
    assert verify_key_grants(_document([first, second]), other).problem == \
        "grant event 1: signature has no trusted key"


@pytest.mark.parametrize(("changes", "problem"), [
    ({"extra": 1}, "members differ from api_key_grant_event_v1's"),
    ({"holder": REMOVED}, "members differ from api_key_grant_event_v1's"),
    ({"api_key_grant_event_version": "api_key_grant_event_v2"},
     "api_key_grant_event_version must be api_key_grant_event_v1"),
    ({"action": "key_disabled"}, "unknown action 'key_disabled'"),
    ({"api_key_id": 7}, "api_key_id and permissions must be text"),
    ({"permissions": ["decide"]}, "api_key_id and permissions must be text"),
    ({"holder": "ann"}, f"holder or principal is malformed ({HOLDER_FORM})"),
    ({"holder": "key:key_b"}, f"holder or principal is malformed ({HOLDER_FORM})"),
    ({"principal": [1]}, "holder or principal is malformed (a principal must be a JSON object)"),
    ({"actor": "key_z"}, "actor is not its principal's"),
])
def test_each_malformed_grant_event_is_named_even_resealed(changes, problem):
    first, second = _chain()
    bad = _resealed(second, **changes)
    assert verify_key_grants(_document([first, bad]), ANCHORS) == _failed(2, f"grant event 2: {problem}",
                                                                          _listed(first))
    assert _form_problem(bad, "here") == f"here: {problem}"


def test_a_well_formed_grant_event_has_no_form_problem():
    first, second = _chain()
    assert _form_problem(first, "x") is None and _form_problem(second, "x") is None
    own = _resealed(second, holder="key:key_a")  # a key of no stated holder: not parsed as one
    assert _form_problem(own, "x") is None
    assert _form_problem({**first, 1: "x"}, "x") == "x: members differ from api_key_grant_event_v1's"
