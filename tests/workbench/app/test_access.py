"""Access policy of the workbench: loopback without sign-in (the local operator, every role);
anywhere else only with sign-in and a grants file giving each person roles per scope."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gate.principals import ROLES, Principal
from workbench.app.access import AccessConfigError, Identity, Rights, access_for, is_loopback
from workbench.app.passwords import hash_password

HASH = hash_password("s3cret-pass")


@pytest.mark.parametrize("address, loopback", [
    ("127.0.0.1", True), ("127.8.9.1", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("10.0.0.5", False), ("example.org", False), ("", False),
    ("X::1", False), ("[::1]X", False),
])
def test_loopback_detection(address, loopback):
    assert is_loopback(address) is loopback


def test_loopback_serves_every_scope_without_sign_in():
    access = access_for("127.0.0.1", None, None)
    assert not access.authenticated
    operator = Identity.local_operator("ops")
    assert operator.principal == Principal.operator("ops") and operator.operator
    assert access.scopes_for(operator, ["a", "b"]) == ["a", "b"]
    assert access.roles_in(operator, "a") == frozenset(ROLES)
    assert access.scopes_for(None, ["a", "b"]) == []  # nobody: nothing (fail closed)


def test_the_loopback_operator_is_the_real_user_ids_login_not_an_environment_variable(monkeypatch):
    import os
    import pwd

    monkeypatch.setenv("LOGNAME", "someone-else")
    monkeypatch.setenv("USER", "someone-else")
    login = pwd.getpwuid(os.getuid()).pw_name
    assert Identity.local_operator().principal == Principal.operator(login)


@pytest.mark.parametrize("address", ["0.0.0.0", "10.1.2.3", "::"])
def test_any_other_address_refuses_without_authentication(address):
    with pytest.raises(AccessConfigError, match="without authentication"):
        access_for(address, None, None)


def _write(path, value):
    path.write_text(json.dumps(value))
    return path


def test_authentication_needs_grants(tmp_path):
    users = _write(tmp_path / "users.json", {"ana": HASH})
    with pytest.raises(AccessConfigError, match="--grants"):
        access_for("0.0.0.0", users, None)
    with pytest.raises(AccessConfigError, match="--grants needs sign-in"):
        access_for("127.0.0.1", None, _write(tmp_path / "g.json", {"ana": ["a"]}))


def test_the_older_grants_form_grants_viewers_only(tmp_path):
    users = _write(tmp_path / "users.json", {"ana": HASH, "bo": HASH, "root": HASH})
    grants = _write(tmp_path / "grants.json", {"ana": ["acme"], "root": ["*"]})
    access = access_for("0.0.0.0", users, grants)
    assert access.authenticated
    known = ["acme", "globex", "initech"]
    ana, root, bo = (Identity.password_user(name) for name in ("ana", "root", "bo"))
    assert access.scopes_for(ana, known) == ["acme"]
    assert access.scopes_for(root, known) == known
    assert access.scopes_for(bo, known) == []  # no grant: nothing
    assert access.scopes_for(None, known) == []
    # SECURITY: a scope one could only *see* grants no release right any more (issue 42, finding 3).
    assert access.permissions_in(root, "acme") == frozenset({"read"})
    assert access.permissions_in(ana, "globex") == frozenset()


def test_roles_per_scope_come_from_the_user_and_from_each_group(tmp_path):
    users = _write(tmp_path / "users.json", {"ana": HASH})
    grants = _write(tmp_path / "grants.json", {
        "users": {"ana": {"acme": ["author", "releaser"]}},
        "groups": {"gate-approvers": {"*": ["approver"]}, "globex-admins": {"globex": ["admin"]}}})
    access = access_for("0.0.0.0", users, grants)
    ana = Identity.password_user("ana")
    assert access.roles_in(ana, "acme") == {"author", "releaser"}
    assert access.permissions_in(ana, "acme") == {"read", "draft", "dry_run", "export", "publish", "release"}
    assert access.scopes_for(ana, ["acme", "globex"]) == ["acme"]
    bob = Identity(Principal.person("https://id.example", "bob-sub", "Bob"), ("gate-approvers", "globex-admins"))
    assert access.roles_in(bob, "acme") == {"approver"}
    assert access.roles_in(bob, "globex") == {"approver", "admin"}
    assert "release" not in access.permissions_in(bob, "globex")
    # A user entry is by issuer and subject: another issuer's "ana" is someone else (issue 64), and
    # a group nobody vouched for grants nothing.
    assert access.roles_in(Identity(Principal.person("https://id.example", "carol")), "acme") == frozenset()
    assert access.roles_in(Identity(Principal.person("https://evil.example", "ana")), "acme") == frozenset()


def test_a_grants_file_s_issuer_is_the_one_people_sign_in_with(tmp_path):
    """Issue 64: a grants file stating its issuer matches people of that issuer only; the workbench
    refuses at start one whose issuer is not the one it signs people in with."""
    users = _write(tmp_path / "users.json", {"ana": HASH})
    stated = _write(tmp_path / "grants.json", {"issuer": "password-file", "users": {"ana": {"acme": ["author"]}}})
    access = access_for("0.0.0.0", users, stated)
    assert access.roles_in(Identity.password_user("ana"), "acme") == {"author"}
    assert access.roles_in(Identity(Principal.person("https://idp.example", "ana")), "acme") == frozenset()
    other = _write(tmp_path / "other.json", {"issuer": "https://idp.example", "users": {"ana": {"acme": ["author"]}}})
    with pytest.raises(AccessConfigError) as refused:
        access_for("0.0.0.0", users, other)
    assert str(refused.value) == (f"grants file {other}: its issuer 'https://idp.example' is not the issuer people "
                                  "sign in with here ('password-file'): its users would match nobody")
    for bad in ({"issuer": 7, "users": {}}, {"issuer": "bad\nissuer", "users": {}}):
        with pytest.raises(AccessConfigError, match="'issuer' must be the issuer's text"):
            access_for("0.0.0.0", users, _write(tmp_path / "bad.json", bad))
    slack = _write(tmp_path / "slack.json", {"users": {}, "slack": {"T0001TEAM/U0001ANA": "person:password-file#ana"}})
    with pytest.raises(AccessConfigError, match="'slack' maps Slack users to people: state 'issuer'"):
        access_for("0.0.0.0", users, slack)


@pytest.mark.parametrize("content, message", [
    ("not json", "not readable JSON"), ("[]", "non-empty JSON object"), ("{}", "non-empty JSON object"),
    ('{"ana": "acme"}', "unknown member"), ('{"ana": [""]}', "list of scope names"),
    ('{"users": {"ana": ["acme"]}}', "lists of roles"), ('{"users": {"ana": {"acme": ["root"]}}}', "unknown role"),
    ('{"users": {"ana": {"acme": "author"}}}', "lists of roles"), ('{"groups": []}', "must map names"),
    ('{"users": {}, "roles": {}}', "unknown member"),
    ('{"users": ["acme"]}', "must map names"), ('{"groups": ["acme"]}', "must map names"),
])
def test_bad_grants_files_are_refused(tmp_path, content, message):
    users = _write(tmp_path / "users.json", {"ana": HASH})
    grants = tmp_path / "grants.json"
    grants.write_text(content)
    with pytest.raises(AccessConfigError, match=message):
        access_for("0.0.0.0", users, grants)


def test_missing_and_bad_password_files_are_refused(tmp_path):
    with pytest.raises(AccessConfigError, match="does not exist"):
        access_for("0.0.0.0", tmp_path / "absent.json", tmp_path / "absent2.json")
    users = _write(tmp_path / "users.json", {"ana": ""})
    with pytest.raises(AccessConfigError, match="not a scrypt hash"):
        access_for("0.0.0.0", users, _write(tmp_path / "g.json", {"ana": ["a"]}))


_SALT, _KEY = "A" * 22, "A" * 43


@pytest.mark.parametrize("value", [
    "correct horse battery staple",  # the old plaintext format
    "scrypt$16384$8$1$" + _SALT,  # too few parts
    f"scrypt$2147483648$8$1${_SALT}${_KEY}",  # n beyond 2**20: unbounded memory per check
    f"scrypt$12345$8$1${_SALT}${_KEY}",  # n not a power of two
    f"scrypt$16384$99$1${_SALT}${_KEY}",  # r out of range
    f"scrypt$16384$8$1$AAAA${_KEY}",  # salt shorter than 16 bytes
    f"scrypt$16384$8$1${_SALT}$*{_KEY[1:]}",  # not base64
    f"pbkdf2$16384$8$1${_SALT}${_KEY}", 42, None, ["x"],
])
def test_a_password_file_holding_anything_but_scrypt_hashes_is_refused(tmp_path, value):
    users = _write(tmp_path / "users.json", {"bo": HASH, "ana": value})
    with pytest.raises(AccessConfigError) as refused:
        access_for("0.0.0.0", users, _write(tmp_path / "g.json", {"ana": ["a"]}))
    assert "'ana' is not a scrypt hash" in str(refused.value)
    assert "gate workbench-passwd FILE --convert" in str(refused.value)
    if isinstance(value, str):
        assert value not in str(refused.value)  # never echoed


def test_the_label_is_a_persons_name_else_subject_else_id():
    assert Identity(Principal.person("https://id.example", "bob-sub", "Bob")).label == "Bob"
    assert Identity(Principal.person("https://id.example", "bob-sub")).label == "bob-sub"
    assert Identity(Principal.api_key("key_1")).label == "key_1"
    assert Identity.local_operator("ops").label == "operator:ops"
    assert Identity.password_user("ana").principal == Principal.person("password-file", "ana", "ana")
    assert Identity.password_user("ana").groups == () and not Identity.password_user("ana").operator


def test_the_operators_login_falls_back_when_the_uid_has_no_name_or_there_are_no_uids(monkeypatch):
    import getpass
    import pwd
    import sys

    def no_name(uid):
        raise KeyError(uid)

    monkeypatch.setattr(pwd, "getpwuid", no_name)
    assert Identity.local_operator().principal == Principal.operator("local")
    monkeypatch.setitem(sys.modules, "pwd", None)  # no POSIX user ids: `import pwd` raises ImportError
    monkeypatch.setattr(getpass, "getuser", lambda: "winuser")
    assert Identity.local_operator().principal == Principal.operator("winuser")
    assert Identity.local_operator("given").principal == Principal.operator("given")


def test_rights_decide_per_scope_at_each_call():
    held = {"acme": frozenset({"author"})}
    rights = Rights(Identity.password_user("ana"), lambda scope: held.get(scope, frozenset()))
    assert rights.principal == Principal.person("password-file", "ana", "ana")
    assert rights.permissions_in("acme") == {"read", "draft", "dry_run", "export"}
    assert rights.may("acme", "draft") and not rights.may("acme", "release") and not rights.may("globex", "read")
    held["acme"] = frozenset({"releaser"})  # read again at the next call, never held by the page
    assert rights.may("acme", "release") and not rights.may("acme", "draft")
    assert rights.permissions_in("") == frozenset()
    operator = Rights.operator("ops")
    assert operator.identity == Identity.local_operator("ops") and operator.identity.operator
    assert operator.permissions_in("any") == {"read", "draft", "dry_run", "export", "publish", "release", "approve",
                                              "resolve", "admin"}
    assert operator.permissions_in("") == frozenset()


def test_the_operator_has_every_role_only_without_sign_in_and_grants():
    from workbench.app.access import Access, Grants

    operator = Identity.local_operator("ops")
    assert Access(None, None).roles_in(operator, "a") == frozenset(ROLES)
    assert Access(None, None).roles_in(Identity.password_user("ops"), "a") == frozenset()  # not the operator
    assert Access(None, Grants()).roles_in(operator, "a") == frozenset()
    signed_in = Access(Path("users.json"), None)
    assert signed_in.authenticated and signed_in.roles_in(operator, "a") == frozenset()
    assert Access(None, None, oidc=object()).authenticated  # type: ignore[arg-type]
    granted = Access(Path("users.json"), Grants(users={"ops": {"a": frozenset({"viewer"})}}))
    assert granted.roles_in(Identity.password_user("ops"), "a") == {"viewer"}
    assert granted.roles_in(Identity.password_user("ops"), "b") == frozenset()
    assert granted.roles_in(Identity(Principal.api_key("key_1")), "a") == frozenset()  # no subject: no user entry


def test_roles_text_lists_roles_in_their_order():
    from workbench.app.access import roles_text

    assert roles_text({"admin", "author", "viewer"}) == "viewer, author, admin"
    assert roles_text(["releaser", "releaser"]) == "releaser"
    assert roles_text([]) == "none"


@pytest.mark.parametrize(("claims", "identity"), [
    ({"iss": "i", "sub": "s", "name": "Ana", "preferred_username": "ana", "groups": ["g1", "", 5, "g2"]},
     ("i", "s", "Ana", ("g1", "g2"))),
    ({"iss": "i", "sub": "s", "preferred_username": "ana", "groups": "g1"}, ("i", "s", "ana", ("g1",))),
    ({"iss": "i", "sub": "s", "name": "", "preferred_username": "ana"}, ("i", "s", "ana", ())),
    ({"iss": "i", "sub": "s", "name": 5, "groups": {"g": 1}}, ("i", "s", None, ())),
    ({"iss": "i", "sub": "s", "roles": ["r"], "groups": ["g"]}, ("i", "s", None, ("g",))),
    ({"iss": "i", "sub": "s", "name": ""}, ("i", "s", None, ())),
])
def test_the_identity_from_verified_claims(claims, identity):
    from workbench.app.access import identity_from_claims

    assert identity_from_claims(claims, "groups") == identity
    assert identity_from_claims({**claims, "team": ["t"]}, "team")[3] == ("t",)


def test_a_grants_file_names_its_path_and_section_in_each_refusal(tmp_path):
    users = _write(tmp_path / "users.json", {"ana": HASH})
    for section in ("users", "groups"):
        grants = _write(tmp_path / f"grants-{section}.json", {section: ["acme"]})
        with pytest.raises(AccessConfigError) as refused:
            access_for("0.0.0.0", users, grants)
        assert str(refused.value) == f"grants file {grants}: '{section}' must map names to {{scope: [roles]}}"
    grants = _write(tmp_path / "bad-role.json", {"groups": {"ops": {"acme": ["root"]}}})
    with pytest.raises(AccessConfigError) as refused:
        access_for("0.0.0.0", users, grants)
    assert str(refused.value).startswith(f"grants file {grants}: groups 'ops', scope 'acme': unknown role(s) 'root'")


def test_a_grants_file_may_name_users_only_or_groups_only(tmp_path):
    users = _write(tmp_path / "users.json", {"ana": HASH})
    only_groups = access_for("0.0.0.0", users, _write(tmp_path / "g.json", {"groups": {"ops": {"*": ["viewer"]}}}))
    assert only_groups.roles_in(Identity(Principal.person("i", "ana"), ("ops",)), "x") == {"viewer"}
    assert only_groups.roles_in(Identity(Principal.person("i", "ana"), ("other",)), "x") == frozenset()
    only_users = access_for("0.0.0.0", users, _write(tmp_path / "u.json", {"users": {"ana": {"x": ["author"]}}}))
    assert only_users.roles_in(Identity(Principal.person("password-file", "ana"), ("ops",)), "x") == {"author"}


def test_sign_in_by_an_identity_provider_keeps_its_settings(tmp_path):
    grants = _write(tmp_path / "grants.json", {"users": {"ana": {"acme": ["viewer"]}}})
    settings = object()
    access = access_for("0.0.0.0", None, grants, oidc=settings)  # type: ignore[arg-type]
    assert access.oidc is settings and access.basic_auth_file is None and access.authenticated
    users = _write(tmp_path / "users.json", {"ana": HASH})
    with pytest.raises(AccessConfigError, match="not both"):
        access_for("0.0.0.0", users, grants, oidc=settings)  # type: ignore[arg-type]


def test_an_identity_without_a_subject_matches_no_user_entry():
    from workbench.app.access import Grants

    grants = Grants(users={"": {"a": frozenset({"admin"})}, "XXXX": {"a": frozenset({"viewer"})}})
    # Only a person of the file's issuer has a user entry (issue 64): never the empty name, nor another.
    assert grants.roles(Identity(Principal.api_key("key_1")), "a") == frozenset()
    assert grants.roles(Identity(Principal.api_key("key_1")), "a", "password-file") == frozenset()


def test_a_grants_file_names_revocations_as_instants_with_their_zone(tmp_path):
    """Issue 57: `"revoked": {"<subject>": "<ISO time>"}` ends that subject's sessions opened
    before the time (workbench.app.sessions); it grants nothing and needs the time's zone."""
    users = _write(tmp_path / "users.json", {"ana": HASH})
    content = {"users": {"ana": {"acme": ["viewer"]}},
               "revoked": {"ana": "2026-11-26T18:00:00Z", "bo": "2026-11-26T20:00:00+02:00"}}
    grants = _write(tmp_path / "grants.json", content)
    access = access_for("0.0.0.0", users, grants)
    assert access.grants.revoked == {"ana": 1795716000.0, "bo": 1795716000.0}
    assert access.grants_file == grants
    assert access.roles_in(Identity(Principal.person("i", "bo")), "acme") == frozenset()  # no role from it
    assert access_for("0.0.0.0", users, _write(tmp_path / "none.json", {"users": {}})).grants.revoked == {}
    for revoked, shown in [({"ana": "2026-11-26T18:00:00"}, "'2026-11-26T18:00:00'"), ({"ana": "yesterday"}, "'yesterday'"),
                           ({"ana": 1795716000}, "1795716000")]:
        bad = _write(tmp_path / "bad.json", {"users": {}, "revoked": revoked})
        with pytest.raises(AccessConfigError) as refused:
            access_for("0.0.0.0", users, bad)
        assert str(refused.value) == (f"grants file {bad}: revoked 'ana': {shown} is not an ISO time with its "
                                      "zone (2026-11-26T18:00:00Z)")
    bad = _write(tmp_path / "bad.json", {"users": {}, "revoked": ["ana"]})
    with pytest.raises(AccessConfigError) as refused:
        access_for("0.0.0.0", users, bad)
    assert str(refused.value) == f"grants file {bad}: 'revoked' must map subjects to ISO times"
    bad = _write(tmp_path / "bad.json", {"users": {}, "roles": {}})
    with pytest.raises(AccessConfigError) as refused:
        access_for("0.0.0.0", users, bad)
    assert str(refused.value) == (f"grants file {bad}: unknown member(s) 'roles'; "
                                  'it is {"issuer": "...", "users": {...}, "groups": {...}, "revoked": {...}, '
                                  '"slack": {...}, "ci": {...}}')
