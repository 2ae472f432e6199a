"""Issue 18, item 7: the costly keyed routes are charged to a cost window of their key (api/costs.py).

Over HTTP with a starter key (20 decides and 60 cost units a minute) on an app whose clock stands
still, so that every request of a test falls in one fixed window: each costly route answers
429 `SVC_API_RATE_LIMITED` with the rate headers once its units are spent, a heavy diff costs
more than a light one, a refused request charges nothing, decides of the same key keep their own
window, bad queries are refused before the charge, and a limiter outage is a 503. The Redis
limiter charges weighted hits atomically across threads and limiter instances (workers).
"""

from __future__ import annotations

import json
import math
import secrets
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import pytest

from api.limits import MemoryRateLimiter, RedisRateLimiter
from gate.errors import GateError

REDIS_URL = "redis://127.0.0.1:6379/0"
START = datetime(2026, 11, 23, 18, 0, 5, tzinfo=UTC)  # 55 s before the window ends
STARTER_UNITS = 60
BODY_BYTES_PER_UNIT = 8_192  # one unit per started 8 KiB of body (docs/operating.md)


class StillClock:
    """A clock that stands still until a test moves it."""

    def __init__(self) -> None:
        self.current = START

    def now(self) -> datetime:
        return self.current


@pytest.fixture
def clock():
    return StillClock()


@pytest.fixture
def still_app(gate_env, clock):
    from gate.settings import Settings
    from gate_cli.served_app import create_app

    app = create_app(Settings.from_env(gate_env), clock=clock)
    app.testing = True
    yield app
    app.extensions["gate"].ledger.dispose()


@pytest.fixture
def starter(issue_key):
    """A starter key with the plan's own limits: 20 decides and 60 cost units a minute."""
    return {"x-api-key": issue_key(plan="starter", rate_limit=None)["api_key"]}


@pytest.fixture
def decided(still_app, starter, sample_request):
    """One stored decision of the starter key (one decide of its 20)."""
    response = still_app.test_client().post("/api/decide", json=sample_request, headers=starter)
    assert response.status_code == 200, response.json
    return response.json


def _routes(record: dict) -> dict[str, tuple[str, str, dict | None, int]]:
    """name: (method, url, JSON body, weight in units of the sample decision's request)."""
    decision, policy, chain = record["decision_id"], record["policy_id"], record["audit_chain"]["chain_id"]
    scenarios = {"scenarios": [{"scenario_id": "deep", "context_patch": {"inputs": {"discount_percent": 30}}}]}
    return {
        "replay": ("POST", f"/api/decision/{decision}/replay", None, 1),
        "diff": ("POST", f"/api/decision/{decision}/diff", None, 1),
        "counterfactuals": ("POST", f"/api/decision/{decision}/counterfactuals", scenarios, 2),
        "verify": ("GET", f"/api/decision/{decision}/verify", None, 1),
        "effectiveness": ("GET", f"/api/decision/policies/{policy}/effectiveness", None, 21),
        "confidence": ("GET", f"/api/decision/policies/{policy}/confidence", None, 21),
        "anomalies": ("GET", f"/api/decision/policies/{policy}/anomalies?limit=500", None, 11),
        "benchmarks": ("GET", f"/api/decision/policies/{policy}/benchmarks?limit=100", None, 3),
        "policy alerts, one policy": ("GET", f"/api/policy-alerts?policy_id={policy}", None, 21),
        "policy alerts, all": ("GET", "/api/policy-alerts", None, STARTER_UNITS),  # 201, at most the window
        "packet": ("GET", f"/api/decision/{decision}/packet", None, 27),
        "packet, no intelligence": ("GET", f"/api/decision/{decision}/packet?include_intelligence=false", None, 7),
        "chain": ("GET", f"/api/decision/chains/{chain}", None, 3),
        "chain, large page": ("GET", f"/api/decision/chains/{chain}?limit=1000", None, STARTER_UNITS),  # 101
    }


def _call(client, method: str, url: str, body, headers):
    return client.open(url, method=method, json=body, headers=headers) if body is not None else \
        client.open(url, method=method, headers=headers)


ROUTE_NAMES = list(_routes({"decision_id": "d", "policy_id": "p", "audit_chain": {"chain_id": "c"}}))


@pytest.mark.parametrize("name", ROUTE_NAMES)
def test_each_costly_route_answers_429_once_its_units_are_spent(still_app, clock, starter, decided, name):
    method, url, body, weight = _routes(decided)[name]
    client = still_app.test_client()
    allowed = STARTER_UNITS // weight
    for i in range(allowed):
        response = _call(client, method, url, body, starter)
        assert response.status_code == 200, (name, i, response.json)
        assert response.headers["X-RateLimit-Limit"] == str(STARTER_UNITS)
        assert response.headers["X-RateLimit-Cost"] == str(weight)
        assert response.headers["X-RateLimit-Remaining"] == str(STARTER_UNITS - (i + 1) * weight)
        assert "Retry-After" not in response.headers
    for _ in range(2):  # a refusal charges nothing: the second one sees the same remainder
        refused = _call(client, method, url, body, starter)
        assert refused.status_code == 429, (name, refused.json)
        problem = refused.json
        assert problem == {**problem, "c": "unclear", "v": "rate_limited", "error": "SVC_API_RATE_LIMITED",
                           "retry_after": 55, "cost": weight}
        assert "verdict" not in problem and "decision_id" not in problem
        assert refused.headers["Retry-After"] == "55"
        assert refused.headers["X-RateLimit-Limit"] == str(STARTER_UNITS)
        assert refused.headers["X-RateLimit-Remaining"] == str(STARTER_UNITS - allowed * weight)
        assert refused.headers["X-RateLimit-Reset"] == str(int((START + timedelta(seconds=55)).timestamp() * 1000))
    clock.current = START + timedelta(seconds=55)  # the next window
    assert _call(client, method, url, body, starter).status_code == 200


def test_a_heavy_diff_is_charged_more_than_a_light_one(still_app, starter, decided, sample_request):
    client = still_app.test_client()
    url = f"/api/decision/{decided['decision_id']}/diff"
    wide = {**sample_request["context"]["inputs"], **{f"f{i}": i for i in range(6_000)}}
    heavy = json.dumps({"input": wide}).encode()
    heavy_units = 1 + math.ceil(len(heavy) / BODY_BYTES_PER_UNIT)
    assert 5 < heavy_units < 30
    send = {**starter, "Content-Type": "application/json"}
    light = client.post(url, headers=starter)
    assert light.status_code == 200 and light.headers["X-RateLimit-Cost"] == "1"
    first = client.post(url, data=heavy, headers=send)
    assert first.status_code == 200, first.json
    assert first.json["input_source"] == "override"
    assert first.headers["X-RateLimit-Cost"] == str(heavy_units)
    remaining = STARTER_UNITS - 1 - heavy_units
    assert first.headers["X-RateLimit-Remaining"] == str(remaining)
    while remaining >= heavy_units:
        assert client.post(url, data=heavy, headers=send).status_code == 200
        remaining -= heavy_units
    refused = client.post(url, data=heavy, headers=send)  # does not fit: refused, nothing charged
    assert refused.status_code == 429 and refused.json["cost"] == heavy_units
    assert refused.headers["X-RateLimit-Remaining"] == str(remaining)
    assert remaining >= 1
    still_light = client.post(url, headers=starter)  # what remains still serves light requests
    assert still_light.status_code == 200
    assert still_light.headers["X-RateLimit-Remaining"] == str(remaining - 1)


def test_a_replay_of_a_large_stored_decision_costs_more(still_app, starter, sample_request):
    client = still_app.test_client()
    wide = {**sample_request, "context": {**sample_request["context"],
                                          "inputs": {**sample_request["context"]["inputs"],
                                                     **{f"f{i}": i for i in range(4_000)}}}}
    stored = client.post("/api/decide", json=wide, headers=starter).json
    request_bytes = len(json.dumps(wide, separators=(",", ":")))
    replay = client.post(f"/api/decision/{stored['decision_id']}/replay", headers=starter)
    assert replay.status_code == 200, replay.json
    assert int(replay.headers["X-RateLimit-Cost"]) >= 1 + request_bytes // 16_384 >= 3
    verify = client.get(f"/api/decision/{stored['decision_id']}/verify", headers=starter)
    assert int(verify.headers["X-RateLimit-Cost"]) >= 1 + 4 * (request_bytes // 16_384)


def test_decides_keep_their_own_window_when_reports_spent_the_cost_window(still_app, starter, decided,
                                                                          sample_request):
    client = still_app.test_client()
    report = f"/api/decision/policies/{decided['policy_id']}/anomalies"
    assert client.get(report, headers=starter).status_code == 200
    assert client.get(report, headers=starter).status_code == 200
    assert client.get(report, headers=starter).status_code == 429  # 3 × 21 > 60
    for i in range(19):  # the fixture's decide was the first of 20
        response = client.post("/api/decide", json=sample_request, headers=starter)
        assert response.status_code == 200, (i, response.json)
        assert response.headers["X-RateLimit-Limit"] == "20"
    assert client.post("/api/decide", json=sample_request, headers=starter).status_code == 429
    # and the reverse: with the decide window spent, a replay still has its cost units
    replay = client.post(f"/api/decision/{decided['decision_id']}/replay", headers=starter)
    assert replay.status_code == 200 and replay.headers["X-RateLimit-Remaining"] == str(60 - 42 - 1)


def test_another_key_has_its_own_cost_window(still_app, starter, decided, issue_key):
    client = still_app.test_client()
    report = f"/api/decision/policies/{decided['policy_id']}/effectiveness"
    for _ in range(2):
        client.get(report, headers=starter)
    assert client.get(report, headers=starter).status_code == 429
    other = {"x-api-key": issue_key(plan="starter", rate_limit=None)["api_key"]}
    assert client.get(report, headers=other).status_code == 200


@pytest.mark.parametrize("query", ["limit=0", "limit=10001", "limit=1.5", "limit=", "bogus=1"])
def test_a_bad_report_query_is_refused_before_the_charge(still_app, starter, decided, query):
    client = still_app.test_client()
    url = f"/api/decision/policies/{decided['policy_id']}/effectiveness"
    refused = client.get(f"{url}?{query}", headers=starter)
    assert refused.status_code == 400 and refused.json["error"] == "REQUEST_INVALID"
    assert "X-RateLimit-Cost" not in refused.headers
    assert client.get(url, headers=starter).headers["X-RateLimit-Remaining"] == str(60 - 21)


@pytest.mark.parametrize("url", ["/api/decision/chains/{chain}?limit=1001",
                                 "/api/decision/{decision}/packet?execution_limit=5000",
                                 "/api/decision/{decision}/packet?include_intelligence=maybe",
                                 "/api/policy-alerts?limit=1", "/api/policy-alerts?policy_id=" + "x" * 121])
def test_bad_chain_packet_and_alert_queries_are_refused_before_the_charge(still_app, starter, decided, url):
    client = still_app.test_client()
    url = url.format(chain=decided["audit_chain"]["chain_id"], decision=decided["decision_id"])
    refused = client.get(url, headers=starter)
    assert refused.status_code == 400 and refused.json["error"] == "REQUEST_INVALID"
    replay = client.post(f"/api/decision/{decided['decision_id']}/replay", headers=starter)
    assert replay.headers["X-RateLimit-Remaining"] == str(60 - 1)


def test_an_oversized_declared_body_is_413_before_the_charge(still_app, starter, decided):
    client = still_app.test_client()
    url = f"/api/decision/{decided['decision_id']}/diff"
    big = b'{"input":{"x":"' + b"a" * 1_048_600 + b'"}}'
    refused = client.post(url, data=big, headers={**starter, "Content-Type": "application/json"})
    assert refused.status_code == 413 and refused.json["error"] == "REQUEST_TOO_LARGE"
    assert client.post(url, headers=starter).headers["X-RateLimit-Remaining"] == str(60 - 1)


def test_a_larger_key_rate_scales_its_cost_window(still_app, issue_key, decided):
    key = {"x-api-key": issue_key(plan="starter", rate_limit=40)["api_key"]}
    response = still_app.test_client().post(f"/api/decision/{decided['decision_id']}/replay", headers=key)
    assert response.status_code == 200  # a key of the same scope
    assert response.headers["X-RateLimit-Limit"] == "120"  # twice the plan's rate: twice its cost units


def test_a_limiter_outage_is_503_and_nothing_runs(still_app, starter, decided):
    class Down:
        backend = "down"

        def hit(self, *args, **kwargs):
            raise GateError("RATE_LIMITER_UNAVAILABLE", "the rate limiter backend is unavailable")

    still_app.extensions["gate"].limiter = Down()
    client = still_app.test_client()
    for method, url, body, _ in _routes(decided).values():
        response = _call(client, method, url, body, starter)
        assert response.status_code == 503, url
        assert response.json["error"] == "RATE_LIMITER_UNAVAILABLE" and response.json["c"] == "unclear"


def test_gate_plans_cost_limit_is_read_and_defaults_to_three_units_per_decide(gate_env):
    from gate.settings import Settings, SettingsError

    plans = Settings.from_env({**gate_env, "GATE_PLANS": json.dumps({
        "pilot": {"rate_limit": 5, "monthly_cap": 1},
        "heavy": {"rate_limit": 5, "monthly_cap": 1, "cost_limit": 500}})}).plans
    assert plans["pilot"]["cost_limit"] == 15 and plans["heavy"]["cost_limit"] == 500
    assert plans["starter"]["cost_limit"] == STARTER_UNITS
    for bad in ('{"x": {"rate_limit": 5, "monthly_cap": 1, "cost_limit": -1}}',
                '{"x": {"rate_limit": 5, "monthly_cap": 1, "cost_limit": "lots"}}'):
        with pytest.raises(SettingsError):
            Settings.from_env({**gate_env, "GATE_PLANS": bad})


def test_the_cost_window_is_shared_by_workers_through_redis(gate_env, clock, starter, decided):
    from gate.settings import Settings
    from gate_cli.served_app import create_app

    _redis_or_skip()
    workers = [create_app(Settings.from_env({**gate_env, "GATE_REDIS_URL": REDIS_URL}), clock=clock) for _ in range(2)]
    try:
        first, second = (worker.test_client() for worker in workers)
        report = f"/api/decision/policies/{decided['policy_id']}/effectiveness"
        assert first.get(report, headers=starter).status_code == 200
        assert second.get(report, headers=starter).headers["X-RateLimit-Remaining"] == str(60 - 42)
        refused = first.get(report, headers=starter)
        assert refused.status_code == 429 and refused.headers["X-RateLimit-Remaining"] == str(60 - 42)
    finally:
        for worker in workers:
            worker.extensions["gate"].ledger.dispose()


# ----------------------------------------------------------------------------- the limiters


def _redis_or_skip() -> str:
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except (redis.RedisError, OSError):
        pytest.skip("Redis does not answer at " + REDIS_URL)
    return REDIS_URL


def _hammer(limiters, weights, limit: int) -> list:
    now = 1_800_000_000_000
    with ThreadPoolExecutor(max_workers=16) as pool:
        return list(pool.map(lambda i: (weights[i], limiters[i % len(limiters)].hit("key", limit, now, weights[i])),
                             range(len(weights))))


def test_redis_weighted_hits_are_atomic_across_threads_and_workers():
    url = _redis_or_skip()
    prefix = f"gate:test:{secrets.token_hex(6)}:"
    workers = [RedisRateLimiter(url, prefix=prefix) for _ in range(4)]  # four workers, one Redis
    results = _hammer(workers, [3] * 80, limit=100)
    allowed = [state for _, state in results if state.allowed]
    assert len(allowed) == 33  # exactly floor(100 / 3): never one more, never one fewer
    assert sorted(state.remaining for state in allowed) == list(range(1, 100, 3))
    assert all(state.remaining == 1 and state.retry_after >= 1 for _, state in results if not state.allowed)
    import redis

    names = list(redis.Redis.from_url(url).scan_iter(prefix + "*"))
    assert len(names) == 1 and int(redis.Redis.from_url(url).get(names[0])) == 99


def test_redis_mixed_weights_never_overshoot():
    url = _redis_or_skip()
    prefix = f"gate:test:{secrets.token_hex(6)}:"
    workers = [RedisRateLimiter(url, prefix=prefix) for _ in range(3)]
    weights = [1, 7, 2, 13, 5] * 20
    results = _hammer(workers, weights, limit=120)
    spent = sum(weight for weight, state in results if state.allowed)
    assert 0 < spent <= 120
    import redis

    names = list(redis.Redis.from_url(url).scan_iter(prefix + "*"))
    assert int(redis.Redis.from_url(url).get(names[0])) == spent  # every charge counted once, refusals never


def test_memory_weighted_hits_are_exact_under_threads():
    results = _hammer([MemoryRateLimiter()], [3] * 80, limit=100)
    assert sum(1 for _, state in results if state.allowed) == 33


@pytest.mark.parametrize("weight", [0, -1, 1.5, True])
def test_a_weight_is_a_whole_number_of_at_least_one(weight):
    with pytest.raises(ValueError):
        MemoryRateLimiter().hit("key", 10, 0, weight)


def test_openapi_and_docs_json_document_the_charge(still_app):
    client = still_app.test_client()
    paths = client.get("/openapi.json").json["paths"]
    charged = [("post", "/api/decision/{decision_id}/replay"), ("post", "/api/decision/{decision_id}/diff"),
               ("post", "/api/decision/{decision_id}/counterfactuals"), ("get", "/api/decision/{decision_id}/verify"),
               ("post", "/api/decision/{decision_id}/verify"), ("get", "/api/decision/{decision_id}/packet"),
               ("get", "/api/decision/chains/{chain_id}"), ("get", "/api/policy-alerts")]
    charged += [("get", f"/api/decision/policies/{{policy_id}}/{kind}")
                for kind in ("effectiveness", "confidence", "anomalies", "benchmarks")]
    for method, path in charged:
        operation = paths[path][method]
        assert operation["responses"]["429"]["x-error-codes"] == ["SVC_API_RATE_LIMITED"], path
        assert "RATE_LIMITER_UNAVAILABLE" in operation["responses"]["503"]["x-error-codes"], path
        ok = operation["responses"]["200"]
        assert {"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Cost", "Retry-After"} <= set(ok["headers"])
    assert "429" not in paths["/api/decision/{decision_id}"]["get"]["responses"]  # a plain read is not charged
    limits = client.get("/docs.json").json["limits"]["cost_limit"]
    assert limits["units_per_minute"] == {"starter": 60, "growth": 360, "scale": 3600}
    assert "separate from the decide window" in limits["window"]


def test_a_chunked_body_is_weighed_as_the_largest_body(still_app, starter, decided):
    import io

    response = still_app.test_client().post(
        f"/api/decision/{decided['decision_id']}/diff", input_stream=io.BytesIO(b"{}"),
        headers={**starter, "Content-Type": "application/json", "Transfer-Encoding": "chunked"})
    assert response.status_code == 200, response.json
    assert response.headers["X-RateLimit-Cost"] == str(STARTER_UNITS)  # 1 + 128, at most the window


def test_redis_limiter_survives_a_flushed_script_and_a_killed_connection():
    """Each serving thread keeps its own connection and sends EVALSHA on it: a Redis that lost the
    script (SCRIPT FLUSH, a restart) gets it again, and a killed connection fails that one hit
    closed (503), after which the next hit opens a new connection; every charge counts once."""
    import redis

    url = _redis_or_skip()
    prefix = f"gate:test:{secrets.token_hex(6)}:"
    limiter = RedisRateLimiter(url, prefix=prefix)
    admin = redis.Redis.from_url(url)
    now = 1_800_000_000_000
    assert limiter.hit("key", 10, now).remaining == 9
    admin.script_flush()
    assert limiter.hit("key", 10, now).remaining == 8  # NOSCRIPT: loaded again, charged once
    connection = limiter._local.connection  # white box: this thread's connection, to kill it
    connection.send_command("CLIENT", "ID")
    admin.client_kill_filter(_id=connection.read_response())
    with pytest.raises(GateError) as refused:
        limiter.hit("key", 10, now)
    assert refused.value.code == "RATE_LIMITER_UNAVAILABLE"
    assert limiter.hit("key", 10, now).remaining == 7  # a new connection; the failed hit charged nothing
    names = list(admin.scan_iter(prefix + "*"))
    assert len(names) == 1 and int(admin.get(names[0])) == 3


def test_redis_limiter_recovers_after_more_failures_than_a_pool_holds():
    """While Redis cannot be reached every hit fails closed, each on a new connection; once it is
    back the next hit succeeds, however many failed before (more than redis-py's pool of 100
    would have counted: such connections are outside it)."""
    from tests.server.proxy import Forwarder

    url = urlsplit(_redis_or_skip())
    forwarder = Forwarder(url.port or 6379).up()
    try:
        limiter = RedisRateLimiter(url._replace(netloc=f"127.0.0.1:{forwarder.port}").geturl(),
                                   prefix=f"gate:test:{secrets.token_hex(6)}:")
        now = 1_800_000_000_000
        assert limiter.hit("key", 1000, now).remaining == 999
        forwarder.down()
        for _ in range(120):
            with pytest.raises(GateError):
                limiter.hit("key", 1000, now)
        forwarder.up()
        assert limiter.hit("key", 1000, now).remaining == 998
    finally:
        forwarder.down()


def test_a_refusal_a_charged_route_raises_carries_its_rate_headers(still_app, starter):
    """The routes raise their refusals and the app's one handler answers them (api.errors.refusal):
    a charged read refused by its service, and a refused decide, still carry the key's window."""
    client = still_app.test_client()
    missing = client.get("/api/holds/dec_missing", headers=starter)
    assert (missing.status_code, missing.json["error"], missing.json["c"]) == (404, "HOLD_NOT_FOUND", "unclear")
    assert missing.headers["X-RateLimit-Limit"] == str(STARTER_UNITS) and missing.headers["X-RateLimit-Cost"] == "2"
    bad = client.post("/api/decide", data="{", content_type="application/json", headers=starter)
    assert (bad.status_code, bad.json["error"]) == (400, "JSON_INVALID")
    assert bad.headers["X-RateLimit-Limit"] == "20" and "X-RateLimit-Remaining" in bad.headers
    assert "X-RateLimit-Limit" not in client.get("/api/holds/dec_missing").headers  # 401 before any charge
