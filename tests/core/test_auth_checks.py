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

import api.auth as auth_module
from api.auth import Authenticator, AuthFailure, presented_key
from gate.keys.apikeys import (
    KEY_PREFIX,
    PERMISSIONS,
    hash_api_key,
    hashes_match,
    new_api_key,
    parse_permissions,
    permissions_text,
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


@pytest.mark.parametrize(("text", "granted"), [
    (None, {"decide"}), ("", {"decide"}), ("  ", {"decide"}), ("decide", {"decide"}),
    ("release, approve", {"decide", "release", "approve"}), ("admin,,resolve ,", {"decide", "admin", "resolve"}),
    ("publish", {"decide", "publish"}),
])
def test_parse_permissions_always_grants_decide_beside_what_it_names(text, granted):
    assert parse_permissions(text) == frozenset(granted)


@pytest.mark.parametrize(("text", "unknown"), [
    ("release,fly,Admin", "Admin, fly"), ("release;approve", "release;approve"), ("release approve", "release approve"),
])
def test_parse_permissions_refuses_any_name_it_does_not_know(text, unknown):
    with pytest.raises(ValueError) as caught:
        parse_permissions(text)
    assert str(caught.value) == (f"unknown permission(s) {unknown}; "
                                 "choose from decide, publish, release, approve, resolve, admin")


def test_permissions_text_lists_them_in_the_fixed_order():
    assert permissions_text(frozenset({"admin", "release", "decide"})) == "decide,release,admin"
    assert permissions_text(frozenset(PERMISSIONS)) == "decide,publish,release,approve,resolve,admin"
    assert permissions_text(frozenset()) == ""


@pytest.mark.parametrize(("stored", "granted"), [
    ("release,approve", {"decide", "release", "approve"}), (None, {"decide"}),
    ("release,teleport", {"decide"}),  # a list this build does not know grants only decide (fail closed)
])
def test_the_caller_holds_the_permissions_its_key_row_stores(stored, granted):
    caller = Authenticator(_Ledger(_row("k", permissions=stored)), PLANS).authenticate(_request(**{"x-api-key": "k"}))
    assert caller.permissions == frozenset(granted)
    unstated = _row("k")
    assert "permissions" not in unstated  # a row from before permissions existed
    assert Authenticator(_Ledger(unstated), PLANS).authenticate(_request(**{"x-api-key": "k"})).permissions == {"decide"}


def test_the_caller_acts_for_the_holder_its_key_row_stores():
    """Issue 52: the holder stored with the key; none on a row from before holders (key:<key_id>)."""
    holder = "person:https://id.example#ann"
    caller = Authenticator(_Ledger(_row("k", holder=holder)), PLANS).authenticate(_request(**{"x-api-key": "k"}))
    assert caller.holder == holder
    unstated = _row("k")
    assert "holder" not in unstated
    assert Authenticator(_Ledger(unstated), PLANS).authenticate(_request(**{"x-api-key": "k"})).holder is None


class _Keys(_Ledger):
    """Several key rows; every lookup recorded, and the clock moved by each read (a slow read)."""

    def __init__(self, rows, clock=None, read_seconds=0.0):
        super().__init__()
        self.rows = {row["key_hash"]: row for row in rows}
        self.clock, self.read_seconds = clock, read_seconds

    def api_key_by_hash(self, key_hash):
        self.looked_up.append(key_hash)
        if self.clock is not None:
            self.clock.now += self.read_seconds
        return self.rows.get(key_hash)


class _Clock:
    def __init__(self, now=100.0):
        self.now = now

    def __call__(self):
        return self.now


def test_without_a_cache_every_request_reads_the_key_and_keeps_nothing():
    clock = _Clock()
    ledger = _Keys([_row("k")])
    authenticator = Authenticator(ledger, PLANS, clock=clock)
    for _ in range(2):
        assert authenticator.authenticate(_request(**{"x-api-key": "k"})).key_id == "key_1"
    assert len(ledger.looked_up) == 2 and authenticator._active == {}


def test_a_cached_key_is_read_again_once_its_time_is_up_counted_from_before_the_read():
    clock = _Clock()
    ledger = _Keys([_row("k")], clock, read_seconds=0.3)
    authenticator = Authenticator(ledger, PLANS, cache_ms=500, clock=clock)
    assert authenticator.cache_seconds == 0.5
    request = _request(**{"x-api-key": "k"})
    first = authenticator.authenticate(request)  # read from 100.0 to 100.3
    for now in (100.3, 100.4999):
        clock.now = now
        assert authenticator.authenticate(request) is first
    assert len(ledger.looked_up) == 1
    clock.now = 100.5  # 0.5 s after the read began: read again
    assert authenticator.authenticate(request) is not first and len(ledger.looked_up) == 2


def test_a_refused_key_is_never_cached():
    clock = _Clock()
    ledger = _Keys([_row("k", status="disabled")])
    authenticator = Authenticator(ledger, PLANS, cache_ms=60_000, clock=clock)
    for _ in range(2):
        _fails(authenticator, _request(**{"x-api-key": "k"}), 403, "the API key is disabled")
        _fails(authenticator, _request(**{"x-api-key": "other"}), 401, "the API key is not valid")
    assert len(ledger.looked_up) == 4 and authenticator._active == {}


def test_a_full_cache_is_emptied_before_the_next_key_is_kept(monkeypatch):
    monkeypatch.setattr(auth_module, "CACHE_ENTRIES", 2)
    keys = ["k1", "k2", "k3"]
    ledger = _Keys([_row(key, key_id=f"key_{key}") for key in keys])
    authenticator = Authenticator(ledger, PLANS, cache_ms=60_000, clock=_Clock())
    for count, key in enumerate(keys[:2], start=1):
        authenticator.authenticate(_request(**{"x-api-key": key}))
        assert len(authenticator._active) == count
    authenticator.authenticate(_request(**{"x-api-key": "k3"}))  # the third: two were kept, the limit
    assert list(authenticator._active) == [hash_api_key("k3")]
    authenticator.authenticate(_request(**{"x-api-key": "k1"}))
    assert len(ledger.looked_up) == 4  # k1 was dropped with the rest and read again
