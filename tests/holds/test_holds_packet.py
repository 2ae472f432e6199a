"""A resolved hold travels in its decision's packet (issue 43): exported over HTTP, the packet
verifies offline (`gate verify` as a subprocess on the saved file) and hosted; a changed byte of
the resolution fails the named check `hold_events` in both, with or without `packet_hash`
recomputed. A decision that never held, or a hold with no event yet, exports no member."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gate.protocol.canonical import sha256_hex
from tests.cli_in_process import gate_in_process
from tests.holds.support import Holds, approved_request, held_request


@pytest.fixture
def people(client, issue_key):
    return {"caller": Holds(client, issue_key(permissions="decide")["api_key"]),
            "reviewer": Holds(client, issue_key(permissions="decide,resolve")["api_key"])}


def _gate(gate_env, *args: str, process: bool = True) -> subprocess.CompletedProcess:
    """`gate ARGS` as a subprocess; `process=False` in process (tests.cli_in_process), for the
    repeated offline `gate verify` runs (its entry point runs as a subprocess once in this file)."""
    if not process:
        return gate_in_process(args, gate_env)
    environment = {**gate_env, "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PATH": os.environ.get("PATH", "")}
    return subprocess.run([sys.executable, "-m", "gate_cli.main", *args], capture_output=True, text=True,
                          env=environment, timeout=120, check=False)


def _packet(people, decision_id: str) -> dict:
    answer = people["caller"].client.get(f"/api/decision/{decision_id}/packet", headers=people["caller"].h())
    assert answer.status_code == 200, answer.get_json()
    return answer.get_json()


def _hosted(client, packet: dict) -> dict:
    answer = client.post("/api/decision/packet/verify", json={"packet": packet})
    assert answer.status_code == 200, answer.get_json()
    return answer.get_json()


def _rehash(packet: dict) -> dict:
    return {**packet, "packet_hash": sha256_hex({k: v for k, v in packet.items() if k != "packet_hash"})}


def test_a_resolved_holds_packet_verifies_offline_and_hosted_and_a_changed_byte_fails(gate_env, client, people,
                                                                                      tmp_path):
    record = people["caller"].decide(held_request()).get_json()
    decision_id = record["decision_id"]
    assert people["reviewer"].act(decision_id, "claim").status_code == 201
    assert people["reviewer"].resolve(decision_id, reason_code="MARGIN_OK", note="finance agrees").status_code == 201
    packet = _packet(people, decision_id)
    assert [e["action"] for e in packet["hold_events"]] == ["claim", "vote"]
    assert packet["hold_events"][-1]["outcome"] == "approved" and packet["hold_events"][-1]["note"] == "finance agrees"
    saved, keys = tmp_path / "packet.json", tmp_path / "keys.json"
    saved.write_text(json.dumps(packet))
    keys.write_bytes(client.get("/api/decision/receipt-keys").get_data())
    offline = _gate(gate_env, "verify", str(saved), "--key-registry", str(keys))
    assert offline.returncode == 0, offline.stdout + offline.stderr
    assert ": VERIFIED" in offline.stdout and "[ok  ] hold_events\n" in offline.stdout
    assert "[ok  ] hold_events_signature" in offline.stdout
    hosted = _hosted(client, packet)
    assert hosted["verified"] is True and hosted["checks"]["hold_events"] is True
    # one byte of the resolution's note
    edited = json.loads(json.dumps(packet))
    edited["hold_events"][-1]["note"] = "finance agreeS"
    for tampered, failed in ((edited, ["hold_events", "packet_hash"]), (_rehash(edited), ["hold_events"])):
        saved.write_text(json.dumps(tampered))
        offline = _gate(gate_env, "verify", str(saved), "--key-registry", str(keys), "--json", process=False)
        assert offline.returncode == 1, offline.stdout + offline.stderr
        result = json.loads(offline.stdout)
        assert result["verified"] is False and result["failed_checks"] == failed
        assert result["details"]["hold_events"] == ["hold_events[1]: event_hash does not match its content (tampered)"]
        hosted = _hosted(client, tampered)
        assert hosted["verified"] is False and hosted["failed_checks"] == failed
        assert hosted["details"]["hold_events"] == result["details"]["hold_events"]
    text = _gate(gate_env, "verify", str(saved), "--key-registry", str(keys), process=False)
    assert "[FAIL] hold_events\n" in text.stdout and "hold_events: hold_events[1]: event_hash does not match" in text.stdout


def test_no_hold_events_no_member(people):
    plain = people["caller"].decide(approved_request()).get_json()
    assert "hold_events" not in _packet(people, plain["decision_id"])
    held = people["caller"].decide(held_request(subject="open-one")).get_json()
    assert held["verdict"] == "review" and "hold_events" not in _packet(people, held["decision_id"])
    assert people["reviewer"].act(held["decision_id"], "claim").status_code == 201
    assert [e["action"] for e in _packet(people, held["decision_id"])["hold_events"]] == ["claim"]
