"""Issue 52, defects 6 and 7, through the real interfaces: the hold chain is witnessed in the gate's
checkpoint log (`GATE_CHECKPOINT_LOG`), and a held decision's packet commits to its hold events.

Defect 6: a writer of the database deletes a hold's newest `hold_events` row (a deny) and sets the
hold back to `open`. The gate then refuses to write on that chain (a second reviewer's approval),
to serve its history or a packet of it (409 `CHAIN_INTEGRITY_FAILED`); a history or packet the gate
signed over the cut-back chain (its log moved away meanwhile, as a writer of both could) fails
`gate verify --checkpoints` against a witness's copy of the log, and hosted packet verify against
the gate's own log once it is back.

Defect 7: a packet with its `hold_events` member removed (or its newest event), `packet_hash`
recomputed, fails `gate verify` and hosted verify (`hold_commitment`).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from gate.protocol.canonical import sha256_hex
from tests.cli_in_process import gate_in_process
from tests.holds.support import Holds, held_request


@pytest.fixture
def people(client, issue_key):
    return {"caller": Holds(client, issue_key(permissions="decide")["api_key"]),
            "first": Holds(client, issue_key(permissions="decide,resolve")["api_key"]),
            "second": Holds(client, issue_key(permissions="decide,resolve")["api_key"])}


def _gate(gate_env, *args: str, process: bool = True) -> subprocess.CompletedProcess:
    """`gate ARGS` as a subprocess; `process=False` in process (tests.cli_in_process), for the
    repeated offline `gate verify` runs (its entry point runs as a subprocess once in this file)."""
    if not process:
        return gate_in_process(args, gate_env)
    environment = {**gate_env, "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PATH": os.environ.get("PATH", "")}
    return subprocess.run([sys.executable, "-m", "gate_cli.main", *args], capture_output=True, text=True,
                          env=environment, timeout=120, check=False)


def _rehash(packet: dict) -> dict:
    return {**packet, "packet_hash": sha256_hex({k: v for k, v in packet.items() if k != "packet_hash"})}


def _log(gate_env) -> Path:
    return Path(gate_env["GATE_HOME"]) / "checkpoints.jsonl"


def _delete_newest_and_reopen(gate_env, decision_id: str) -> None:
    """The attack: the newest hold event (the deny) deleted, the hold set back to open."""
    path = gate_env["GATE_DATABASE_URL"].removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        newest = db.execute("SELECT max(seq) FROM hold_events").fetchone()[0]
        assert db.execute("SELECT action, decision_id FROM hold_events WHERE seq = ?", (newest,)).fetchone() \
            == ("vote", decision_id)
        db.execute("DELETE FROM hold_events WHERE seq = ?", (newest,))
        db.execute("UPDATE holds SET state = 'open', resolved_at = NULL, resolved_by = NULL, resolution_seq = NULL, "
                   "claimed_by = NULL, claimed_at = NULL "
                   "WHERE decision_id = ?", (decision_id,))


def _denied_hold(people) -> str:
    decision_id = people["caller"].decide(held_request()).get_json()["decision_id"]
    assert people["first"].act(decision_id, "claim").status_code == 201
    assert people["first"].resolve(decision_id, "deny", reason_code="TOO_THIN").status_code == 201
    return decision_id


def test_every_hold_event_is_witnessed_in_the_gates_checkpoint_log(people, gate_env, client, tmp_path):
    decision_id = _denied_hold(people)
    lines = [json.loads(line) for line in _log(gate_env).read_text().splitlines()]
    hold = [line for line in lines if line["chain_id"].startswith("hold_chain_")]
    assert [line["tree_size"] for line in hold] == [1, 2]  # the claim, then the deny
    assert hold[-1]["signature"]["algorithm"] == "ed25519"
    history = people["first"].client.get("/api/holds/history", headers=people["first"].h())
    assert history.status_code == 200
    saved, keys = tmp_path / "history.json", tmp_path / "keys.json"
    saved.write_text(json.dumps(history.get_json()))
    keys.write_bytes(client.get("/api/decision/receipt-keys").get_data())
    checked = _gate(gate_env, "verify", "--hold-history", str(saved), "--checkpoints", str(_log(gate_env)),
                    "--key-registry", str(keys))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert decision_id


def test_a_deny_deleted_and_the_hold_reopened_is_refused_and_fails_every_check(people, gate_env, client, tmp_path):
    decision_id = _denied_hold(people)
    witness = tmp_path / "witness.jsonl"  # a witness's copy (`gate checkpoint save`)
    witness.write_text(_log(gate_env).read_text() if _log(gate_env).exists() else "")
    keys = tmp_path / "keys.json"
    keys.write_bytes(client.get("/api/decision/receipt-keys").get_data())
    _delete_newest_and_reopen(gate_env, decision_id)

    # The gate writes nothing on, and serves nothing from, the cut-back chain.
    second = people["second"].resolve(decision_id, "approve")
    assert second.status_code == 409, second.get_json()
    assert second.get_json()["error"] == "CHAIN_INTEGRITY_FAILED"
    assert second.get_json()["failed_checks"] == ["checkpoint_log.size"]
    assert people["first"].show(decision_id).get_json()["hold"]["state"] == "open"  # nothing was written
    for path in ("/api/holds/history", f"/api/decision/{decision_id}/packet"):
        answer = people["caller"].client.get(path, headers=people["first"].h())
        assert answer.status_code == 409 and answer.get_json()["error"] == "CHAIN_INTEGRITY_FAILED", path

    # A writer of the gate's files too: the log moved away, the gate signs the cut-back chain...
    moved = tmp_path / "moved.jsonl"
    shutil.move(_log(gate_env), moved)
    history = people["first"].client.get("/api/holds/history", headers=people["first"].h()).get_json()
    packet = people["caller"].client.get(f"/api/decision/{decision_id}/packet", headers=people["caller"].h()).get_json()
    assert packet["hold_commitment"]["count"] == 1 and len(packet["hold_events"]) == 1  # the claim only
    saved = tmp_path / "history.json"
    saved.write_text(json.dumps(history))
    alone = _gate(gate_env, "verify", "--hold-history", str(saved), "--key-registry", str(keys))
    assert alone.returncode == 0, alone.stdout + alone.stderr  # what the document alone cannot show
    # ... but not against the witness's checkpoint: offline, and hosted once the gate's log is back.
    checked = _gate(gate_env, "verify", "--hold-history", str(saved), "--checkpoints", str(witness),
                    "--key-registry", str(keys))
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "NOT VERIFIED" in checked.stdout and "checkpoint_log.size" in checked.stdout
    saved.write_text(json.dumps(packet))
    offline = _gate(gate_env, "verify", str(saved), "--checkpoints", str(witness), "--key-registry", str(keys),
                    "--json")
    assert offline.returncode == 1, offline.stdout + offline.stderr
    assert json.loads(offline.stdout)["failed_checks"] == ["hold_checkpoint_log"]
    shutil.move(moved, _log(gate_env))
    hosted = client.post("/api/decision/packet/verify", json={"packet": packet}).get_json()
    assert hosted["verified"] is False and hosted["failed_checks"] == ["hold_checkpoint_log"]
    assert "the chain was cut back" in hosted["details"]["hold_checkpoint_log"][0]


def test_a_packet_without_its_hold_events_fails_offline_and_hosted(people, gate_env, client, tmp_path):
    decision_id = _denied_hold(people)
    packet = people["caller"].client.get(f"/api/decision/{decision_id}/packet", headers=people["caller"].h()).get_json()
    assert [e["action"] for e in packet["hold_events"]] == ["claim", "vote"]
    keys, saved = tmp_path / "keys.json", tmp_path / "packet.json"
    keys.write_bytes(client.get("/api/decision/receipt-keys").get_data())
    hosted = client.post("/api/decision/packet/verify", json={"packet": packet}).get_json()
    assert hosted["verified"] is True
    checked = hosted
    dropped = {k: v for k, v in packet.items() if k != "hold_events"}
    for tampered in (_rehash(dropped), _rehash({**packet, "hold_events": packet["hold_events"][:1]}),
                     _rehash({k: v for k, v in dropped.items() if k != "hold_commitment"})):
        saved.write_text(json.dumps(tampered))
        offline = _gate(gate_env, "verify", str(saved), "--key-registry", str(keys), "--json", process=False)
        assert offline.returncode == 1, offline.stdout + offline.stderr
        assert json.loads(offline.stdout)["failed_checks"] == ["hold_commitment"]
        hosted = client.post("/api/decision/packet/verify", json={"packet": tampered}).get_json()
        assert hosted["verified"] is False and hosted["failed_checks"] == ["hold_commitment"]
    assert packet["hold_commitment"]["count"] == 2 and packet["hold_commitment"]["last_event_hash"] == \
        packet["hold_events"][-1]["event_hash"]
    assert checked["checks"]["hold_checkpoint_log"] is True
