"""Issue 6 defects 1, 2 and 6 through HTTP: long keys, many keys and deep nesting.

Before the fix a 250,000-letter key stalled a worker for over 30 s (quadratic collation), ten
requests of 4,500 distinct keys grew a worker by hundreds of MB (unbounded key caches) and
nesting between 486 and 989 levels crashed the canonical writer with RecursionError (500).
"""

from __future__ import annotations

import json
import random
import string
import sys
import threading

import pytest

from gate.protocol import canonical
from gate.protocol.canonical import MAX_DOCUMENT_DEPTH, MAX_JSON_DEPTH

RECEIPT_PATHS = ("execution", "outcome", "crm-sync")


@pytest.fixture
def record(client, api_key, sample_request):
    response = client.post("/api/decide", json=sample_request, headers={"x-api-key": api_key})
    assert response.status_code == 200, response.json
    return response.json


DEEP = "__deep__"


def nested(depth: int) -> str:
    """A placeholder replaced by `depth` nested arrays when the body is written (`send`)."""
    return f"{DEEP}{depth}"


def send(client, url: str, body, headers=None):
    """POST `body` as JSON text, expanding `nested` placeholders (json.dumps cannot nest 5,000)."""
    text = json.dumps(body)
    while DEEP in text:
        start = text.index('"' + DEEP)
        end = text.index('"', start + 1)
        depth = int(text[start + 1 + len(DEEP):end])
        text = text[:start] + "[" * depth + "]" * depth + text[end + 1:]
    return client.post(url, data=text, content_type="application/json", headers=headers or {})


def answer_within(seconds, call):
    """Run `call` in a thread; fail (not hang) if it has not answered in `seconds`."""
    result: list = []
    thread = threading.Thread(target=lambda: result.append(call()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert result, f"no answer within {seconds} s"
    return result[0]


def test_a_250000_letter_key_is_hashed_in_linear_time(client, record):
    # A guard against the quadratic collation (it took > 30 s), not a benchmark: see
    # benchmarks/bench_canonical.py for figures.
    tampered = dict(record, evaluation={"a" * 250_000: 1, **record["evaluation"]})
    response = answer_within(20, lambda: client.post("/api/decision/verify", json={"record": tampered}))
    assert response.status_code == 200
    assert response.json["verified"] is False and response.json["failed_checks"]
    combining = dict(record, evaluation={"a" + "\u0301\u0316" * 40_000: 1, "l\u00b7" * 40_000: 2})
    response = answer_within(20, lambda: client.post("/api/decision/verify", json={"record": combining}))
    assert response.status_code == 200


def test_many_distinct_keys_do_not_grow_the_key_caches(client, record):
    rng = random.Random(3)
    for _ in range(10):
        keys = {"".join(rng.choice(string.ascii_letters) for _ in range(200)): 1 for _ in range(4500)}
        response = client.post("/api/decision/verify", json={"record": dict(record, evaluation=keys)})
        assert response.status_code == 200
    held = sum(sys.getsizeof(key) for key in canonical._SORT_KEY_CACHE)
    # An array-index key (cached by another test of this worker) holds an int, not weight strings.
    held += sum(sys.getsizeof(part) for value in canonical._SORT_KEY_CACHE.values()
                if isinstance(value[1], tuple) for part in value[1])
    held += sum(sys.getsizeof(key) + sys.getsizeof(order) for key, order in canonical._ORDER_CACHE.items())
    assert held < 8 * 1024 * 1024  # before the fix: every key and its sort key, about 1 GB


@pytest.mark.usefixtures("backend")
@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 486, 600, 989, 990, 5000])
def test_too_deep_bodies_are_a_400_on_every_write(client, api_key, record, sample_request, depth):
    headers = {"x-api-key": api_key}
    deep = dict(sample_request, context={**sample_request["context"],
                                         "inputs": {**sample_request["context"]["inputs"], "deep": nested(depth)}})
    responses = [send(client, "/api/decide", deep, headers)]
    for index, path in enumerate(RECEIPT_PATHS):
        responses.append(send(client, f"/api/decision/{record['decision_id']}/{path}", {"deep": nested(depth)},
                              {**headers, "x-idempotency-key": f"deep-{index}"}))
    for response in responses:
        assert response.status_code == 400, response.json
        assert response.json["error"] == "JSON_TOO_DEEP" and response.json["c"] == "unclear"


@pytest.mark.parametrize("depth", [MAX_DOCUMENT_DEPTH + 1, 486, 600, 989, 5000])
def test_too_deep_documents_are_a_400_on_every_verify(client, api_key, record, depth):
    evaluation = dict(record["evaluation"], deep=nested(depth))
    posts = [
        send(client, "/api/decision/verify", {"record": dict(record, evaluation=evaluation)}),
        send(client, f"/api/decision/{record['decision_id']}/verify", {"record": dict(record, evaluation=evaluation)},
             {"x-api-key": api_key}),
        send(client, "/api/decision/packet/verify", {"packet": {"deep": nested(depth)}}),
    ]
    for response in posts:
        assert response.status_code == 400, response.json
        assert response.json["error"] == "JSON_TOO_DEEP"


@pytest.mark.usefixtures("backend")
def test_the_deepest_accepted_body_round_trips_through_packet_verify(client, api_key, sample_request):
    headers = {"x-api-key": api_key}
    inputs = dict(sample_request["context"]["inputs"], deep=nested(MAX_JSON_DEPTH - 3))  # body → context → inputs
    body = dict(sample_request, context={**sample_request["context"], "inputs": inputs})
    decided = send(client, "/api/decide", body, headers)
    assert decided.status_code == 200, decided.json
    decision_id = decided.json["decision_id"]
    packet = client.get(f"/api/decision/{decision_id}/packet?include_input=true", headers=headers)
    assert packet.status_code == 200, packet.json
    verified = client.post("/api/decision/packet/verify", json={"packet": packet.json})
    assert verified.status_code == 200, verified.json
    assert verified.json["verified"] is True, verified.json
    hosted = client.get(f"/api/decision/{decision_id}/verify", headers=headers)
    assert hosted.json["verified"] is True
