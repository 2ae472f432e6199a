"""Issue 18 item 4: ledger tampering that used to pass (or crash) is named.

Each test tampers with the stored rows by SQL (no key), on SQLite and PostgreSQL, and checks the
named failure through the real interfaces: hosted verify, the chain view and packet export over
HTTP, and `gate verify` as a subprocess.

(a) a chain head rolled back against its links and nodes; (c) an edited rulebook snapshot
body; (d) an execution receipt deleted before a packet export.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import delete, select, text, update

from gate.ledger.tables import lifecycle_receipts, receipt_heads, rulebook_snapshots
from gate.protocol.canonical import canonical_text

pytestmark = pytest.mark.usefixtures("backend")

GATE = str(Path(sys.executable).parent / "gate")


def decide(client, key, request):
    response = client.post("/api/decide", json=request, headers={"x-api-key": key})
    assert response.status_code == 200, response.json
    return response.json


def sql(app, statement, **params):
    with app.extensions["gate"].ledger.engine.begin() as connection:
        return connection.execute(text(statement) if isinstance(statement, str) else statement, params)


def hosted(client, key, decision_id):
    response = client.get(f"/api/decision/{decision_id}/verify", headers={"x-api-key": key})
    assert response.status_code == 200, response.json
    return response.json


def view(client, key, chain_id):
    response = client.get(f"/api/decision/chains/{chain_id}", headers={"x-api-key": key})
    assert response.status_code == 200, response.json
    return response.json


def gate_verify(tmp_path, client, packet, name="p.json"):
    """`gate verify PACKET --key-registry REG --json` as a subprocess: (exit code, result)."""
    (tmp_path / "reg.json").write_text(json.dumps(client.get("/api/decision/receipt-keys").json))
    (tmp_path / name).write_text(json.dumps(packet))
    done = subprocess.run([GATE, "verify", str(tmp_path / name), "--key-registry", str(tmp_path / "reg.json"),
                           "--json"], env=dict(os.environ), capture_output=True, text=True, timeout=60, check=False)
    return done.returncode, json.loads(done.stdout) if done.stdout else None


def execute(client, key, record, **changes):
    body = {"execution_status": "executed", "decision_record_hash": record["record_hash"],
            "decision_receipt_hash": record["receipt_hash"], **changes}
    response = client.post(f"/api/decision/{record['decision_id']}/execution", json=body, headers={"x-api-key": key})
    assert response.status_code == 201, response.json
    return response.json["execution"]


# --------------------------------------------------------------------------- (a) chain head


def test_a_head_size_rolled_back_is_named_not_a_500(app, client, api_key, sample_request):
    records = [decide(client, api_key, sample_request) for _ in range(3)]
    chain_id = records[0]["audit_chain"]["chain_id"]
    headers = {"x-api-key": api_key}
    assert hosted(client, api_key, records[-1]["decision_id"])["checks"]["chain_head"] is True
    sql(app, "UPDATE chain_heads SET size = size - 1")

    body = hosted(client, api_key, records[-1]["decision_id"])
    assert body["verified"] is False and "chain_head" in body["failed_checks"]
    assert {"chain_head.size", "chain_head.tree_peaks"} <= set(body["chain_failures"])
    # An older decision's own row is intact, but its chain's head is not.
    assert "chain_head" in hosted(client, api_key, records[0]["decision_id"])["failed_checks"]

    shown = view(client, api_key, chain_id)
    assert shown["verification"]["valid"] is False
    assert shown["verification"]["checks"]["chain_head"] is False
    assert {"chain_head.size", "chain_head.tree_peaks"} <= {f["check"] for f in shown["verification"]["failures"]}
    assert shown["checkpoint"] is None  # a tampered head is never signed

    for url in (f"/api/decision/{records[0]['decision_id']}/packet",
                f"/api/decision/{records[-1]['decision_id']}/packet",
                f"/api/decision/chains/{chain_id}/inclusion?decision_id={records[0]['decision_id']}",
                f"/api/decision/chains/{chain_id}/consistency?first=1"):
        response = client.get(url, headers=headers)
        assert response.status_code == 409, (url, response.json)
        assert response.json["error"] == "CHAIN_INTEGRITY_FAILED" and response.json["c"] == "unclear"
        assert "chain_head.size" in response.json["failed_checks"]


def test_a_head_with_its_link_hash_and_root_nulled_is_named_not_a_500(app, client, api_key, sample_request):
    """The head's link hash and root are nullable columns (a chain's head is written with none
    before its first link): nulled under a chain that holds links, no proof material is served
    from it and the view shows the nulls as stored, never a 500."""
    records = [decide(client, api_key, sample_request) for _ in range(2)]
    chain_id = records[0]["audit_chain"]["chain_id"]
    sql(app, "UPDATE chain_heads SET head_link_hash = NULL, merkle_root = NULL")

    for record in records:
        response = client.get(f"/api/decision/{record['decision_id']}/packet", headers={"x-api-key": api_key})
        assert response.status_code == 409, response.json
        assert response.json["error"] == "CHAIN_INTEGRITY_FAILED" and response.json["c"] == "unclear"
        assert {"chain_head.head_link_hash", "chain_head.merkle_root"} <= set(response.json["failed_checks"])
    shown = view(client, api_key, chain_id)
    assert (shown["head_link_hash"], shown["merkle_root"]) == (None, None)
    assert shown["verification"]["valid"] is False and shown["checkpoint"] is None


def test_a_head_rewritten_to_an_older_link_is_named(app, client, api_key, sample_request):
    """The head is made to name link 2 of 3 (size, hashes and peaks all rewritten): link 3 and
    its nodes are still stored, so the head contradicts the chain."""
    records = [decide(client, api_key, sample_request) for _ in range(3)]
    chain = records[1]["audit_chain"]
    peaks = json.dumps([view(client, api_key, chain["chain_id"])["checkpoint"]["root_hash"]])  # any 1 peak
    sql(app, "UPDATE chain_heads SET size = 2, head_link_hash = :link, merkle_root = :root, tree_peaks = :peaks",
        link=chain["link_hash"], root=chain["merkle_root"], peaks=peaks)
    body = hosted(client, api_key, records[0]["decision_id"])
    assert "chain_head" in body["failed_checks"] and "chain_head.size" in body["chain_failures"]
    response = client.get(f"/api/decision/{records[0]['decision_id']}/packet", headers={"x-api-key": api_key})
    assert response.status_code == 409 and response.json["error"] == "CHAIN_INTEGRITY_FAILED"


def test_a_head_with_garbage_peaks_is_named(app, client, api_key, sample_request):
    records = [decide(client, api_key, sample_request) for _ in range(2)]
    sql(app, "UPDATE chain_heads SET tree_peaks = 'not json'")
    assert "chain_head.tree_peaks" in hosted(client, api_key, records[0]["decision_id"])["chain_failures"]
    shown = view(client, api_key, records[0]["audit_chain"]["chain_id"])
    assert shown["verification"]["checks"]["chain_head"] is False and shown["tree"]["root_hash"] is None
    sql(app, "UPDATE chain_heads SET tree_peaks = :peaks", peaks=json.dumps(["0" * 64]))
    assert "chain_head.tree_root" in hosted(client, api_key, records[0]["decision_id"])["chain_failures"]
    for peaks in (["zz"], [7], [None]):  # the right count of peaks, none a hash
        sql(app, "UPDATE chain_heads SET tree_peaks = :peaks", peaks=json.dumps(peaks))
        assert "chain_head.tree_root" in hosted(client, api_key, records[0]["decision_id"])["chain_failures"]
        shown = view(client, api_key, records[0]["audit_chain"]["chain_id"])
        assert shown["verification"]["checks"]["chain_head"] is False and shown["checkpoint"] is None


# --------------------------------------------------------------------------- (c) rulebook snapshots


def test_c_an_edited_snapshot_body_is_named_by_hosted_verify_and_the_chain_view(app, client, api_key, sample_request):
    records = [decide(client, api_key, sample_request) for _ in range(2)]
    body = hosted(client, api_key, records[0]["decision_id"])
    assert body["verified"] is True and body["checks"]["rulebook_snapshot"] is True
    with app.extensions["gate"].ledger.engine.connect() as connection:
        stored = json.loads(connection.execute(select(rulebook_snapshots.c.body_json)).scalar())
    stored["rules"] = list(reversed(stored.get("rules", []))) + [{"id": "smuggled"}]
    sql(app, update(rulebook_snapshots).values(body_json=canonical_text(stored)))

    body = hosted(client, api_key, records[0]["decision_id"])
    assert body["verified"] is False and "rulebook_snapshot" in body["failed_checks"]
    assert body["rulebook_snapshot"]["expected"] == records[0]["rulebook"]["hash"]
    assert body["rulebook_snapshot"]["actual"] not in (None, records[0]["rulebook"]["hash"])
    shown = view(client, api_key, records[0]["audit_chain"]["chain_id"])
    assert shown["verification"]["valid"] is False
    assert shown["verification"]["checks"]["rulebook_snapshots"] is False
    named = [f for f in shown["verification"]["failures"] if f["check"] == "rulebook_snapshot"]
    assert [f["chain_position"] for f in named] == [1, 2]


@pytest.mark.parametrize("statement", [
    "UPDATE rulebook_snapshots SET body_json = 'not json'",
    "UPDATE rulebook_snapshots SET rulebook_hash = '" + "e" * 64 + "'",
    "DELETE FROM rulebook_snapshots",
])
def test_c_an_unreadable_relabelled_or_deleted_snapshot_is_named(app, client, api_key, sample_request, statement):
    record = decide(client, api_key, sample_request)
    sql(app, statement)
    assert "rulebook_snapshot" in hosted(client, api_key, record["decision_id"])["failed_checks"]
    assert view(client, api_key, record["audit_chain"]["chain_id"])["verification"]["checks"][
        "rulebook_snapshots"] is False


# --------------------------------------------------------------------------- (d) receipts in packets


def test_d_a_packet_exported_after_a_receipt_was_deleted_fails_gate_verify(app, client, api_key, sample_request,
                                                                          tmp_path):
    record = decide(client, api_key, sample_request)
    execute(client, api_key, record, external_ref="run-1")
    newest = execute(client, api_key, record, external_ref="run-2")
    url = f"/api/decision/{record['decision_id']}/packet"
    packet = client.get(url, headers={"x-api-key": api_key}).json
    assert packet["receipt_chain_head"]["count"] == 2
    code, result = gate_verify(tmp_path, client, packet)
    assert code == 0 and result["verified"] is True, result["failed_checks"]

    sql(app, delete(lifecycle_receipts).where(lifecycle_receipts.c.receipt_id == newest["execution_receipt_id"]))
    packet = client.get(url, headers={"x-api-key": api_key}).json
    assert len(packet["execution_receipts"]) == 1
    code, result = gate_verify(tmp_path, client, packet, "cut.json")
    assert code == 1 and result["verified"] is False
    assert "receipt_chain_head" in result["failed_checks"]
    # The attacker rolls the head back too: its count fits, its signature does not.
    with app.extensions["gate"].ledger.engine.connect() as connection:
        remaining = connection.execute(select(lifecycle_receipts.c.row_hash)).scalar()
    sql(app, update(receipt_heads).values(count=1, head_row_hash=remaining))
    packet = client.get(url, headers={"x-api-key": api_key}).json
    code, result = gate_verify(tmp_path, client, packet, "rolled.json")
    assert code == 1 and "receipt_chain_head_signature" in result["failed_checks"]
    assert "receipt_chain_head" not in result["failed_checks"]
    # The public verify endpoint names it the same way.
    answer = client.post("/api/decision/packet/verify", json={"packet": packet}).json
    assert answer["verified"] is False and "receipt_chain_head_signature" in answer["failed_checks"]


def test_d_a_deleted_receipt_head_refuses_the_export(app, client, api_key, sample_request):
    record = decide(client, api_key, sample_request)
    execute(client, api_key, record)
    sql(app, delete(receipt_heads))
    response = client.get(f"/api/decision/{record['decision_id']}/packet", headers={"x-api-key": api_key})
    assert response.status_code == 503 and response.json["error"] == "PACKET_SOURCE_UNAVAILABLE"
    assert "receipt chain head" in response.json["message"]


def test_d_a_receipt_dropped_from_the_packet_with_its_totals_lowered_is_named(client, api_key, sample_request):
    from gate.protocol.canonical import sha256_hex

    record = decide(client, api_key, sample_request)
    execute(client, api_key, record, external_ref="run-1")
    execute(client, api_key, record, external_ref="run-2")
    packet = client.get(f"/api/decision/{record['decision_id']}/packet", headers={"x-api-key": api_key}).json
    packet["execution_receipts"] = packet["execution_receipts"][1:]
    manifest = packet["packet_manifest"]
    manifest["totals"]["execution_receipts"] = manifest["components"]["execution_receipts"] = 1
    manifest["truncated"]["execution_receipts"] = False
    packet["packet_hash"] = sha256_hex({k: v for k, v in packet.items() if k != "packet_hash"})
    answer = client.post("/api/decision/packet/verify", json={"packet": packet}).json
    assert answer["failed_checks"] == ["receipt_chain_head"]
    for forged in ({**packet["receipt_chain_head"], "count": 1}, "not an object", None):
        packet["receipt_chain_head"] = forged
        packet["packet_hash"] = sha256_hex({k: v for k, v in packet.items() if k != "packet_hash"})
        answer = client.post("/api/decision/packet/verify", json={"packet": packet}).json
        assert answer["verified"] is False
        assert {"receipt_chain_head", "receipt_chain_head_signature"} & set(answer["failed_checks"])
