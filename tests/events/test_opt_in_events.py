"""Opt-in events per scope (docs/events.md, "Opt-in events"): `decision.created` with the record as
stored, in the decide's own transaction (also in the group-commit writer's batches), only for scopes
that asked; scheduled anomaly reports announce each anomaly once until it clears, one process per run."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime

import pytest

from gate.ledger.outbox import Outbox
from gate.services.scope_events import ScopeEventService
from tests.holds.support import MovingClock, approved_request, held_request


@pytest.fixture
def keys(issue_key):
    return {"admin": issue_key(permissions="decide,admin")["api_key"],
            "caller": issue_key(permissions="decide")["api_key"],
            "other": issue_key(scope="tenant_b", permissions="decide,admin")["api_key"]}


def _settings(client, key, **body):
    return client.put("/api/events/settings", json={"decision_created": False, "anomaly_every_seconds": None, **body},
                      headers={"x-api-key": key})


def _events(app, scope, name):
    rows = Outbox(app.extensions["gate"].ledger).events_after(scope, 0, 10_000)
    return [json.loads(r["event_json"]) for r in rows if r["event_type"] == "dev.decision-gate." + name]


def test_decision_created_carries_the_record_as_stored_for_the_scopes_that_asked(make_app, keys):
    app = make_app(ledger_group_commit=True)  # as `gate serve` runs: decides share writer batches
    app.extensions["gate"].service.pipeline.mirror.ttl = 0
    client = app.test_client()
    answer = _settings(client, keys["admin"], decision_created=True)
    assert answer.status_code == 200 and answer.get_json()["settings"]["decision_created"] is True
    assert answer.get_json()["settings"]["updated_by"].startswith("key_")
    records = []

    def decide(body):
        records.append(app.test_client().post("/api/decide", json=body, headers={"x-api-key": keys["caller"]})
                       .get_json())
    threads = [threading.Thread(target=decide, args=(b,)) for b in [approved_request(), held_request()] * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    client.post("/api/decide", json=approved_request(), headers={"x-api-key": keys["other"]})
    events = _events(app, "tenant_a", "decision.created")
    assert sorted(e["data"]["decision_id"] for e in events) == sorted(r["decision_id"] for r in records)
    stored = {r["decision_id"]: r for r in records}
    for event in events:
        data = event["data"]
        assert data["record"] == stored[data["decision_id"]]  # the record exactly as answered, chain link included
        assert data["record_hash"] == data["record"]["record_hash"] and data["audit_chain"] is not None
    assert _events(app, "tenant_b", "decision.created") == []
    # opting out stops it
    _settings(client, keys["admin"], decision_created=False)
    client.post("/api/decide", json=approved_request(), headers={"x-api-key": keys["caller"]})
    assert len(_events(app, "tenant_a", "decision.created")) == len(records)


@pytest.mark.parametrize("body", [{"decision_created": "yes", "anomaly_every_seconds": None},
                                  {"decision_created": True}, {"decision_created": True, "anomaly_every_seconds": 5},
                                  {"decision_created": True, "anomaly_every_seconds": 1.5},
                                  {"decision_created": True, "anomaly_every_seconds": None, "x": 1}])
def test_bad_settings_are_refused_and_change_nothing(app, keys, body):
    client = app.test_client()
    answer = client.put("/api/events/settings", json=body, headers={"x-api-key": keys["admin"]})
    assert answer.status_code == 400 and answer.get_json()["error"] == "EVENT_SETTINGS_INVALID"
    assert client.get("/api/events/settings", headers={"x-api-key": keys["admin"]}).get_json()["settings"][
        "updated_at"] is None


def test_settings_need_admin(app, keys):
    answer = _settings(app.test_client(), keys["caller"], decision_created=True)
    assert answer.status_code == 403


class ScriptedReport:
    """The anomaly report's findings, run by run (what the schedule does with them is under test)."""

    def __init__(self, runs):
        self.runs, self.calls = list(runs), 0

    def __call__(self, scope):
        self.calls += 1
        return [{"alert_id": key, "source": "anomaly_engine", "kind": "failure_spike", "severity": "high",
                 "policy_id": "p"} for key in self.runs.pop(0)] + [{"alert_id": "source:x", "source": "other"}]


def test_each_anomaly_is_announced_once_until_it_clears_and_each_run_is_taken_once(make_app, keys):
    clock = MovingClock(datetime(2026, 11, 26, tzinfo=UTC))
    app = make_app(clock=clock)  # the clock of every service of the gate, its scope events' too
    ledger = app.extensions["gate"].ledger
    report = ScriptedReport([["a", "b"], ["a", "b"], ["b"], ["b", "a"]])
    service = ScopeEventService(ledger, clock, alerts=report)
    rival = ScopeEventService(ledger, clock, alerts=report)  # another serving process
    assert _settings(app.test_client(), keys["admin"], anomaly_every_seconds=300).status_code == 200
    for _ in range(4):
        assert service.run_due() + rival.run_due() == 1
        assert service.run_due() + rival.run_due() == 0  # not due again until the next time
        clock.advance(300)
    assert report.calls == 4
    detected = [e["data"]["alert_id"] for e in _events(app, "tenant_a", "anomaly.detected")]
    cleared = [e["data"]["alert_id"] for e in _events(app, "tenant_a", "anomaly.cleared")]
    assert detected == ["a", "b", "a"] and cleared == ["a"]
