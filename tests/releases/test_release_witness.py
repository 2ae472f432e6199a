"""Issue 52, defect 6 for the release chains and the governance chain: each event is witnessed in
the gate's checkpoint log (`GATE_CHECKPOINT_LOG`, the audit chain's and the hold chain's log), so
a writer of the database who deletes the newest release event (a halt, an activation) or the newest
policy change is refused by the next transition (409 `CHAIN_INTEGRITY_FAILED`, nothing written),
and a history the gate signed over the cut-back chain fails `gate verify --checkpoints` against a
witness's copy of the log (HTTP through the Flask app, `gate verify` as a subprocess)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from gate.chain.links import scope_hash
from gate.releases.governance import GOVERNANCE_ID
from tests.releases.support import ALL, Api, version


@pytest.fixture
def author(client, issue_key):
    return Api(client, issue_key(permissions=ALL)["api_key"])


def _gate(gate_env, *args: str) -> subprocess.CompletedProcess:
    environment = {**gate_env, "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PATH": os.environ.get("PATH", "")}
    return subprocess.run([sys.executable, "-m", "gate_cli.main", *args], capture_output=True, text=True,
                          env=environment, timeout=120, check=False)


def _log(gate_env) -> Path:
    return Path(gate_env["GATE_HOME"]) / "checkpoints.jsonl"


def _delete_newest(gate_env, rulebook_id: str) -> None:
    path = gate_env["GATE_DATABASE_URL"].removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        newest = db.execute("SELECT max(seq) FROM release_events WHERE rulebook_id = ?", (rulebook_id,)).fetchone()[0]
        db.execute("DELETE FROM release_events WHERE rulebook_id = ? AND seq = ?", (rulebook_id, newest))


def _released(author) -> None:
    for name, limit in (("v1", 20), ("v2", 10)):
        assert author.publish(version(name, approve_limit=limit)).status_code == 201
    assert author.act("activate", version="v1").status_code == 201
    assert author.act("activate", version="v2").status_code == 201
    patched = author.client.patch("/api/decision/release-policy", json={"refuse_superseded_inline": True},
                                  headers=author.headers())
    assert patched.status_code == 200, patched.get_json()


@pytest.mark.parametrize("cut", ["pricing_exception", GOVERNANCE_ID])
def test_a_cut_back_release_or_governance_chain_is_refused_and_fails_offline(author, gate_env, client, tmp_path,
                                                                             cut):
    _released(author)
    witness, keys, saved = tmp_path / "witness.jsonl", tmp_path / "keys.json", tmp_path / "history.json"
    witness.write_text(_log(gate_env).read_text() if _log(gate_env).exists() else "")
    keys.write_bytes(client.get("/api/decision/receipt-keys").get_data())
    _delete_newest(gate_env, cut)

    # The next transition (a move to the version not active after the cut) is refused, because its
    # own chain or the governance chain it is allowed under was cut back; so is a policy change then.
    moved = author.act("activate", version="v1" if cut == GOVERNANCE_ID else "v2", reason="after the cut")
    if cut == GOVERNANCE_ID:
        changed = author.client.patch("/api/decision/release-policy", json={"refuse_superseded_inline": True},
                                      headers=author.headers())
        assert changed.status_code == 409 and changed.get_json()["error"] == "CHAIN_INTEGRITY_FAILED"
    assert moved.status_code == 409, moved.get_json()
    assert moved.get_json()["error"] == "CHAIN_INTEGRITY_FAILED"
    assert moved.get_json()["failed_checks"] == ["checkpoint_log.size"]
    assert author.history().status_code == 409

    shutil.move(_log(gate_env), tmp_path / "moved.jsonl")  # a writer of the gate's files too
    history = author.history()
    assert history.status_code == 200
    saved.write_text(json.dumps(history.get_json()))
    alone = _gate(gate_env, "verify", str(saved), "--key-registry", str(keys))
    assert alone.returncode == 0, alone.stdout + alone.stderr  # what the history alone cannot show
    checked = _gate(gate_env, "verify", str(saved), "--checkpoints", str(witness), "--key-registry", str(keys))
    assert checked.returncode == 1, checked.stdout + checked.stderr
    from gate.chain.event_witness import governance_chain_id, release_chain_id  # (issue 52's module)

    hashed = scope_hash("tenant_a")
    chain = governance_chain_id(hashed) if cut == GOVERNANCE_ID else release_chain_id(hashed, cut)
    assert "checkpoint_log.size" in checked.stdout and chain in checked.stdout


def test_every_release_and_policy_event_is_witnessed_and_a_whole_history_verifies(author, gate_env, client,
                                                                                  tmp_path):
    from gate.chain.event_witness import governance_chain_id, release_chain_id  # (issue 52's module)

    _released(author)
    sizes: dict[str, list[int]] = {}
    for line in _log(gate_env).read_text().splitlines():
        entry = json.loads(line)
        sizes.setdefault(entry["chain_id"], []).append(entry["tree_size"])
    hashed = scope_hash("tenant_a")
    assert sizes[release_chain_id(hashed, "pricing_exception")] == [1, 2]
    assert sizes[governance_chain_id(hashed)] == [1]
    saved, keys = tmp_path / "history.json", tmp_path / "keys.json"
    saved.write_text(json.dumps(author.history().get_json()))
    keys.write_bytes(client.get("/api/decision/receipt-keys").get_data())
    checked = _gate(gate_env, "verify", str(saved), "--checkpoints", str(_log(gate_env)), "--key-registry", str(keys))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_hold_policy_and_event_settings_changes_are_witnessed_on_the_governance_chain(author, gate_env, client):
    # The hold policy and the event settings change through the governance chain (issue 52's one
    # governed-change service), so each of their events is checkpointed like a release-policy change,
    # and a chain cut back after it refuses the next change.
    from gate.chain.event_witness import governance_chain_id

    policy = client.get("/api/holds/policy", headers=author.headers()).get_json()["policy"]
    queues = {name: {**queue, "deadline_seconds": queue["deadline_seconds"] // 2}
              for name, queue in policy["queues"].items()}
    shorter = {**policy, "queues": queues}  # a shorter deadline: a strengthening, in force at once
    changed = client.put("/api/holds/policy", json=shorter, headers=author.headers())
    assert changed.status_code == 200 and changed.get_json()["event"] is not None, changed.get_json()
    settings = client.put("/api/events/settings", json={"decision_created": True, "anomaly_every_seconds": None},
                          headers=author.headers())
    assert settings.status_code == 200 and settings.get_json()["event"] is not None, settings.get_json()
    hashed = scope_hash("tenant_a")
    sizes = [json.loads(line)["tree_size"] for line in _log(gate_env).read_text().splitlines()
             if json.loads(line)["chain_id"] == governance_chain_id(hashed)]
    assert sizes == [1, 2]
    _delete_newest(gate_env, GOVERNANCE_ID)
    refused = client.put("/api/holds/policy", json=policy, headers=author.headers())
    assert refused.status_code == 409 and refused.get_json()["error"] == "CHAIN_INTEGRITY_FAILED"


def test_a_release_moved_on_the_workbench_is_witnessed_as_one_moved_through_the_api(gate_env, tmp_path):
    # `gate workbench` builds its store from the same settings (`build_store`): its Releases page's
    # moves are the release service's signed events, checkpointed into the same log, so a chain cut
    # back after them is refused on the next move there too (before, the store's release service
    # had no log: nothing was checkpointed and the cut went unseen).
    from gate.chain.event_witness import release_chain_id
    from gate.settings import Settings
    from gate_cli.workbench_cmd import build_store
    from workbench.app.access import Identity, Rights
    from workbench.app.state.releases import ReleasesState

    store = build_store(Settings.from_env(gate_env), str(tmp_path / "dataset"))
    try:
        for name, limit in (("v1", 20), ("v2", 10)):
            store.promote("tenant_a", version(name, approve_limit=limit), frozenset({"publish"}))
        alice = ReleasesState(store, Rights(Identity.password_user("alice"), lambda _scope: frozenset(
            {"author", "releaser"})), scope="tenant_a", rulebook_id="pricing_exception")
        alice.act("activate", version="v1")
        alice.act("activate", version="v2")
        assert alice.status["state"]["active"]["version"] == "v2", alice.message
        chain = release_chain_id(scope_hash("tenant_a"), "pricing_exception")
        entries = [json.loads(line) for line in _log(gate_env).read_text().splitlines()]
        assert [entry["tree_size"] for entry in entries if entry["chain_id"] == chain] == [1, 2]
        _delete_newest(gate_env, "pricing_exception")
        alice.act("activate", version="v2", reason="after the cut")
        assert "CHAIN_INTEGRITY_FAILED" in alice.message, alice.message
        assert len(store.releases.history("tenant_a", "pricing_exception")) == 1  # nothing written
    finally:
        store.ledger.dispose()
