"""Budgets of the public routes (issue 18, defect 2): per-client 429s, trusted proxy headers only,
and a per-process bound on concurrent public verifications (api/public_limits.py)."""

from __future__ import annotations

import io
import re
import threading
from datetime import UTC, datetime

import pytest

from api.openapi import endpoints, openapi_document
from api.public_limits import UNDECLARED_BUDGETS, public_budgets
from gate.clock import FixedClock
from gate.settings import Settings, SettingsError
from gate_cli.served_app import create_app

# Routes that count against something else: an API key (keyed), their own per-client window
# (policy checks, MCP, workflows, pilot) or the metrics token.
OWN_LIMIT = {"policychecks.rest_refund", "policychecks.rest_cancellation", "policychecks.rest_return",
             "policychecks.rest_trial", "workflows.run_workflow", "operations.pilot", "operations.proof_metrics",
             "operations.pilot_export", "mcp_all.mcp", "mcp_refund.mcp", "mcp_cancellation.mcp", "mcp_return.mcp",
             "mcp_trial.mcp"}


def _app(gate_env, **env):
    """An app whose clock stands still, so every request of a test falls in one window."""
    settings = Settings.from_env({**gate_env, **env})
    app = create_app(settings, clock=FixedClock(datetime(2026, 11, 23, 12, 0, 30, tzinfo=UTC)))
    app.testing = True
    return app


def _openapi_path(rule: str) -> str:
    return re.sub(r"<(?:[a-z]+:)?([a-z_]+)>", r"{\1}", rule)


def test_every_route_is_keyed_limited_elsewhere_or_budgeted_here(app):
    keyed = {(e.method, e.path) for e in endpoints() if e.auth}
    budgets = public_budgets(app)
    documented = {(e.method, e.path): e.budget for e in endpoints()}
    for rule in app.url_map.iter_rules():
        methods = sorted(rule.methods - {"HEAD", "OPTIONS"})
        path = _openapi_path(rule.rule)
        if all((method.lower(), path) in keyed for method in methods) or rule.endpoint in OWN_LIMIT:
            continue
        assert rule.endpoint in budgets, f"{rule.rule} ({rule.endpoint}) has no budget"
        if rule.endpoint in UNDECLARED_BUDGETS:
            continue
        for method in methods:
            if (method.lower(), path) not in keyed:
                assert documented[(method.lower(), path)] == budgets[rule.endpoint], (method, path)


def _assert_rate_limited(response, limit: int) -> None:
    assert response.status_code == 429
    body = response.json
    assert body["c"] == "unclear" and body["error"] == "SVC_API_RATE_LIMITED" and body["v"] == "rate_limited"
    assert int(response.headers["Retry-After"]) >= 1 and body["retry_after"] == int(response.headers["Retry-After"])
    assert response.headers["X-RateLimit-Limit"] == str(limit) and response.headers["X-RateLimit-Remaining"] == "0"
    assert int(response.headers["X-RateLimit-Reset"]) > 0


def test_public_verification_is_limited_per_client_with_the_spec_headers(gate_env):
    client = _app(gate_env, GATE_PUBLIC_VERIFY_RATE_LIMIT="3").test_client()
    for left in (2, 1, 0):
        response = client.post("/api/decision/verify", json={"record": {"decision_id": "x"}})
        assert response.status_code == 200 and response.headers["X-RateLimit-Remaining"] == str(left)
        assert response.headers["X-RateLimit-Limit"] == "3"
    # Refused before the body is read or parsed: a malformed or huge body is still a 429.
    _assert_rate_limited(client.post("/api/decision/verify", data=b"{not json"), 3)
    _assert_rate_limited(client.post("/api/decision/packet/verify", json={"packet": {}}), 3)
    # Another client address has its own window; reads have a window of their own.
    other = client.post("/api/decision/verify", json={"record": {}}, environ_base={"REMOTE_ADDR": "10.0.0.9"})
    assert other.status_code == 200
    assert client.get("/api/decision/receipt-keys").status_code == 200


def test_public_reads_are_limited_per_client(gate_env):
    client = _app(gate_env, GATE_PUBLIC_RATE_LIMIT="4").test_client()
    for path in ("/openapi.json", "/docs.json", "/api/decision/status", "/schemas/rulebook-v1.schema.json"):
        response = client.get(path)
        assert response.status_code == 200 and "X-RateLimit-Remaining" in response.headers, path
    for path in ("/api/decision/adapters", "/healthz", "/api/decision/policy-bundles", "/metrics"):
        _assert_rate_limited(client.get(path), 4)


def test_keyed_routes_do_not_count_against_the_public_budget(gate_env, issue_key, sample_request):
    key = issue_key()["api_key"]
    client = _app(gate_env, GATE_PUBLIC_VERIFY_RATE_LIMIT="1").test_client()
    assert client.post("/api/decision/verify", json={"record": {}}).status_code == 200
    assert client.post("/api/decision/verify", json={"record": {}}).status_code == 429
    response = client.post("/api/decide", json=sample_request, headers={"x-api-key": key})
    assert response.status_code == 200, response.json


def test_a_forwarded_address_counts_only_from_a_trusted_proxy(gate_env):
    client = _app(gate_env, GATE_PUBLIC_VERIFY_RATE_LIMIT="1", GATE_CLIENT_ADDRESS_HEADER="X-Forwarded-For",
                  GATE_TRUSTED_PROXIES="10.1.0.0/16, 127.0.0.1").test_client()
    proxy = {"REMOTE_ADDR": "10.1.2.3"}

    def verify(environ, forwarded=None):
        headers = {"X-Forwarded-For": forwarded} if forwarded is not None else {}
        return client.post("/api/decision/verify", json={"record": {}}, headers=headers, environ_base=environ).status_code

    # Through the proxy, each client (the entry the proxy appended, last) has its own window;
    # what a client wrote earlier in the header does not choose its bucket.
    assert verify(proxy, "198.51.100.7") == 200
    assert verify(proxy, "198.51.100.7") == 429
    assert verify(proxy, "1.2.3.4, 198.51.100.7") == 429
    assert verify(proxy, "198.51.100.8") == 200
    # A client talking to the gate directly cannot pick a bucket with the header.
    direct = {"REMOTE_ADDR": "203.0.113.5"}
    assert verify(direct, "192.0.2.1") == 200
    assert verify(direct, "192.0.2.2") == 429
    # A malformed or missing header through the proxy counts against the proxy's own address.
    assert verify(proxy, "not-an-address") == 200
    assert verify(proxy) == 429


def test_without_proxy_settings_the_header_is_ignored(gate_env):
    client = _app(gate_env, GATE_PUBLIC_VERIFY_RATE_LIMIT="1").test_client()
    assert client.post("/api/decision/verify", json={"record": {}}, headers={"X-Forwarded-For": "1.1.1.1"}).status_code == 200
    assert client.post("/api/decision/verify", json={"record": {}}, headers={"X-Forwarded-For": "2.2.2.2"}).status_code == 429


@pytest.mark.parametrize("env, message", [
    ({"GATE_CLIENT_ADDRESS_HEADER": "X-Forwarded-For"}, "together"),
    ({"GATE_TRUSTED_PROXIES": "10.0.0.1"}, "together"),
    ({"GATE_CLIENT_ADDRESS_HEADER": "X Forwarded", "GATE_TRUSTED_PROXIES": "10.0.0.1"}, "header name"),
    ({"GATE_CLIENT_ADDRESS_HEADER": "X-Real-IP", "GATE_TRUSTED_PROXIES": "10.0.0.300"}, "GATE_TRUSTED_PROXIES"),
    ({"GATE_PUBLIC_RATE_LIMIT": "0"}, "GATE_PUBLIC_RATE_LIMIT"),
    ({"GATE_PUBLIC_VERIFY_RATE_LIMIT": "many"}, "GATE_PUBLIC_VERIFY_RATE_LIMIT"),
    ({"GATE_PUBLIC_VERIFY_CONCURRENCY": "65"}, "GATE_PUBLIC_VERIFY_CONCURRENCY"),
])
def test_unusable_settings_refuse_to_start(env, message):
    with pytest.raises(SettingsError, match=message):
        Settings.from_env(env)


class _HeldBody(io.RawIOBase):
    """A request body that does not arrive until the test lets it."""

    def __init__(self, entered: threading.Event, release: threading.Event) -> None:
        self.entered, self.release = entered, release

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return 0

    def seek(self, offset: int, whence: int = 0) -> int:
        return 0

    def readinto(self, buffer) -> int:
        self.entered.set()
        self.release.wait(10)
        return 0


def hold_a_verification_slot(app):
    """Take one of the app's public verification slots, as a verification in progress does;
    returns the function that gives it back."""
    from api.public_limits import _SLOTS

    slots = app.extensions[_SLOTS]
    assert slots.acquire(blocking=False)
    return slots.release


def test_a_busy_process_answers_503_at_once_and_frees_the_slot(gate_env):
    app = _app(gate_env, GATE_PUBLIC_VERIFY_CONCURRENCY="1")
    give_back = hold_a_verification_slot(app)
    try:
        for path, body in (("/api/decision/packet/verify", {"packet": {}}), ("/api/decision/verify", {"record": {}})):
            response = app.test_client().post(path, json=body)
            assert response.status_code == 503 and response.headers["Retry-After"] == "1"
            assert response.json["error"] == "PUBLIC_VERIFY_BUSY" and response.json["c"] == "unclear"
            assert "X-RateLimit-Remaining" in response.headers
        assert app.test_client().get("/api/decision/verify").status_code == 200  # reads take no slot
    finally:
        give_back()
    assert app.test_client().post("/api/decision/verify", json={"record": {}}).status_code == 200
    assert app.test_client().post("/api/decision/verify", json={"record": {}}).status_code == 200  # released


def test_a_slow_body_holds_no_verification_slot(gate_env):
    # The slot is taken once the body has arrived: a client trickling its body (up to the read
    # timeout) cannot keep everyone else's verifications out.
    app = _app(gate_env, GATE_PUBLIC_VERIFY_CONCURRENCY="1")
    entered, release = threading.Event(), threading.Event()
    slow = threading.Thread(target=lambda: app.test_client().post(
        "/api/decision/verify", input_stream=_HeldBody(entered, release),
        headers={"Content-Type": "application/json"}, environ_overrides={"CONTENT_LENGTH": "2"}))
    slow.start()
    try:
        assert entered.wait(10)
        assert app.test_client().post("/api/decision/verify", json={"record": {}}).status_code == 200
    finally:
        release.set()
        slow.join(10)


def test_the_budgets_are_documented_in_openapi_and_docs_json(client):
    document = openapi_document()
    for method, path, kind in [(e.method, e.path, e.budget) for e in endpoints() if e.budget]:
        responses = document["paths"][path][method]["responses"]
        assert "SVC_API_RATE_LIMITED" in responses["429"]["x-error-codes"], path
        assert {"Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining"} <= set(responses["429"]["headers"])
        assert ("PUBLIC_VERIFY_BUSY" in responses["503"]["x-error-codes"]) == (kind == "verify"), path
    limits = client.get("/docs.json").json["limits"]["public_routes"]
    for name in ("GATE_PUBLIC_RATE_LIMIT", "GATE_PUBLIC_VERIFY_RATE_LIMIT", "GATE_PUBLIC_VERIFY_CONCURRENCY",
                 "GATE_CLIENT_ADDRESS_HEADER", "GATE_TRUSTED_PROXIES"):
        assert name in limits
