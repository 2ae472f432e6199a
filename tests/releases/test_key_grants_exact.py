"""The `api_keys` safeguard pinned by value (issue 52, defect 3): the value a scope's keys that act
on production have (`KeyGrants`: read, written, checked), what a grant weakens (`grant_weakenings`,
the scope's bootstrap included), the value in force read from the ledger's key rows
(`key_grants_of`), and the governance fold over a value the chain does not hold (`chained`: a
change states the ledger's value; a request is bound to the sequence). The HTTP and command-line
walk: test_key_grant_approval.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gate.errors import GateError
from gate.governance.table import API_KEYS, SAFEGUARDS
from gate.principals import Principal
from gate.releases.governance import GovernanceState, PolicyAction, govern
from gate.releases.key_grants import KeyGrants, grant_weakenings, key_grants_of
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
