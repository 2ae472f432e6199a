"""Issue 67, item 3, on SQLite and PostgreSQL: a scope's facts kept for a set time. Decisions made
ten days ago (a clock set back) and one made now; the scope keeps facts 7 days (its privacy
setting, over a gate default of ten years); `gate dispatch` (a process of its own, its
`facts-retention` worker) removes the old decisions' requests and record bodies from the ledger and
the outbox. Then no removed value is left (decoded rows, and the SQLite file's bytes after VACUUM),
every chain, record and kept copy still verifies, a replay says the inputs were removed and by what,
and the recent decision is whole."""

from __future__ import annotations

import copy
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from gate.clock import FixedClock
from gate.ledger import Ledger
from gate.ledger.tables import decision_removals, decisions, event_outbox, holds
from tests.events.test_webhooks import LOOPBACK
from tests.privacy.support import CUSTOMER, EMAIL, OTHER_CUSTOMER, customer_request, privacy

GATE = str(Path(sys.executable).with_name("gate"))
OTHER_EMAIL = "bob@example.org"
TEN_DAYS_AGO = datetime.now(UTC) - timedelta(days=10)


@pytest.fixture
def admin(issue_key):
    return {"x-api-key": issue_key(permissions="decide,admin,approve")["api_key"]}


def _old_and_new(make_app, admin) -> tuple[list[dict], dict, object]:
    """Two decisions ten days ago (for CUSTOMER), one now (OTHER_CUSTOMER),
    in a scope that mirrors every decision into the outbox and keeps facts 7 days."""
    old = make_app(env=LOOPBACK, clock=FixedClock(TEN_DAYS_AGO, step_ms=5))
    client = old.test_client()
    put = client.put("/api/privacy", json={**privacy(), "retention": {"facts_days": 7}}, headers=admin)
    assert put.status_code == 200, put.get_json()
    assert put.get_json()["privacy"]["retention"] == {"facts_days": 7}
    on = client.put("/api/events/settings", json={"decision_created": True, "anomaly_every_seconds": None},
                    headers=admin)
    assert on.status_code == 200, on.get_json()
    records = []
    for body in (customer_request(), customer_request()):
        answer = client.post("/api/decide", json=body, headers=admin)
        assert answer.status_code == 200, answer.get_json()
        records.append(answer.get_json())
    new = make_app(env=LOOPBACK)
    answer = new.test_client().post("/api/decide", json=customer_request(OTHER_CUSTOMER, OTHER_EMAIL), headers=admin)
    assert answer.status_code == 200, answer.get_json()
    return records, answer.get_json(), new


def _texts(url: str) -> list[str]:
    """Every stored request, record, hold and outbox event, decoded (the at-rest encoding read back)."""
    ledger = Ledger(url)
    try:
        with ledger.read() as connection:
            found = [t for row in connection.execute(select(decisions.c.request_json, decisions.c.record_json))
                     for t in row]
            found += [t for row in connection.execute(select(holds.c.facts_json, holds.c.request_json)) for t in row
                      if t]
            found += [row[0] for row in connection.execute(select(event_outbox.c.event_json))]
        return found
    finally:
        ledger.dispose()


def _removed(url: str) -> list[dict]:
    ledger = Ledger(url)
    try:
        with ledger.read() as connection:
            return [dict(row) for row in connection.execute(select(decision_removals)).mappings()]
    finally:
        ledger.dispose()


def _run_dispatch(env: dict, log: Path, url: str, expected: int) -> list[dict]:
    """`gate dispatch` until `expected` removals are filed (its retention runs at start), then SIGTERM."""
    with log.open("wb") as out:
        process = subprocess.Popen([GATE, "dispatch"], env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while len(found := _removed(url)) < expected and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, log.read_text()
    return found


def test_retention_removes_old_inputs_everywhere_and_every_proof_still_verifies(make_app, admin, gate_env,
                                                                                 database_url, tmp_path, backend):
    records, recent, app = _old_and_new(make_app, admin)
    before = "\n".join(_texts(database_url))
    assert EMAIL in before and CUSTOMER in before  # what is about to go is there (the search can fail)
    env = {**gate_env, "GATE_FACTS_RETENTION_DAYS": "3650", "GATE_EVENTS_INTERVAL_MS": "200"}
    found = _run_dispatch(env, tmp_path / "dispatch.log", database_url, 2)
    assert sorted(row["decision_id"] for row in found) == sorted(r["decision_id"] for r in records)
    assert {(row["cause"], row["cause_ref"]) for row in found} == {("retention", "7 days")}

    after = "\n".join(_texts(database_url))
    assert EMAIL not in after and CUSTOMER not in after  # requests, records, hold facts, outbox events
    assert OTHER_EMAIL in after and OTHER_CUSTOMER in after  # the recent decision is whole
    if backend == "sqlite":
        path = database_url.removeprefix("sqlite:///")
        connection = sqlite3.connect(path)
        connection.execute("VACUUM")
        connection.close()
        raw = Path(path).read_bytes()
        assert EMAIL.encode() not in raw and CUSTOMER.encode() not in raw

    client = app.test_client()
    old = records[0]
    stored = client.get(f"/api/decision/{old['decision_id']}", headers=admin).get_json()
    assert stored["inputs_removed"]["cause"] == "retention" and stored["inputs_removed"]["ref"] == "7 days"
    assert "action_binding" not in stored and stored["record_hash"] == old["record_hash"]
    assert stored["audit_chain"] == old["audit_chain"]

    verified = client.get(f"/api/decision/{old['decision_id']}/verify", headers=admin).get_json()
    assert verified["verified"] is True, verified
    assert verified["inputs_removed"]["cause"] == "retention" and verified["checks"]["record_hash"] is None
    kept = client.post(f"/api/decision/{old['decision_id']}/verify", json={"record": old}, headers=admin).get_json()
    assert kept["verified"] is True and kept["checks"]["matches_ledger"] is True, kept  # the caller's copy
    forged = {**old, "action_binding": {**old["action_binding"], "subject": "cus_other"}}
    refused = client.post(f"/api/decision/{old['decision_id']}/verify", json={"record": forged}, headers=admin)
    assert refused.get_json()["verified"] is False

    chain = client.get(f"/api/decision/chains/{old['audit_chain']['chain_id']}", headers=admin).get_json()
    assert chain["verification"]["valid"] is True, chain["verification"]
    assert chain["chain_size"] == 3
    packet = client.get(f"/api/decision/{old['decision_id']}/packet", headers=admin).get_json()
    assert EMAIL not in json.dumps(packet) and packet["decision_record"]["inputs_removed"]["cause"] == "retention"
    checked = client.post("/api/decision/packet/verify", json={"packet": packet}).get_json()
    assert checked["verified"] is True and checked["checks"]["audit_chain.inclusion_proof"] is True, checked
    assert checked["record"]["record_kind"] == "removed" and checked["record"]["checks"]["record_hash"] is None
    assert "inputs were removed by retention (7 days" in checked["details"]["record"][0]
    tampered = {**packet, "decision_record": {**packet["decision_record"], "verdict": "no"}}
    assert client.post("/api/decision/packet/verify", json={"packet": tampered}).get_json()["verified"] is False

    replay = client.post(f"/api/decision/{old['decision_id']}/replay", json={}, headers=admin)
    assert replay.status_code == 410, replay.get_json()
    assert replay.get_json()["error"] == "DECISION_INPUTS_REMOVED"
    assert replay.get_json()["removed"]["cause"] == "retention"
    whole = client.post(f"/api/decision/{recent['decision_id']}/replay", json={}, headers=admin)
    assert whole.status_code == 200, whole.get_json()
    assert client.get(f"/api/decision/{recent['decision_id']}/verify", headers=admin).get_json()["verified"] is True
    _dry_run_counts_the_removed_apart(gate_env, tmp_path)


def _dry_run_counts_the_removed_apart(env: dict, tmp_path: Path) -> None:
    """`gate dry-run` over the scope's whole history, under a draft that blocks every discount
    above 10%: all three decisions (15%) would flip; the two removed ones are said apart, by
    retention, and only the recent one is counted as changed."""
    draft = copy.deepcopy(customer_request()["rulebook"])
    draft["version"] = "2099-01-01"
    draft["rules"][0]["condition"]["value"] = 10
    (tmp_path / "draft.json").write_text(json.dumps(draft))
    run = subprocess.run([GATE, "dry-run", "--rulebook-id", draft["rulebook_id"], "--draft", str(tmp_path / "draft.json"),
                          "--scope", "tenant_a", "--baseline", "history", "--out", str(tmp_path / "dry"), "--json"],
                         env={**os.environ, **env}, capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr
    result = json.loads((tmp_path / "dry" / "migration.json").read_text())["dry_run"]
    assert result["decisions_total"] == 3 and result["decisions_unreplayable"] == 2
    assert result["inputs_removed"] == {"count": 2, "by": {"retention": 2}}
    assert result["decisions_evaluated"] == 1 and result["decisions_changed"] == 1
    assert "Inputs removed (never counted as changed) | 2 (2 by retention)" in (tmp_path / "dry" / "report.md").read_text()


def test_a_removal_is_done_once_and_never_reaches_another_scope(make_app, admin, issue_key, gate_env, backend):
    """The one removal home (`InputRemoval.remove`): a second removal of the same decision changes
    nothing (its first cause stays), and another scope's decision named in the call is untouched."""
    from gate.services.removal import InputRemoval

    app = make_app(env=LOOPBACK)
    client = app.test_client()
    mine = client.post("/api/decide", json=customer_request(), headers=admin).get_json()
    other_key = {"x-api-key": issue_key(scope="tenant_b")["api_key"]}
    theirs = client.post("/api/decide", json=customer_request(), headers=other_key).get_json()
    ledger = app.extensions["gate"].ledger
    removal = InputRemoval(ledger, FixedClock(datetime.now(UTC)))
    first = removal.cause("retention", "1 days")
    assert removal.remove("tenant_a", [mine["decision_id"], theirs["decision_id"]], first) == [mine["decision_id"]]
    assert removal.remove("tenant_a", [mine["decision_id"]], removal.cause("erasure", "event 9")) == []
    assert client.get(f"/api/decision/{mine['decision_id']}", headers=admin).get_json()["inputs_removed"]["ref"] \
        == "1 days"
    assert "inputs_removed" not in client.get(f"/api/decision/{theirs['decision_id']}", headers=other_key).get_json()
    assert json.dumps(client.get(f"/api/decision/{theirs['decision_id']}/verify",
                                 headers=other_key).get_json()["verified"]) == "true"



def test_the_gate_default_applies_where_the_scope_states_none_and_an_open_hold_keeps_its_facts(make_app, admin,
                                                                                                 backend):
    """GATE_FACTS_RETENTION_DAYS where the scope's setting is null; a held decision past it keeps its
    facts while its hold is open (its reviewers still read them)."""
    old = make_app(env=LOOPBACK, clock=FixedClock(TEN_DAYS_AGO, step_ms=5))
    client = old.test_client()
    approved = client.post("/api/decide", json=customer_request(), headers=admin).get_json()
    held = client.post("/api/decide", json=customer_request(OTHER_CUSTOMER, OTHER_EMAIL, held=True), headers=admin)
    assert held.get_json()["verdict"] == "review", held.get_json()
    app = make_app(env={**LOOPBACK, "GATE_FACTS_RETENTION_DAYS": "5"})
    runtime = app.extensions["gate"]
    assert runtime.privacy.settings("tenant_a").facts_days is None
    worker = next(w for w in runtime.dispatcher.workers if w.name == "facts-retention")  # the dispatcher's own
    retention = worker.step.__self__
    assert retention.days("tenant_a") == 5 and worker.interval == 60.0
    assert worker.run_once() and worker.passes == 1
    assert len(_removed(runtime.ledger.engine.url.render_as_string(hide_password=False))) == 1
    read = app.test_client()
    assert read.get(f"/api/decision/{approved['decision_id']}", headers=admin).get_json()["inputs_removed"]["ref"] \
        == "5 days"
    hold = read.get(f"/api/holds/{held.get_json()['decision_id']}", headers=admin).get_json()
    assert OTHER_EMAIL in json.dumps(hold) or hold["hold"]["facts"], hold  # open: kept
    assert "inputs_removed" not in read.get(f"/api/decision/{held.get_json()['decision_id']}", headers=admin).get_json()
    assert retention.run() == 0  # nothing new past it, the open hold still kept
