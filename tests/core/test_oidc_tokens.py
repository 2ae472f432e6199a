"""gate/oidc.py and gate/grants.py: the one home of a signed token's checks (the workbench's ID
tokens, the API's CI tokens) and of the grants file's format, including its `ci` member."""

from __future__ import annotations

import json

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, OctKey, RSAKey

from gate import oidc
from gate.grants import AccessConfigError, CIRun, load_grants
from gate.principals import Principal
from gate.settings import Settings, SettingsError

NOW = 1_795_700_000
ISSUER, AUDIENCE = "https://ci.example", "https://gate.example"
KEY = RSAKey.generate_key(2048, parameters={"kid": "k1"})
KEYS = KeySet([KEY])


def _token(key=KEY, header: dict | None = None, **claims) -> str:
    body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "repo:acme/p:ref:refs/heads/main", "iat": NOW, "exp": NOW + 300,
            **claims}
    return jwt.encode({"alg": "RS256", "kid": "k1", **(header or {})}, {k: v for k, v in body.items() if v is not None},
                      key)


def _check(token: str, now: float = NOW) -> dict:
    return oidc.check_claims(oidc.decode_signed(token, KEYS, ("RS256",)), issuer=ISSUER, audience=AUDIENCE, now=now)


def test_a_token_that_holds_every_check_gives_its_claims() -> None:
    assert _check(_token(repository="acme/p"))["repository"] == "acme/p"
    assert _check(_token(), now=NOW + 300 + oidc.LEEWAY_SECONDS - 1)["sub"]  # a minute's leeway for skew


@pytest.mark.parametrize(("claims", "now", "reason"), [
    ({"iss": "https://other.example"}, NOW, "iss"),
    ({"iss": None}, NOW, "iss"),
    ({"aud": "https://another.example"}, NOW, "aud"),
    ({"aud": None}, NOW, "aud"),
    ({}, NOW + 300 + oidc.LEEWAY_SECONDS, "exp"),
    ({"exp": None}, NOW, "exp"),
    ({"iat": NOW + 2 * oidc.LEEWAY_SECONDS}, NOW, "issued in the future"),
    ({"nbf": NOW + 2 * oidc.LEEWAY_SECONDS}, NOW, "not yet valid"),
    ({"sub": None}, NOW, "sub"),
])
def test_each_claim_that_does_not_hold_refuses_the_token(claims, now, reason) -> None:
    with pytest.raises(oidc.TokenRefused, match=reason):
        _check(_token(**claims), now)


def test_a_lifetime_cap_refuses_a_token_living_longer_than_it_however_fresh() -> None:
    cap = oidc.MAX_CI_LIFETIME_SECONDS

    def capped(exp: int) -> dict:
        claims = oidc.decode_signed(_token(exp=exp), KEYS, ("RS256",))
        return oidc.check_claims(claims, issuer=ISSUER, audience=AUDIENCE, now=NOW, max_lifetime=cap)

    assert capped(NOW + cap)["exp"] == NOW + cap  # exactly the cap
    with pytest.raises(oidc.TokenRefused, match=f"lives {cap + 1} s \\(exp − iat\\), more than the {cap} s"):
        capped(NOW + cap + 1)
    with pytest.raises(oidc.TokenRefused, match="more than"):
        capped(NOW + 10 * 365 * 86_400)  # ten years
    assert _check(_token(exp=NOW + 10 * 365 * 86_400))["sub"]  # a caller that names no cap (an ID token's)


@pytest.mark.filterwarnings("ignore:JWS algorithm \"none\" is deprecated")
def test_the_signature_the_algorithm_the_key_id_and_the_size_are_checked_before_the_claims() -> None:
    with pytest.raises(oidc.UnknownKey):
        _check(_token(RSAKey.generate_key(2048, parameters={"kid": "k2"}), {"kid": "k2"}))
    with pytest.raises(oidc.TokenRefused, match="signature"):  # the set's kid, another key
        _check(_token(RSAKey.generate_key(2048, parameters={"kid": "k1"})))
    secret = OctKey.generate_key(256)
    with pytest.raises(oidc.TokenRefused):  # HMAC is never on the allow-list
        oidc.decode_signed(jwt.encode({"alg": "HS256"}, {"iss": ISSUER}, secret), KeySet([secret]), oidc.ALGORITHMS)
    head, body, _sig = _token().split(".")
    none = jwt.encode({"alg": "none"}, {"iss": ISSUER}, None, algorithms=["none"])
    for token in (none, f"{head}.{body}.", f"{head}.{body}", "x" * (oidc.MAX_TOKEN_CHARS + 1), "a.b.c.d.e"):
        with pytest.raises(oidc.TokenRefused):
            oidc.decode_signed(token, KEYS, oidc.ALGORITHMS)
    assert "none" not in oidc.ALGORITHMS and not any(a.startswith("HS") for a in oidc.ALGORITHMS)


def test_an_unknown_key_fetches_the_set_again_at_most_every_thirty_seconds() -> None:
    now = [100.0]
    cache = oidc.KeyCache(lambda: now[0])
    assert cache.needs_fetch(refresh=False)
    cache.store(KEYS.as_dict())
    assert not cache.needs_fetch(refresh=False) and not cache.needs_fetch(refresh=True)
    now[0] += oidc.JWKS_REFETCH_SECONDS + 0.1
    assert not cache.needs_fetch(refresh=False) and cache.needs_fetch(refresh=True)
    with pytest.raises(oidc.TokenRefused, match="JWKS is unusable"):
        cache.store({"keys": [{"kty": "nonsense"}]})


def test_endpoints_are_https_or_loopback_and_algorithms_come_from_the_issuer() -> None:
    assert oidc.check_url("http://127.0.0.1:9/jwks", "jwks_uri", ISSUER)
    with pytest.raises(ValueError, match="must be https"):
        oidc.check_url("http://ci.example/jwks", "jwks_uri", ISSUER)
    assert oidc.signing_algorithms(None) == ("RS256",)
    assert oidc.signing_algorithms(["HS256", "ES256", "none"]) == ("ES256",)
    with pytest.raises(ValueError, match="signs only with"):
        oidc.signing_algorithms(["HS256", "none"])
    with pytest.raises(ValueError, match="must be identical"):
        oidc.read_discovery(ISSUER, lambda _url: {"issuer": ISSUER + "/"})


def _grants(tmp_path, content: dict):
    path = tmp_path / "grants.json"
    path.write_text(json.dumps(content))
    return path


IDS = {"repository_id": "101", "owner_id": "201"}
RUN = CIRun("101", "201", writes=True)


def _entry(scopes: object, **ids: str) -> dict:
    return {**IDS, **ids, "scopes": scopes}


def test_the_grants_file_gives_a_ci_run_its_roles_per_scope(tmp_path) -> None:
    grants = load_grants(_grants(tmp_path, {"ci": {"acme/p@refs/heads/main": _entry({"pay": ["author", "releaser"],
                                                                                     "*": ["viewer"]})}}))
    main = Principal.ci("acme/p", "refs/heads/main")
    assert grants.ci_roles(main, "pay", RUN) == {"author", "releaser", "viewer"}
    assert grants.ci_roles(main, "other", RUN) == {"viewer"}
    assert grants.ci_roles(Principal.ci("acme/p", "refs/heads/dev"), "pay", RUN) == frozenset()  # another branch
    assert grants.ci_roles(Principal.person("i", "acme/p@refs/heads/main"), "pay", RUN) == frozenset()  # only CI kinds
    assert grants.users == {} and grants.groups == {}


def test_a_ci_grant_is_bound_to_the_ids_and_a_run_of_another_event_reads_at_most(tmp_path) -> None:
    grants = load_grants(_grants(tmp_path, {"ci": {"acme/p@refs/heads/main": _entry({"pay": ["author", "releaser"]}),
                                                   "acme/p@*": _entry({"ops": ["viewer"]})}}))
    main = Principal.ci("acme/p", "refs/heads/main")
    # The same name, other ids (renamed, transferred, re-created): nothing, the pattern's viewer neither.
    assert grants.ci_scopes(main, CIRun("999", "201", writes=True)) == {}
    assert grants.ci_scopes(main, CIRun("101", "999", writes=True)) == {}
    # A run of another event (pull_request_target, pull_request): viewer at most, nothing where it held no viewer.
    assert grants.ci_scopes(main, CIRun("101", "201", writes=False)) == {"ops": {"viewer"}}
    assert grants.ci_roles(main, "pay", CIRun("101", "201", writes=False)) == frozenset()


def test_every_ref_of_a_repository_may_read_and_only_a_named_ref_writes(tmp_path) -> None:
    grants = load_grants(_grants(tmp_path, {"ci": {"acme/p@refs/heads/main": _entry({"pay": ["releaser"]}),
                                                   "acme/p@*": _entry({"pay": ["viewer"], "ops": ["viewer"]})}}))
    main, pull = Principal.ci("acme/p", "refs/heads/main"), Principal.ci("acme/p", "refs/pull/7/merge")
    assert grants.ci_scopes(main, RUN) == {"ops": {"viewer"}, "pay": {"releaser", "viewer"}}
    assert grants.ci_scopes(pull, RUN) == {"ops": {"viewer"}, "pay": {"viewer"}}
    assert grants.ci_scopes(Principal.ci("acme/other", "refs/heads/main"), RUN) == {}
    with pytest.raises(AccessConfigError, match="every ref\\) may hold only viewer"):
        load_grants(_grants(tmp_path, {"ci": {"acme/p@*": _entry({"pay": ["viewer", "releaser"]})}}))


@pytest.mark.parametrize(("ci", "message"), [
    ({"acme/p@main": _entry({"pay": ["approver"]})},
     "holds 'approver': a CI principal holds only viewer, author, releaser"),
    ({"acme/p@main": _entry({"pay": ["releaser", "admin"]})}, "holds 'admin'"),
    ({"acme/p@main": _entry({"pay": ["reviewer"]})}, "holds 'reviewer'"),
    ({"acme/p@main": _entry({"pay": ["owner"]})}, "unknown role(s) 'owner'"),
    ({"acme/p": _entry({"pay": ["author"]})}, "is not <repository>@<ref>"),
    ({"acme@main": _entry({"pay": ["author"]})}, "is not <repository>@<ref>"),
    ({"acme/p@main": _entry(["author"])}, "must map scope names to lists of roles"),
    ({"acme/p@main": {"pay": ["author"]}}, "must be {\"repository_id\""),  # the names alone, no ids
    ({"acme/p@main": {"repository_id": "101", "scopes": {"pay": ["author"]}}}, "a name can change hands"),
    ({"acme/p@main": _entry({"pay": ["author"]}, repository_id="acme")}, "a name can change hands"),
    ({"acme/p@main": _entry({"pay": ["author"]}, owner_id="")}, "a name can change hands"),
    ({"acme/p@main": {**_entry({"pay": ["author"]}), "workflow": "x"}}, "a name can change hands"),
    (["acme/p@main"], "'ci' must map <repository>@<ref>"),
])
def test_a_ci_entry_that_could_approve_or_names_no_run_is_refused(tmp_path, ci, message) -> None:
    with pytest.raises(AccessConfigError) as refused:
        load_grants(_grants(tmp_path, {"ci": ci}))
    assert message in str(refused.value)


def test_the_ci_settings_come_all_together_or_not_at_all(tmp_path) -> None:
    base = {"GATE_HOME": str(tmp_path)}
    assert Settings.from_env(base).ci_issuer is None
    full = Settings.from_env({**base, "GATE_CI_ISSUER": "https://token.actions.githubusercontent.com",
                              "GATE_CI_AUDIENCE": "https://gate.example", "GATE_GRANTS_FILE": "/etc/gate/grants.json",
                              "GATE_CI_REF_CLAIM": "job_workflow_ref"})
    assert (full.ci_issuer, full.ci_audience, str(full.grants_file)) == (
        "https://token.actions.githubusercontent.com", "https://gate.example", "/etc/gate/grants.json")
    assert (full.ci_repository_claim, full.ci_ref_claim) == ("repository", "job_workflow_ref")
    assert (full.ci_repository_id_claim, full.ci_owner_id_claim, full.ci_event_claim, full.ci_workflow_claim,
            full.ci_write_events) == ("repository_id", "repository_owner_id", "event_name", "job_workflow_ref",
                                      ("push", "workflow_dispatch"))
    gitlab = Settings.from_env({**base, "GATE_CI_REPOSITORY_ID_CLAIM": "project_id", "GATE_CI_OWNER_ID_CLAIM":
                                "namespace_id", "GATE_CI_EVENT_CLAIM": "pipeline_source", "GATE_CI_WRITE_EVENTS": "web,push"})
    assert (gitlab.ci_repository_id_claim, gitlab.ci_owner_id_claim, gitlab.ci_event_claim,
            gitlab.ci_write_events) == ("project_id", "namespace_id", "pipeline_source", ("push", "web"))
    assert Settings.from_env({**base, "GATE_GRANTS_FILE": "/etc/gate/grants.json"}).ci_issuer is None  # Slack alone
    for env, message in [({"GATE_CI_ISSUER": "https://ci.example"}, "together"),
                         ({"GATE_CI_ISSUER": "https://ci.example", "GATE_CI_AUDIENCE": "a"}, "GATE_GRANTS_FILE"),
                         ({"GATE_CI_AUDIENCE": "a", "GATE_GRANTS_FILE": "g"}, "together"),
                         ({"GATE_CI_ISSUER": "ftp://ci.example", "GATE_CI_AUDIENCE": "a", "GATE_GRANTS_FILE": "g"},
                          "GATE_CI_ISSUER"),
                         ({"GATE_CI_REF_CLAIM": "ref claim"}, "claim name"),
                         ({"GATE_CI_REPOSITORY_ID_CLAIM": "a b"}, "claim name"),
                         ({"GATE_CI_WRITE_EVENTS": "push, pull request"}, "GATE_CI_WRITE_EVENTS")]:
        with pytest.raises(SettingsError, match=message):
            Settings.from_env({**base, **env})
