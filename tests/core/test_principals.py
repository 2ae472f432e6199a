"""gate/principals.py: the principal behind every production or governance action (issue 42)."""

from __future__ import annotations

import pytest

from gate.principals import KINDS, ROLE_PERMISSIONS, ROLES, Principal, permissions_of


def test_each_kind_builds_its_id_and_actor() -> None:
    key = Principal.api_key("key_0a1b2c")
    assert (key.kind, key.id, key.actor) == ("api_key", "key_0a1b2c", "key_0a1b2c")
    op = Principal.operator("alice")
    assert (op.kind, op.id, op.actor) == ("operator", "operator:alice", "operator:alice")
    rail = Principal.guardrail()
    assert (rail.kind, rail.id, rail.actor) == ("guardrail", "guardrail", "guardrail")
    person = Principal.person("https://idp.example", "sub-1", "Alice")
    assert person.id == "https://idp.example#sub-1"
    assert person.actor == "person:https://idp.example#sub-1"
    assert (person.issuer, person.subject, person.display_name) == ("https://idp.example", "sub-1", "Alice")
    clock = Principal.clock()
    assert (clock.kind, clock.id, clock.actor) == ("clock", "clock", "clock")
    assert {p.kind for p in (key, op, rail, person, clock)} == set(KINDS)


def test_json_round_trip_leaves_out_none_members() -> None:
    person = Principal.person("password-file", "bob")
    assert person.to_json() == {"kind": "person", "id": "password-file#bob",
                                "issuer": "password-file", "subject": "bob"}
    assert Principal.from_json(person.to_json()) == person
    named = Principal.person("https://idp.example", "s", "Bob B.")
    assert Principal.from_json(named.to_json()) == named
    for p in (Principal.api_key("key_1"), Principal.operator("root"), Principal.guardrail(), Principal.clock()):
        assert p.to_json() == {"kind": p.kind, "id": p.id}
        assert Principal.from_json(p.to_json()) == p


def test_identity_is_the_id_never_the_display_name() -> None:
    a = Principal.person("https://idp.example", "sub-1", "Alice")
    b = Principal.person("https://idp.example", "sub-2", "Alice")
    assert a != b and a.id != b.id
    assert Principal.person("https://idp.example", "sub-1", "Someone else").id == a.id


@pytest.mark.parametrize("value", [
    None, "key_1", [], {}, {"kind": "api_key"}, {"kind": "nobody", "id": "x"},
    {"kind": "api_key", "id": ""}, {"kind": "api_key", "id": 7},
    {"kind": "api_key", "id": "key_1", "extra": "x"},
    {"kind": "api_key", "id": "key_1", "issuer": "https://idp.example"},
    {"kind": "api_key", "id": "operator:root"}, {"kind": "api_key", "id": "person:x#y"},
    {"kind": "api_key", "id": "guardrail"},
    {"kind": "operator", "id": "root"}, {"kind": "operator", "id": "operator:"},
    {"kind": "guardrail", "id": "key_1"},
    {"kind": "clock", "id": "guardrail"}, {"kind": "api_key", "id": "clock"},
    {"kind": "person", "id": "i#s"}, {"kind": "person", "id": "i#s", "issuer": "i", "subject": "t"},
    {"kind": "person", "id": "i#s", "issuer": "i", "subject": "s", "display_name": ""},
    {"kind": "api_key", "id": "key\n1"}, {"kind": "api_key", "id": "k" * 513},
])
def test_malformed_json_raises_value_error(value: object) -> None:
    with pytest.raises(ValueError):
        Principal.from_json(value)


def test_constructors_refuse_empty_text() -> None:
    for build in (lambda: Principal.api_key(""), lambda: Principal.operator(""),
                  lambda: Principal.person("", "s"), lambda: Principal.person("i", ""),
                  lambda: Principal("nobody", "x")):
        with pytest.raises(ValueError):
            build()


def test_roles_map_to_permissions() -> None:
    assert set(ROLE_PERMISSIONS) == set(ROLES)
    assert permissions_of([]) == frozenset()
    assert permissions_of(["viewer"]) == {"read"}
    assert permissions_of(["author", "approver"]) == {"read", "draft", "dry_run", "export", "approve"}
    assert "release" in permissions_of(["releaser"]) and "release" not in permissions_of(["approver"])
    assert permissions_of(["admin"]) == {"read", "admin"}
    with pytest.raises(ValueError, match="unknown role"):
        permissions_of(["viewer", "owner"])
