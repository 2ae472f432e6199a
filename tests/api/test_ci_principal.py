"""Issue 55, item 4: CI as a principal, against a real issuer on loopback (the tests' OpenID
Connect provider issuing GitHub-Actions-shaped JWT access tokens, tests/oidc_support.py).

A token of a granted repository and ref publishes and asks for an activation under
require_approval; the signed event names `ci:<repository>@<ref>`; neither that CI run nor another
one can approve it; a person's key does, and `gate verify` of the release history names both. A
token of another repository or branch, an expired one, one for another audience, one with
`alg: none`, a tampered one, one of another issuer: each is refused and changes nothing."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from api.auth import AuthFailure
from api.ci import CIPrincipals
from gate.principals import Principal
from gate.settings import Settings, SettingsError
from tests.oidc_support import ci_grant, ci_ids, oidc_provider  # noqa: F401  # the session fixture
from tests.releases.support import Api, version

AUDIENCE = "https://gate.test/ci"
REPO, MAIN = "acme/policies", "refs/heads/main"
CI_MAIN = f"ci:{REPO}@{MAIN}"
OTHER_REPO = "acme/other"
SCOPE = "tenant_a"
POLICY = "/api/decision/release-policy"


class ShiftedClock:
    """The system clock moved by `offset` (the gate's clock in these tests)."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset


def _ci_app(gate_env, tmp_path, issuer: str, ci: dict):
    from gate_cli.served_app import create_app

    grants = tmp_path / "grants.json"
    grants.write_text(json.dumps({"ci": ci}))
    clock = ShiftedClock()
    settings = Settings.from_env({**gate_env, "GATE_CI_ISSUER": issuer, "GATE_CI_AUDIENCE": AUDIENCE,
                                  "GATE_GRANTS_FILE": str(grants)})
    app = create_app(settings, clock=clock)
    app.testing = True
    return app, clock


@pytest.fixture
def ci_gate(oidc_provider, gate_env, tmp_path):  # noqa: F811
    """A gate whose CI issuer is the provider; acme/policies@main is author and releaser in
    tenant_a, acme/other@main releaser there too (each entry bound to its repository's ids)."""
    app, clock = _ci_app(gate_env, tmp_path, oidc_provider.issuer,
                         {f"{REPO}@{MAIN}": ci_grant(REPO, {SCOPE: ["author", "releaser"]}),
                          f"{OTHER_REPO}@{MAIN}": ci_grant(OTHER_REPO, {SCOPE: ["releaser"]})})
    yield app, clock
    app.extensions["gate"].ledger.dispose()


@pytest.fixture
def ci_gate_with_readers(oidc_provider, gate_env, tmp_path):  # noqa: F811
    """As ci_gate, and every ref of acme/policies a viewer in tenant_a (`acme/policies@*`)."""
    app, _clock = _ci_app(gate_env, tmp_path, oidc_provider.issuer,
                          {f"{REPO}@{MAIN}": ci_grant(REPO, {SCOPE: ["author", "releaser"]}),
                           f"{REPO}@*": ci_grant(REPO, {SCOPE: ["viewer"]})})
    yield app
    app.extensions["gate"].ledger.dispose()


@pytest.fixture(scope="module")
def tokens(oidc_provider):  # noqa: F811
    """One token per case, issued once for the module (each valid for 10 minutes)."""
    return {"main": oidc_provider.ci_token(REPO, MAIN, AUDIENCE),
            "branch": oidc_provider.ci_token(REPO, "refs/heads/feature", AUDIENCE),
            "stranger": oidc_provider.ci_token("acme/unknown", MAIN, AUDIENCE),
            "other": oidc_provider.ci_token(OTHER_REPO, MAIN, AUDIENCE),
            "audience": oidc_provider.ci_token(REPO, MAIN, "https://another.example"),
            # The same name, re-created (or renamed into) by someone else: other ids.
            "renamed": oidc_provider.ci_token(REPO, MAIN, AUDIENCE, ids=("424242", ci_ids(REPO)[1])),
            "transferred": oidc_provider.ci_token(REPO, MAIN, AUDIENCE, ids=(ci_ids(REPO)[0], "424242")),
            # A pull_request_target run: the base branch's ref, a fork's code.
            "target": oidc_provider.ci_token(REPO, MAIN, AUDIENCE, event="pull_request_target"),
            "pull": oidc_provider.ci_token(REPO, MAIN, AUDIENCE, event="pull_request"),
            "dispatch": oidc_provider.ci_token(REPO, MAIN, AUDIENCE, event="workflow_dispatch"),
            "long": oidc_provider.ci_token(REPO, MAIN, AUDIENCE, lifetime=3601),
            "hour": oidc_provider.ci_token(REPO, MAIN, AUDIENCE, lifetime=3600)}


class Ci(Api):
    """The release calls as a CI run: its token as the bearer."""

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}", **(extra or {})}


def _part(token: str, index: int) -> dict:
    return json.loads(base64.urlsafe_b64decode(token.split(".")[index] + "=="))


def _encode(value: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def _gate(gate_env, *args: str) -> subprocess.CompletedProcess:
    environment = {**gate_env, "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PATH": os.environ.get("PATH", "")}
    return subprocess.run([sys.executable, "-m", "gate_cli.main", *args], capture_output=True, text=True,
                          env=environment, timeout=120)


def test_a_ci_run_requests_an_activation_that_only_a_person_approves(
        ci_gate, tokens, issue_key, oidc_provider, gate_env, tmp_path):  # noqa: F811
    app, _clock = ci_gate
    client = app.test_client()
    admin = Api(client, issue_key(permissions="admin")["api_key"])
    # A key held by bob of the provider, made before approvals are required (a grant after waits).
    bob = f"person:{oidc_provider.issuer}#bob"
    person = Api(client, issue_key(permissions="approve", holder=bob)["api_key"])
    assert client.patch(POLICY, json={"require_approval": True}, headers=admin.headers()).status_code == 200
    ci, other = Ci(client, tokens["main"]), Ci(client, tokens["other"])
    published = ci.publish(version("v1"))
    assert published.status_code == 201, published.json
    asked = ci.act("activate", version="v1")
    assert asked.status_code == 201, asked.json
    assert asked.json["event"]["actor"] == CI_MAIN
    assert asked.json["event"]["principal"] == {"kind": "ci", "id": CI_MAIN}
    assert asked.json["state"]["active"] is None and asked.json["state"]["pending"][0]["requested_by"] == CI_MAIN
    approval = {"request_seq": asked.json["event"]["seq"], "version": "v1",
                "rulebook_hash": published.json["rulebook"]["hash"]}
    # No CI run approves: neither the one that asked nor another repository's (no approve right).
    for run in (ci, other):
        refused = run.act("approve", **approval)
        assert refused.status_code == 403 and refused.json["error"] == "RELEASE_PERMISSION_DENIED", refused.json
    assert ci.status().json["state"]["active"] is None
    # A person (bob's key) approves: active.
    approved = person.act("approve", **approval)
    assert approved.status_code == 201 and approved.json["state"]["active"]["version"] == "v1", approved.json
    # The portable history, verified offline, names the CI run and the person.
    history = ci.history()
    assert history.status_code == 200
    (tmp_path / "keys.json").write_bytes(client.get("/api/decision/receipt-keys").get_data())
    (tmp_path / "history.json").write_text(json.dumps(history.json))
    verified = _gate(gate_env, "verify", str(tmp_path / "history.json"), "--key-registry", str(tmp_path / "keys.json"))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert f"activate v1 by {CI_MAIN} (ci)" in verified.stdout, verified.stdout
    assert "approve v1 by " in verified.stdout and f"(api_key), holder {bob}" in verified.stdout, verified.stdout


def test_a_person_request_is_never_approved_by_a_ci_run(ci_gate, tokens, issue_key):
    """Two-person rule: the CI run lacks approve, and even its principal never counts as the second."""
    from gate.principals import is_distinct_approver

    app, _clock = ci_gate
    client = app.test_client()
    ann = Api(client, issue_key(permissions="publish,release,admin", holder="person:https://id.example#ann")["api_key"])
    assert client.patch(POLICY, json={"require_approval": True}, headers=ann.headers()).status_code == 200
    published = ann.publish(version("v1")).json["rulebook"]
    asked = ann.act("activate", version="v1")
    refused = Ci(client, tokens["main"]).act("approve", request_seq=asked.json["event"]["seq"], version="v1",
                                             rulebook_hash=published["hash"])
    assert refused.status_code == 403 and refused.json["error"] == "RELEASE_PERMISSION_DENIED"
    ci_a, ci_b = Principal.ci(REPO, MAIN), Principal.ci(OTHER_REPO, MAIN)
    assert not is_distinct_approver(ci_b.holder_id, [ci_a.holder_id])
    assert not is_distinct_approver(ci_a.holder_id, ["person:https://id.example#ann"])
    assert is_distinct_approver("person:https://id.example#bob", [ci_a.holder_id])


def _forged(tokens: dict, *, header: dict | None = None, claims: dict | None = None, signature: str | None = None) -> str:
    token = tokens["main"]
    head, body, sig = token.split(".")
    if header is not None:
        head = _encode({**_part(token, 0), **header})
    if claims is not None:
        body = _encode({**_part(token, 1), **claims})
    return ".".join((head, body, sig if signature is None else signature))


def _foreign_issuer_token(issuer: str) -> str:
    key = RSAKey.generate_key(2048, parameters={"kid": "test-rs256"})
    now = int(time.time())
    return jwt.encode({"alg": "RS256", "kid": "test-rs256"},
                      {"iss": issuer, "aud": AUDIENCE, "sub": f"repo:{REPO}:ref:{MAIN}", "repository": REPO,
                       "ref": MAIN, "repository_id": ci_ids(REPO)[0], "repository_owner_id": ci_ids(REPO)[1],
                       "event_name": "push", "iat": now, "exp": now + 600}, key)


def test_tokens_that_do_not_verify_or_hold_no_role_are_refused_and_change_nothing(ci_gate, tokens, oidc_provider):  # noqa: F811
    app, clock = ci_gate
    client = app.test_client()
    unsigned = _forged(tokens, header={"alg": "none"}, signature="")
    cases = {
        "another branch": (tokens["branch"], 403),
        "another repository": (tokens["stranger"], 403),
        "another audience": (tokens["audience"], 401),
        "alg none": (unsigned, 401),
        "HS256 keyed with nothing": (_forged(tokens, header={"alg": "HS256"}), 401),
        "tampered claims": (_forged(tokens, claims={"repository": OTHER_REPO}), 401),
        "tampered signature": (_forged(tokens, signature="A" * 342), 401),
        "another issuer": (_foreign_issuer_token("https://issuer.example"), 401),
        "the right issuer named, another key": (_foreign_issuer_token(oidc_provider.issuer), 401),
        "too large": (tokens["main"] + "A" * 17_000, 401),
    }
    for name, (token, status) in cases.items():
        answer = Ci(client, token).publish(version("v1"))
        assert answer.status_code == status, (name, answer.json)
        assert answer.json["error"] == "SVC_API_UNAUTHORIZED", (name, answer.json)
        assert "A" * 50 not in answer.get_data(as_text=True) and token not in answer.get_data(as_text=True)
        assert (answer.headers.get("WWW-Authenticate") is not None) == (status == 401), name
    assert "holds no role" in Ci(client, tokens["branch"]).publish(version("v1")).json["message"]
    # Expired: the gate's clock an hour on (past the 10 minutes and the minute's leeway).
    clock.offset = timedelta(hours=1)
    expired = Ci(client, tokens["main"]).publish(version("v1"))
    assert expired.status_code == 401 and expired.json["error"] == "SVC_API_UNAUTHORIZED"
    clock.offset = timedelta(0)
    # Nothing was published by any of them; the good token still works.
    assert app.extensions["gate"].ledger.latest_rulebook_snapshot(SCOPE, "pricing_exception") is None
    assert Ci(client, tokens["main"]).publish(version("v1")).status_code == 201


def test_a_ci_token_acts_only_where_routes_take_it_and_in_a_granted_scope(ci_gate, tokens):
    app, _clock = ci_gate
    client = app.test_client()
    ci = Ci(client, tokens["main"])
    decide = client.post("/api/decide", json={}, headers=ci.headers())
    assert decide.status_code == 403 and decide.json["error"] == "SVC_API_UNAUTHORIZED"
    elsewhere = client.post("/api/decision/rulebooks", json=version("v1"),
                            headers=ci.headers({"x-gate-scope": "tenant_b"}))
    assert elsewhere.status_code == 403 and "holds no role" in elsewhere.json["message"]
    named = client.post("/api/decision/rulebooks", json=version("v1"), headers=ci.headers({"x-gate-scope": SCOPE}))
    assert named.status_code == 201
    # The releaser-only repository has no author role, but publishing is a releaser's right.
    assert Ci(client, tokens["other"]).publish(version("v2")).status_code == 201


def test_a_renamed_repository_and_a_run_of_another_event_get_no_grant_above_viewer(ci_gate_with_readers, tokens,
                                                                                    caplog):
    """The same name with other ids (renamed, transferred, re-created by someone else) holds
    nothing; a pull_request_target or pull_request run of the main ref reads, never writes."""
    client = ci_gate_with_readers.test_client()
    for name in ("renamed", "transferred"):
        refused = Ci(client, tokens[name]).publish(version("v1"))
        assert refused.status_code == 403 and refused.json["error"] == "SVC_API_UNAUTHORIZED", (name, refused.json)
        assert "holds no role" in refused.json["message"], name
        assert Ci(client, tokens[name]).status().status_code == 403, name  # not even the pattern's viewer
    for name in ("target", "pull"):
        refused = Ci(client, tokens[name]).publish(version("v1"))
        assert refused.status_code == 403 and refused.json["error"] == "RELEASE_PERMISSION_DENIED", (name, refused.json)
        assert Ci(client, tokens[name]).status().status_code in (200, 404), name  # a viewer reads
    assert ci_gate_with_readers.extensions["gate"].ledger.latest_rulebook_snapshot(SCOPE, "pricing_exception") is None
    # The write events write; the audit names the ids, the event and the workflow.
    with caplog.at_level("INFO", logger="api.ci"):
        assert Ci(client, tokens["dispatch"]).publish(version("v1")).status_code == 201
    [audit] = [r.getMessage() for r in caplog.records if "acts in scope" in r.getMessage()]
    repository_id, owner_id = ci_ids(REPO)
    assert (f"{CI_MAIN} (repository id {repository_id}, owner id {owner_id}, event workflow_dispatch, workflow "
            f"{REPO}/.github/workflows/policy.yml@{MAIN}, sha {'0' * 40}) acts in scope '{SCOPE}' as author, "
            "releaser, viewer") == audit


def test_a_token_living_longer_than_an_hour_is_refused(ci_gate, tokens):
    client = ci_gate[0].test_client()
    refused = Ci(client, tokens["long"]).publish(version("v1"))
    assert refused.status_code == 401 and refused.json["error"] == "SVC_API_UNAUTHORIZED", refused.json
    assert refused.json["message"] == "the CI token is not valid"
    assert ci_gate[0].extensions["gate"].ledger.latest_rulebook_snapshot(SCOPE, "pricing_exception") is None
    assert Ci(client, tokens["hour"]).publish(version("v1")).status_code == 201  # exactly the cap


def test_a_token_of_the_documented_size_reaches_the_gates_own_check_through_gunicorn(
        oidc_provider, gate_env, tmp_path):  # noqa: F811
    """`gate serve` (gunicorn) reads a bearer token of up to 16,384 characters: a 16,000-byte one
    is answered by the gate (401 SVC_API_UNAUTHORIZED, WWW-Authenticate), not by gunicorn's 431
    (its default header line limit is 8,190 bytes); one past 16,384 by the gate's own size check."""
    import urllib.error
    import urllib.request

    from tests.client.live_gate import LiveGate

    grants = tmp_path / "grants.json"
    grants.write_text(json.dumps({"ci": {f"{REPO}@{MAIN}": ci_grant(REPO, {SCOPE: ["releaser"]})}}))
    served = LiveGate(tmp_path / "home", env={k: v for k, v in gate_env.items() if k != "GATE_HOME"} | {
        "GATE_CI_ISSUER": oidc_provider.issuer, "GATE_CI_AUDIENCE": AUDIENCE, "GATE_GRANTS_FILE": str(grants)}).start()
    try:
        for size in (16_000, 16_384, 16_500):
            head = _encode({"alg": "RS256", "kid": "test-rs256"})
            token = f"{head}.{'A' * (size - len(head) - 4)}.AA"
            assert len(token) == size
            request = urllib.request.Request(f"{served.base}/api/decision/release-policy",
                                             headers={"Authorization": f"Bearer {token}", "x-gate-scope": SCOPE})
            with pytest.raises(urllib.error.HTTPError) as answer:
                urllib.request.urlopen(request, timeout=30)
            body = json.loads(answer.value.read())
            assert (answer.value.code, body["error"]) == (401, "SVC_API_UNAUTHORIZED"), (size, body)
            assert answer.value.headers.get("WWW-Authenticate") is not None, size
        log = served.log.read_text()
        assert log.count("a CI token was refused: the token is too large") == 1, log  # 16,500 only
    finally:
        served.stop()


def _issuer_stub(keys):
    """A CI issuer's two documents, answered from memory, counting the reads of each."""
    reads: dict[str, int] = {}

    def fetch(url: str) -> dict:
        reads[url] = reads.get(url, 0) + 1
        if url.endswith("/.well-known/openid-configuration"):
            return {"issuer": "https://ci.example", "jwks_uri": "https://ci.example/jwks",
                    "id_token_signing_alg_values_supported": ["RS256"]}
        return keys.as_dict(private=False)

    return fetch, reads


def _principals(tmp_path, grants: dict | str, fetch, now: list[float]):
    path = tmp_path / "grants.json"
    path.write_text(grants if isinstance(grants, str) else json.dumps(grants))
    settings = Settings.from_env({"GATE_HOME": str(tmp_path), "GATE_CI_ISSUER": "https://ci.example",
                                  "GATE_CI_AUDIENCE": AUDIENCE, "GATE_GRANTS_FILE": str(path)})
    return CIPrincipals(settings, time.time, fetch=fetch, monotonic=lambda: now[0]), path


def _signed(key, kid: str, repository: str = REPO) -> str:
    now = int(time.time())
    repository_id, owner_id = ci_ids(repository)
    return jwt.encode({"alg": "RS256", "kid": kid}, {"iss": "https://ci.example", "aud": AUDIENCE, "sub": "s",
                                                     "repository": repository, "ref": MAIN, "iat": now,
                                                     "repository_id": repository_id, "repository_owner_id": owner_id,
                                                     "event_name": "push", "exp": now + 300}, key)


def test_unknown_key_ids_fetch_the_keys_again_at_most_every_thirty_seconds(tmp_path):
    known = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    rotated = RSAKey.generate_key(2048, parameters={"kid": "k2"})
    keys = KeySet([known])
    fetch, reads = _issuer_stub(keys)
    now = [1000.0]
    ci, _path = _principals(tmp_path, {"ci": {f"{REPO}@{MAIN}": ci_grant(REPO, {SCOPE: ["releaser"]})}}, fetch, now)
    assert ci.caller(_signed(known, "k1"), None).principal == Principal.ci(REPO, MAIN)
    for _ in range(5):  # forged key ids: one fetch again at most, none within the bound
        with pytest.raises(AuthFailure) as refused:
            ci.caller(_signed(rotated, "k2"), None)
        assert (refused.value.status, refused.value.message) == (401, "the CI token is not valid")
    assert reads == {"https://ci.example/.well-known/openid-configuration": 1, "https://ci.example/jwks": 1}
    keys.keys.append(rotated)  # the issuer rotates; 30 s on, the new key id fetches the set once
    now[0] += 31
    assert ci.caller(_signed(rotated, "k2"), None).scope == SCOPE
    assert reads["https://ci.example/jwks"] == 2


def test_the_grants_file_is_read_again_when_it_changes_and_an_unusable_one_grants_nothing(tmp_path):
    key = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    fetch, _reads = _issuer_stub(KeySet([key]))
    now = [1000.0]
    ci, path = _principals(tmp_path, {"ci": {f"{REPO}@{MAIN}": ci_grant(REPO, {SCOPE: ["releaser"],
                                                                              "tenant_b": ["viewer"]})}}, fetch, now)
    token = _signed(key, "k1")
    with pytest.raises(AuthFailure, match="several scopes: name one in x-gate-scope"):
        ci.caller(token, None)
    assert ci.caller(token, "tenant_b").permissions == {"read"}
    assert ci.caller(token, SCOPE).permissions == {"read", "publish", "release"}
    path.write_text(json.dumps({"ci": {f"{OTHER_REPO}@{MAIN}": ci_grant(OTHER_REPO, {SCOPE: ["releaser"]})}}))
    now[0] += 1.5
    with pytest.raises(AuthFailure, match="holds no role in any scope") as refused:
        ci.caller(token, None)
    assert refused.value.status == 403
    path.write_text(json.dumps({"ci": {f"{REPO}@{MAIN}": ci_grant(REPO, {SCOPE: ["approver"]})}}) + "  ")
    now[0] += 1.5
    with pytest.raises(AuthFailure, match="holds no role in this scope"):
        ci.caller(token, SCOPE)
    # At start an unusable file refuses the service.
    with pytest.raises(SettingsError, match=r"GATE_GRANTS_FILE: grants file .* is not readable JSON"):
        _principals(tmp_path, "{", fetch, now)
