"""A created record's full answer is its stored text, encoded once by the seal (issue 23), and
the same bytes the encoder of every other answer writes; the other views and replays are
unchanged."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from api.jsonio import dumps
from gate.ledger.tables import decisions

pytestmark = pytest.mark.usefixtures("backend")


def _stored_text(app, decision_id: str) -> str:
    with app.extensions["gate"].ledger.engine.connect() as connection:
        return connection.execute(select(decisions.c.record_json)
                                  .where(decisions.c.decision_id == decision_id)).scalar_one()


@pytest.mark.parametrize("idempotency_key", [None, "bytes-1"])
def test_the_full_answer_is_the_stored_text(app, client, api_key, sample_request, idempotency_key):
    headers = {"x-api-key": api_key, **({"x-idempotency-key": idempotency_key} if idempotency_key else {})}
    created = client.post("/api/decide", json=sample_request, headers=headers)
    assert created.status_code == 200 and created.headers["x-idempotency-status"] == "created"
    text = created.get_data(as_text=True)
    assert text == _stored_text(app, created.json["decision_id"])
    assert text == dumps(json.loads(text))  # what json_response would have written
    assert created.headers["Content-Type"] == "application/json"
    if idempotency_key:
        replayed = client.post("/api/decide", json=sample_request, headers=headers)
        assert replayed.headers["x-idempotency-status"] == "replayed"
        assert replayed.get_data(as_text=True) == text


def test_the_other_views_are_projections(client, api_key, sample_request):
    for view in ("minimal", "standard"):
        answer = client.post("/api/decide", json={**sample_request, "response_view": view},
                             headers={"x-api-key": api_key})
        assert answer.status_code == 200
        assert answer.get_data(as_text=True) == dumps(answer.json)
        assert "integrity" not in answer.json  # a projection, not the stored record
