"""Issue 12 gap 7 (auth): the scheme check, the key length bound and the plans other than
`starter`. Each test fails when its guarded line of `api/auth.py` is removed or broken."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.usefixtures("backend")


def _decide(client, sample_request, headers):
    return client.post("/api/decide", json=sample_request, headers=headers)


@pytest.mark.parametrize("scheme", ["Basic", "Digest", "Token", "Bearerx", ""])
def test_a_valid_key_under_another_scheme_is_401(client, api_key, sample_request, scheme):
    response = _decide(client, sample_request, {"Authorization": f"{scheme} {api_key}".lstrip()})
    assert response.status_code == 401
    assert response.json["error"] == "SVC_API_UNAUTHORIZED" and response.json["c"] == "unclear"


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
def test_the_bearer_scheme_is_accepted_in_any_case(client, api_key, sample_request, scheme):
    assert _decide(client, sample_request, {"Authorization": f"{scheme} {api_key}"}).status_code == 200


def test_keys_over_200_characters_are_refused_without_a_ledger_lookup(app, client, api_key, sample_request,
                                                                      monkeypatch):
    ledger = app.extensions["gate"].auth.ledger
    looked_up = []
    original = ledger.api_key_by_hash
    monkeypatch.setattr(ledger, "api_key_by_hash", lambda key_hash: looked_up.append(key_hash) or original(key_hash))
    for header in ("x-api-key", "Authorization"):
        value = "k" * 201 if header == "x-api-key" else "Bearer " + "k" * 201
        response = _decide(client, sample_request, {header: value})
        assert response.status_code == 401 and response.json["error"] == "SVC_API_UNAUTHORIZED"
    assert looked_up == []  # SECURITY: the cost of a refused oversized key is bounded before SQL
    # At exactly 200 characters the key is looked up (and is unknown).
    assert _decide(client, sample_request, {"x-api-key": "k" * 200}).status_code == 401
    assert len(looked_up) == 1


@pytest.mark.parametrize("plan, limit", [("starter", "20"), ("growth", "120"), ("scale", "1200")])
def test_each_plan_brings_its_own_default_limits(client, issue_key, sample_request, plan, limit):
    key = issue_key(plan=plan, rate_limit=None)["api_key"]
    response = _decide(client, sample_request, {"x-api-key": key})
    assert response.status_code == 200
    assert response.headers["X-RateLimit-Limit"] == limit
    assert response.headers["X-RateLimit-Remaining"] == str(int(limit) - 1)


def test_a_plan_from_settings_applies_its_monthly_cap(make_app, issue_key, sample_request):
    client = make_app(env={"GATE_PLANS": '{"pilot": {"rate_limit": 5, "monthly_cap": 1}}'}).test_client()
    from gate.settings import Settings
    from gate_cli.keys_cmd import create_key

    app_settings = client.application.extensions["gate"].settings
    key = create_key(Settings.from_env({**_env_of(app_settings)}), "tenant_p", "pilot", None, None)["api_key"]
    first = _decide(client, sample_request, {"x-api-key": key})
    assert first.status_code == 200 and first.headers["X-RateLimit-Limit"] == "5"
    second = _decide(client, sample_request, {"x-api-key": key})
    assert second.status_code == 429 and second.json["error"] == "SVC_API_MONTHLY_CAP_EXCEEDED"


def _env_of(settings):
    return {"GATE_HOME": str(settings.home), "GATE_DATABASE_URL": settings.database_url,
            "GATE_SIGNING_KEY_FILE": str(settings.signing_key_file),
            "GATE_PLANS": '{"pilot": {"rate_limit": 5, "monthly_cap": 1}}'}


@pytest.mark.parametrize("headers, message", [
    ({}, "an API key is required in x-api-key or Authorization: Bearer"),
    ({"Authorization": "Basic abc"}, "an API key is required in x-api-key or Authorization: Bearer"),
    ({"x-api-key": "k" * 201}, "the API key is not valid"),
    ({"x-api-key": "dg_" + "x" * 43}, "the API key is not valid"),
])
def test_each_refusal_says_why_in_the_error_body(client, sample_request, headers, message):
    # Mutation testing: the 401 bodies carry their documented message, not a null.
    response = _decide(client, sample_request, headers)
    assert response.status_code == 401 and response.json["message"] == message


def test_the_bearer_token_is_the_text_after_the_first_space(client, api_key, sample_request):
    # `Bearer  <key>` (two spaces) is the scheme, then the token with its whitespace trimmed.
    assert _decide(client, sample_request, {"Authorization": f"Bearer  {api_key}"}).status_code == 200
    assert _decide(client, sample_request, {"Authorization": f"Bearer {api_key} extra"}).status_code == 401
