"""`api.auth` and `gate.keys.apikeys` without a server: every branch of key extraction and lookup.

tests/api/test_auth_edges.py and test_auth_scope.py prove the same rules over HTTP; these pin
each decision exactly (status, the limits resolved, which hash is looked up), fast enough to run
for every mutant of the two modules under `scripts/mutation`.
"""

from __future__ import annotations

import hashlib

import pytest
from flask import Request
from werkzeug.test import EnvironBuilder

from api.auth import Authenticator, AuthFailure, presented_key
from gate.keys.apikeys import (
    KEY_PREFIX,
    hash_api_key,
    hashes_match,
    new_api_key,
    well_formed,
)

PLANS = {"starter": {"rate_limit": 20, "monthly_cap": 10_000}, "growth": {"rate_limit": 120, "monthly_cap": 99}}


def _request(**headers) -> Request:
    return Request(EnvironBuilder(headers=headers).get_environ())


class _Ledger:
    """The one ledger read the authenticator makes, recorded."""

    def __init__(self, row=None):
        self.row = row
        self.looked_up: list[str] = []

    def api_key_by_hash(self, key_hash):
        self.looked_up.append(key_hash)
        return self.row if self.row and self.row["key_hash"] == key_hash else None


def _row(key, **members):
    row = {"key_id": "key_1", "key_hash": hash_api_key(key), "status": "active", "scope": "scope_a",
           "plan": "growth", "rate_limit": None, "monthly_cap": None}
    row.update(members)
    return row


@pytest.mark.parametrize(("headers", "key"), [
    ({"x-api-key": " k1 "}, "k1"),
    ({"X-Api-Key": "k1", "Authorization": "Bearer k2"}, "k1"),
    ({"x-api-key": "", "Authorization": "Bearer k2"}, "k2"),
    ({"Authorization": "bearer  k2 "}, "k2"),
    ({"Authorization": "BEARER k2 k3"}, "k2 k3"),
    ({"Authorization": "Basic k2"}, None),
    ({"Authorization": "Bearer"}, None),
    ({"Authorization": "Bearer   "}, None),
    ({"Authorization": "Bearerk2"}, None),
    ({"Authorization": "k2 Bearer"}, None),
    ({}, None),
])
def test_the_presented_key(headers, key):
    assert presented_key(_request(**headers)) == key


def _fails(authenticator, request, status, message):
    with pytest.raises(AuthFailure) as caught:
        authenticator.authenticate(request)
    assert (caught.value.status, caught.value.message) == (status, message)


def test_no_key_is_401_without_a_lookup():
    ledger = _Ledger()
    _fails(Authenticator(ledger, PLANS), _request(), 401, "an API key is required in x-api-key or Authorization: Bearer")
    _fails(Authenticator(ledger, PLANS), _request(Authorization="Basic abc"), 401,
           "an API key is required in x-api-key or Authorization: Bearer")
    assert ledger.looked_up == []


def test_the_200_character_limit():
    key = "k" * 200
    ledger = _Ledger(_row(key))
    assert Authenticator(ledger, PLANS).authenticate(_request(**{"x-api-key": key})).key_id == "key_1"
    longer = "k" * 201
    ledger = _Ledger(_row(longer))
    _fails(Authenticator(ledger, PLANS), _request(**{"x-api-key": longer}), 401, "the API key is not valid")
    assert ledger.looked_up == []


def test_the_lookup_is_by_the_sha256_of_the_key():
    ledger = _Ledger()
    _fails(Authenticator(ledger, PLANS), _request(**{"x-api-key": "dg_abc"}), 401, "the API key is not valid")
    assert ledger.looked_up == [hashlib.sha256(b"dg_abc").hexdigest()]


def test_a_row_whose_hash_does_not_match_is_refused():
    class Liar(_Ledger):
        def api_key_by_hash(self, key_hash):
            return self.row

    _fails(Authenticator(Liar(_row("other")), PLANS), _request(**{"x-api-key": "mine"}), 401,
           "the API key is not valid")


@pytest.mark.parametrize("status", ["disabled", "revoked", "Active"])
def test_a_key_that_is_not_active_is_403(status):
    _fails(Authenticator(_Ledger(_row("k", status=status)), PLANS), _request(**{"x-api-key": "k"}), 403,
           "the API key is disabled")


def test_the_plan_limits_apply_unless_the_key_has_its_own():
    authenticate = Authenticator(_Ledger(_row("k")), PLANS).authenticate
    caller = authenticate(_request(Authorization="Bearer k"))
    assert (caller.key_id, caller.scope, caller.plan, caller.rate_limit, caller.monthly_cap) == (
        "key_1", "scope_a", "growth", 120, 99)
    own = Authenticator(_Ledger(_row("k", rate_limit=7, monthly_cap=0)), PLANS).authenticate
    caller = own(_request(Authorization="Bearer k"))
    assert (caller.rate_limit, caller.monthly_cap) == (7, 0)


def test_an_unknown_plan_falls_back_to_starter():
    caller = Authenticator(_Ledger(_row("k", plan="gone")), PLANS).authenticate(_request(**{"x-api-key": "k"}))
    assert (caller.plan, caller.rate_limit, caller.monthly_cap) == ("gone", 20, 10_000)


def test_new_keys_are_well_formed_and_stored_only_as_their_hash():
    made = new_api_key()
    assert made.api_key.startswith(KEY_PREFIX) and well_formed(made.api_key) and len(made.api_key) == 46
    assert made.key_hash == hashlib.sha256(made.api_key.encode()).hexdigest()
    assert made.key_id.startswith("key_") and len(made.key_id) == 16
    assert int(made.key_id[4:], 16) >= 0
    assert new_api_key().api_key != made.api_key


@pytest.mark.parametrize(("key", "ok"), [("dg_" + "A" * 43, True), ("dg_" + "a-_9" * 10 + "abc", True),
                                         ("dg_" + "A" * 42, False), ("dg_" + "A" * 44, False),
                                         ("DG_" + "A" * 43, False), ("dg_" + "A" * 42 + "=", False),
                                         ("xdg_" + "A" * 43, False), ("dg_" + "A" * 43 + "\n", False)])
def test_well_formed(key, ok):
    assert well_formed(key) is ok


def test_hashes_match_is_exact():
    assert hashes_match(hash_api_key("k"), "k") is True
    assert hashes_match(hash_api_key("k"), "K") is False
    assert hashes_match(hash_api_key("k").upper(), "k") is False
    assert hash_api_key("é") == hashlib.sha256("é".encode()).hexdigest()
