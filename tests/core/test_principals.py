"""gate/principals.py: the principal behind every production or governance action (issue 42)."""

from __future__ import annotations

import pytest

from gate.principals import (
    KINDS,
    ROLE_PERMISSIONS,
    ROLES,
    Principal,
    holder_id,
    is_distinct_approver,
    is_member,
    parse_holder,
    permissions_of,
)


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
    ci = Principal.ci("acme/policies", "refs/heads/main")
    assert (ci.kind, ci.id, ci.actor) == ("ci", "ci:acme/policies@refs/heads/main", "ci:acme/policies@refs/heads/main")
    assert {p.kind for p in (key, op, rail, person, clock, ci)} == set(KINDS)


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


TEXT = "must be a non-empty string of at most 512 characters"


@pytest.mark.parametrize(("build", "message"), [
    (lambda: Principal.api_key(""), f"a principal's key id {TEXT}"),
    (lambda: Principal.api_key("k" * 513), f"a principal's key id {TEXT}"),
    (lambda: Principal.api_key("key\t1"), "a principal's key id must be printable text"),
    (lambda: Principal.operator(""), f"a principal's login {TEXT}"),
    (lambda: Principal.operator("ro\not"), "a principal's login must be printable text"),
    (lambda: Principal.person("", "s"), f"a principal's issuer {TEXT}"),
    (lambda: Principal.person("i", 5), f"a principal's subject {TEXT}"),  # type: ignore[arg-type]
    (lambda: Principal.person("i", "s", ""), f"a principal's display name {TEXT}"),
    (lambda: Principal("nobody", "x"), "a principal's kind must be one of api_key, person, operator, guardrail, clock, ci"),
    (lambda: Principal("api_key", ""), f"a principal's id {TEXT}"),
    (lambda: Principal("person", "i#s", None, "s"), f"a principal's issuer {TEXT}"),
    (lambda: Principal("person", "i#s", "i", None), f"a principal's subject {TEXT}"),
    (lambda: Principal("person", "i#s", "i", "s", ""), f"a principal's display name {TEXT}"),
    (lambda: Principal("person", "i#t", "i", "s"), "a person's id must be <issuer>#<subject>"),
    (lambda: Principal("api_key", "k", "i"), "only a person carries an issuer, a subject and a display name"),
    (lambda: Principal("guardrail", "guardrail", None, "s"),
     "only a person carries an issuer, a subject and a display name"),
    (lambda: Principal("operator", "operator:x", None, None, "X"),
     "only a person carries an issuer, a subject and a display name"),
    (lambda: Principal("operator", "root"), "an operator's id must be operator:<login>"),
    (lambda: Principal("operator", "operator:"), "an operator's id must be operator:<login>"),
    (lambda: Principal("guardrail", "guardrails"), "the guardrail's id is 'guardrail'"),
    (lambda: Principal("api_key", "operator:x"), "an API key id cannot look like an operator, a person, a CI run, the guardrail or the clock"),
    (lambda: Principal("api_key", "person:x"), "an API key id cannot look like an operator, a person, a CI run, the guardrail or the clock"),
    (lambda: Principal("api_key", "guardrail"), "an API key id cannot look like an operator, a person, a CI run, the guardrail or the clock"),
    (lambda: Principal("api_key", "ci:a/b@main"), "an API key id cannot look like an operator, a person, a CI run, the guardrail or the clock"),
    (lambda: Principal.ci("acme", "refs/heads/main"), "a CI repository is owner/name (ASCII letters, digits, '-', '_', '.', '/')"),
    (lambda: Principal.ci("acme/pol icies", "main"), "a CI repository is owner/name (ASCII letters, digits, '-', '_', '.', '/')"),
    (lambda: Principal.ci("acme/p@x", "main"), "a CI repository is owner/name (ASCII letters, digits, '-', '_', '.', '/')"),
    (lambda: Principal.ci("acme/policies", "refs/heads/ main"), "a CI ref has no spaces"),
    (lambda: Principal.ci("acme/policies", ""), f"a principal's CI ref {TEXT}"),
    (lambda: Principal.ci(None, "main"), f"a principal's CI repository {TEXT}"),  # type: ignore[arg-type]
    (lambda: Principal("ci", "acme/policies@main"), "a CI principal's id must be ci:<repository>@<ref>"),
    (lambda: Principal("ci", "ci:acme/policies@main", holder="service:x"),
     "only an API key states a holder (any other principal is its own)"),
])
def test_each_refusal_names_the_member_at_fault(build, message):
    with pytest.raises(ValueError) as refused:
        build()
    assert str(refused.value) == message


def test_the_members_each_kind_allows():
    assert Principal("operator", "operator:x").actor == "operator:x"
    assert Principal("api_key", "operators:x").id == "operators:x"  # only the exact prefixes are reserved
    assert Principal("api_key", "guardrail-2").id == "guardrail-2"
    assert Principal("person", "i#s", "i", "s").display_name is None
    assert Principal.person("i", "s", None).to_json() == {"kind": "person", "id": "i#s", "issuer": "i", "subject": "s"}
    assert Principal.person("i", "s", "x" * 512).display_name == "x" * 512
    assert Principal.api_key("k" * 512).id == "k" * 512
    assert Principal.guardrail() == Principal("guardrail", "guardrail")


@pytest.mark.parametrize(("value", "message"), [
    ([], "a principal must be a JSON object"),
    ({"kind": "api_key", "id": "k", "b": 1, "a": 2}, "a principal has unknown members: a, b"),
    ({"kind": "robot", "id": "k"}, "a principal's kind must be one of api_key, person, operator, guardrail, clock, ci"),
    ({"id": "k"}, "a principal's kind must be one of api_key, person, operator, guardrail, clock, ci"),
])
def test_malformed_json_says_what_is_wrong(value, message):
    with pytest.raises(ValueError) as refused:
        Principal.from_json(value)
    assert str(refused.value) == message


def test_unknown_roles_are_named():
    with pytest.raises(ValueError) as refused:
        permissions_of(["viewer", "owner"])
    assert str(refused.value) == "unknown role 'owner': one of viewer, author, releaser, approver, reviewer, admin"
    assert permissions_of(iter(["reviewer", "releaser"])) == {"read", "resolve", "publish", "release"}


# --------------------------------------------------------------------------- holders (issue 52)

ANN = "person:https://id.example#ann"


def test_a_key_states_its_holder_signed_in_its_json_and_every_principal_has_one() -> None:
    key = Principal.api_key("key_0a1b2c", ANN)
    assert (key.holder, key.holder_id, key.actor) == (ANN, ANN, "key_0a1b2c")
    assert key.to_json() == {"kind": "api_key", "id": "key_0a1b2c", "holder": ANN}
    assert Principal.from_json(key.to_json()) == key
    bare = Principal.api_key("key_0a1b2c")
    assert (bare.holder, bare.holder_id, bare.to_json()) == (None, "key:key_0a1b2c", {"kind": "api_key", "id": "key_0a1b2c"})
    assert key != bare  # the holder is part of who acted
    person = Principal.person("https://id.example", "ann")
    assert person.holder_id == ANN == key.holder_id  # Ann in the workbench and Ann's key: one holder
    assert Principal.operator("ops").holder_id == "operator:ops"
    assert (Principal.guardrail().holder_id, Principal.clock().holder_id) == ("guardrail", "clock")
    assert Principal.api_key("key_1", "service:crm").holder_id == "service:crm"
    assert Principal.api_key("key_1", "operator:ops").holder_id == Principal.operator("ops").holder_id


@pytest.mark.parametrize("holder", [ANN, "person:a#b", "person:a#b#c", "person:a#b#", "service:crm", "service:x", "operator:o",
                                    "service:" + "x" * 504])
def test_a_holder_is_a_person_a_service_or_the_operator(holder: str) -> None:
    assert parse_holder(holder) == holder


@pytest.mark.parametrize("holder", ["", "ann", "person:", "person:ann", "person:#ann", "person:ann#", "person:#a#b", "service:",
                                    "operator:", "key:key_1", "guardrail", "clock", "Service:crm", " service:crm",
                                    "service:a\nb", "service:" + "x" * 505, None, 7])
def test_anything_else_is_no_holder(holder: object) -> None:
    with pytest.raises(ValueError):
        parse_holder(holder)


def test_the_holder_refusals_say_what_a_holder_is() -> None:
    with pytest.raises(ValueError) as shape:
        parse_holder("ann")
    assert str(shape.value) == "a holder is person:<issuer>#<subject>, service:<name> or operator:<login>"
    with pytest.raises(ValueError) as text:
        parse_holder("")
    assert str(text.value) == "a principal's holder must be a non-empty string of at most 512 characters"
    with pytest.raises(ValueError) as other:
        Principal.from_json({"kind": "operator", "id": "operator:ops", "holder": ANN})
    assert str(other.value) == "only an API key states a holder (any other principal is its own)"
    with pytest.raises(ValueError) as bad:
        Principal.from_json({"kind": "api_key", "id": "key_1", "holder": "key:key_2"})
    assert str(bad.value) == "a holder is person:<issuer>#<subject>, service:<name> or operator:<login>"
    with pytest.raises(ValueError):
        Principal.api_key("key_1", "ann")
    for build in (lambda: Principal("person", "a#b", "a", "b", None, ANN), lambda: Principal("clock", "clock", holder=ANN),
                  lambda: Principal("guardrail", "guardrail", holder=ANN)):
        with pytest.raises(ValueError):
            build()


def test_the_holder_of_an_actor_string() -> None:
    assert holder_id("key_1") == "key:key_1"
    assert holder_id("key_1", None) == "key:key_1"
    assert holder_id("key_1", ANN) == ANN
    assert holder_id("operator:ops") == "operator:ops"
    assert holder_id(f"person:{ANN[len('person:'):]}") == ANN
    assert holder_id("guardrail") == "guardrail" and holder_id("clock") == "clock"
    assert holder_id("operator:ops", "service:x") == "service:x"  # a stated holder always wins
    assert holder_id("guardrails") == "key:guardrails" and holder_id("clocks") == "key:clocks"


def test_a_ci_run_is_its_own_holder_and_never_a_distinct_approver() -> None:
    main, other = Principal.ci("acme/policies", "refs/heads/main"), Principal.ci("acme/other", "refs/heads/main")
    assert Principal.from_json(main.to_json()) == main and main.to_json() == {"kind": "ci", "id": main.id}
    assert main.holder_id == main.actor and holder_id(main.actor) == "ci:acme/policies@refs/heads/main"
    assert is_distinct_approver(main.holder_id, []) is False  # whoever asked: never the second principal
    assert is_distinct_approver(other.holder_id, [main.holder_id]) is False  # two CI runs never make two
    assert is_distinct_approver(main.holder_id, [ANN]) is False
    assert is_distinct_approver(ANN, [main.holder_id]) is True  # a person approves a CI run's request


def test_one_rule_says_who_is_a_distinct_approver() -> None:
    assert is_distinct_approver(ANN, []) is True
    assert is_distinct_approver(ANN, [None]) is True
    assert is_distinct_approver(ANN, ["service:crm", None, "key:key_1"]) is True
    assert is_distinct_approver(ANN, ["service:crm", ANN]) is False
    assert is_distinct_approver(ANN, [ANN, "service:crm"]) is False
    assert is_distinct_approver("key:key_1", ("key:key_2",)) is True
    assert is_distinct_approver("key:key_1", iter(["key:key_1"])) is False


def test_a_quorum_all_lists_a_member_by_its_holder_or_by_its_own_id():
    ann_key = Principal.api_key("key_a", "person:https://id.example#ann")
    ann = Principal.person("https://id.example", "ann")
    plain = Principal.api_key("key_p")
    assert is_member(ann_key, ["person:https://id.example#ann"]) is True  # any key of a listed holder
    assert is_member(ann, ["person:https://id.example#ann"]) is True  # the person signed in
    assert is_member(ann, ["https://id.example#ann"]) is True  # her principal id, as before
    assert is_member(ann_key, ["key_a"]) is True  # a key id, as before
    assert is_member(ann_key, ["key_b", "https://id.example#ann", "person:https://id.example#bob"]) is False
    assert is_member(plain, ["key:key_p"]) is True and is_member(plain, ["key_p"]) is True
    assert is_member(plain, []) is False
    assert is_member(Principal.operator("ops"), ("operator:ops",)) is True
