"""API keys: hashed storage, both headers, 401/403 bodies, and scope isolation (404 across scopes)."""

from __future__ import annotations

import json

import pytest

from gate.keys.apikeys import hash_api_key
from gate.ledger import Ledger
from gate.settings import Settings

pytestmark = pytest.mark.usefixtures("backend")


def test_only_the_hash_of_a_key_is_stored(gate_env, issue_key):
    issued = issue_key("tenant_a")
    ledger = Ledger(Settings.from_env(gate_env).database_url)
    rows = ledger.list_api_keys()
    ledger.dispose()
    assert [row["key_hash"] for row in rows] == [hash_api_key(issued["api_key"])]
    assert issued["api_key"] not in json.dumps(rows)


@pytest.mark.parametrize("headers", [{}, {"x-api-key": "dg_" + "x" * 43}, {"Authorization": "Bearer nope"},
                                     {"Authorization": "Basic abc"}])
def test_missing_or_invalid_key_is_401(client, sample_request, headers):
    response = client.post("/api/decide", json=sample_request, headers=headers)
    assert response.status_code == 401
    assert response.json["c"] == "unclear" and response.json["v"] == "unauthorized"
    assert response.json["error"] == "SVC_API_UNAUTHORIZED"
    assert response.headers["WWW-Authenticate"].startswith("Bearer realm=")


def test_disabled_key_is_403_and_reenabled_key_works(client, gate_env, issue_key, sample_request):
    from gate_cli.main import main

    issued = issue_key()
    env_backup = dict(__import__("os").environ)
    __import__("os").environ.update(gate_env)
    try:
        assert main(["keys", "disable", issued["key_id"]]) == 0
        refused = client.post("/api/decide", json=sample_request, headers={"x-api-key": issued["api_key"]})
        assert refused.status_code == 403
        assert refused.json == {**refused.json, "c": "unclear", "v": "unauthorized", "error": "SVC_API_UNAUTHORIZED"}
        assert main(["keys", "enable", issued["key_id"]]) == 0
        assert client.post("/api/decide", json=sample_request, headers={"x-api-key": issued["api_key"]}).status_code == 200
    finally:
        __import__("os").environ.clear()
        __import__("os").environ.update(env_backup)


def test_other_scopes_items_are_404(client, issue_key, sample_request):
    a, b = issue_key("scope_a")["api_key"], issue_key("scope_b")["api_key"]
    same_scope = issue_key("scope_a")["api_key"]
    record = client.post("/api/decide", json=sample_request, headers={"x-api-key": a}).json
    path = f"/api/decision/{record['decision_id']}"
    assert client.get(path, headers={"x-api-key": a}).status_code == 200
    assert client.get(path, headers={"x-api-key": same_scope}).status_code == 200  # scope, not key
    for url in (path, path + "/verify"):
        response = client.get(url, headers={"x-api-key": b})
        assert response.status_code == 404
        assert response.json["error"] == "DECISION_NOT_FOUND" and response.json["c"] == "unclear"
    assert client.post(path + "/verify", headers={"x-api-key": b}).status_code == 404
    rulebook = record["rulebook"]
    lookup = f"/api/decision/rulebooks?hash={rulebook['hash']}"
    assert client.get(lookup, headers={"x-api-key": a}).status_code == 200
    assert client.get(lookup, headers={"x-api-key": b}).status_code == 404


def test_keyed_reads_need_a_key(client):
    for url in ("/api/decision/dec_x", "/api/decision/dec_x/verify", "/api/decision/rulebooks?hash=ab"):
        response = client.get(url)
        assert response.status_code == 401 and response.json["error"] == "SVC_API_UNAUTHORIZED"


def test_public_endpoints_need_no_key(client):
    for url in ("/api/decision/status", "/api/decision/receipt-keys", "/api/decision/policy-bundles",
                "/api/decision/verify", "/schemas/rulebook-v1.schema.json", "/openapi.json", "/docs.json"):
        assert client.get(url).status_code == 200, url
