"""Issue 67, item 4, on SQLite and PostgreSQL: a data subject erased, every proof intact. Through
HTTP (`POST /api/subjects/erasures`, `.../approvals`) and `gate subject erase` / `gate erase` as
subprocesses: one holder asks and cannot approve (nor another key of its holder), nothing is
removed while the request waits; a second holder approves and then no value of the subject is left
(decoded rows, the SQLite file's bytes after VACUUM, PostgreSQL's tables as text), every chain,
checkpoint and packet verifies (and the chain still extends a checkpoint witnessed before the erasure:
an RFC 6962 consistency proof), `gate verify` of the governance chain and of a record the caller
kept passes, another subject's decisions are whole, a full-history dry-run says the erased ones
apart. The request and its events name decision ids and hashes, never the subject."""

from __future__ import annotations

import copy
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, select, text

from gate.chain.sealing import seal
from gate.ledger import Ledger
from gate.ledger.tables import decisions, event_outbox, holds, release_events, webhook_attempts
from tests.events.test_webhooks import LOOPBACK
from tests.privacy.support import CUSTOMER, EMAIL, OTHER_CUSTOMER, customer_request, privacy

GATE = str(Path(sys.executable).with_name("gate"))
ERASURES, APPROVALS = "/api/subjects/erasures", "/api/subjects/erasures/approvals"
OTHER_EMAIL = "bob@example.org"
ECHO = f"received {CUSTOMER} <{EMAIL}>"  # a receiver's answer that echoes what it was sent


@pytest.fixture
def gate(make_app, backend):
    return make_app(env=LOOPBACK)


@pytest.fixture
def keys(issue_key):
    """Two holders (the DPO and a second holder), a second key of the DPO's holder, a key without
    `approve`, and an admin of another scope."""
    def key(permissions: str, holder: str | None = None, scope: str = "tenant_a") -> dict[str, str]:
        return {"x-api-key": issue_key(scope=scope, permissions=permissions, holder=holder)["api_key"]}

    return {"dpo": key("decide,admin,approve", "service:dpo"), "dpo_too": key("admin,approve", "service:dpo"),
            "second": key("approve", "service:second"), "admin_only": key("admin", "service:admin-only"),
            "b": key("decide,admin,approve", "service:b-admin", "tenant_b")}


def _decide(client, headers, body) -> dict:
    answer = client.post("/api/decide", json=body, headers=headers)
    assert answer.status_code == 200, answer.get_json()
    return answer.get_json()


def _set_up(client, keys) -> tuple[list[dict], dict]:
    """tenant_a declares the map and mirrors decisions into the outbox; decides twice for the
    customer (the second held: a hold with facts) and once for another customer."""
    assert client.put("/api/privacy", json=privacy(), headers=keys["dpo"]).status_code == 200
    on = client.put("/api/events/settings", json={"decision_created": True, "anomaly_every_seconds": None},
                    headers=keys["dpo"])
    assert on.status_code == 200, on.get_json()
    mine = [_decide(client, keys["dpo"], customer_request()),
            _decide(client, keys["dpo"], customer_request(held=True))]
    assert mine[1]["verdict"] == "review"
    other = _decide(client, keys["dpo"], customer_request(OTHER_CUSTOMER, OTHER_EMAIL))
    return mine, other


def _echoed_attempt(url: str, decision_id: str) -> None:
    """A delivery attempt of the decision's `decision.created` whose receiver echoed the subject."""
    ledger = Ledger(url)
    try:
        with ledger.write() as connection:
            for row in connection.execute(select(event_outbox.c.seq, event_outbox.c.event_json)).mappings():
                if json.loads(row["event_json"]).get("subject") == decision_id:
                    connection.execute(webhook_attempts.insert().values(
                        subscription_id="sub_echo", scope="tenant_a", seq=row["seq"], event_id=f"ev{row['seq']}",
                        attempted_at="2026-11-28T00:00:00.000Z", ok=1, status_code=200, latency_ms=1, excerpt=ECHO,
                        replay=0))
    finally:
        ledger.dispose()


def _texts(url: str) -> str:
    """Every stored request, record, hold, outbox event, attempt excerpt and governance event, decoded."""
    ledger = Ledger(url)
    try:
        with ledger.read() as connection:
            found = [t for row in connection.execute(select(decisions.c.request_json, decisions.c.record_json))
                     for t in row]
            found += [t for row in connection.execute(select(holds.c.facts_json, holds.c.request_json)) for t in row
                      if t]
            found += [row[0] for row in connection.execute(select(event_outbox.c.event_json))]
            found += [row[0] for row in connection.execute(select(webhook_attempts.c.excerpt))]
            found += [row[0] for row in connection.execute(select(release_events.c.event_json))]
        return "\n".join(found)
    finally:
        ledger.dispose()


def _raw(url: str, backend: str) -> bytes:
    """The whole database as bytes: the SQLite file after VACUUM, or every PostgreSQL table as text."""
    if backend == "sqlite":
        path = url.removeprefix("sqlite:///")
        connection = sqlite3.connect(path)
        connection.execute("VACUUM")  # in WAL mode, into the log: checkpointed into the file, and both read
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        connection.close()
        wal = Path(path + "-wal")
        return Path(path).read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            names = inspect(connection).get_table_names()
            return b"\n".join(row[0].encode() for name in names
                              for row in connection.execute(text(f'SELECT t::text FROM "{name}" t')))
    finally:
        engine.dispose()


def _gate(env: dict, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([GATE, *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=300,
                          check=False, input=stdin)


def test_one_holder_asks_a_second_approves_and_no_value_of_the_subject_is_left(gate, keys, gate_env, database_url,
                                                                              backend, tmp_path, caplog):
    client = gate.test_client()
    mine, other = _set_up(client, keys)
    _echoed_attempt(database_url, mine[0]["decision_id"])
    assert EMAIL in _texts(database_url) and CUSTOMER in _texts(database_url)  # the searches can fail
    assert ECHO.encode() in _raw(database_url, backend)  # a plain column, as the hold's facts are

    witnessed = _witness(client, keys["dpo"], mine[0]["audit_chain"]["chain_id"])  # a checkpoint kept outside

    asked = client.post(ERASURES, json={"subject": CUSTOMER, "reason": "DSR-2026-114"}, headers=keys["dpo"])
    assert asked.status_code == 202, asked.get_json()
    request = asked.get_json()
    assert {(d["decision_id"], d["input_hash"], d["record_hash"]) for d in request["decisions"]} == {
        (r["decision_id"], r["input_hash"], r["record_hash"]) for r in mine}
    assert request["event"]["action"] == "policy_request" and request["event"]["setting"] == "subject_erasure"
    assert CUSTOMER not in json.dumps(request) and EMAIL not in json.dumps(request)
    pending = client.get(ERASURES, headers=keys["dpo"]).get_json()["pending"]
    assert [p["request_seq"] for p in pending] == [request["request_seq"]]

    # One holder alone cannot erase: not its own request, not with another of its keys, not without `approve`.
    for name, code in (("dpo", "GOVERNANCE_SELF_APPROVAL"), ("dpo_too", "GOVERNANCE_SELF_APPROVAL"),
                       ("admin_only", "PRIVACY_PERMISSION_DENIED")):
        refused = client.post(APPROVALS, json={"request_seq": request["request_seq"]}, headers=keys[name])
        assert refused.status_code == 403 and refused.get_json()["error"] == code, (name, refused.get_json())
    assert EMAIL in _texts(database_url) and ECHO in _texts(database_url)  # nothing removed while it waits
    assert "inputs_removed" not in client.get(f"/api/decision/{mine[0]['decision_id']}", headers=keys["dpo"]).get_json()

    approved = client.post(APPROVALS, json={"request_seq": request["request_seq"], "reason": "checked"},
                           headers=keys["second"])
    assert approved.status_code == 200, approved.get_json()
    erased = approved.get_json()
    assert sorted(erased["removed"]) == sorted(r["decision_id"] for r in mine)
    assert erased["event"]["action"] == "policy_approve"
    seq = erased["erasure_event"]
    again = client.post(APPROVALS, json={"request_seq": request["request_seq"]}, headers=keys["second"])
    assert again.status_code == 404 and again.get_json()["error"] == "GOVERNANCE_REQUEST_NOT_FOUND"

    after = _texts(database_url)
    assert EMAIL not in after and CUSTOMER not in after and ECHO not in after
    assert OTHER_EMAIL in after and OTHER_CUSTOMER in after  # the other subject is whole
    raw = _raw(database_url, backend)
    assert EMAIL.encode() not in raw and CUSTOMER.encode() not in raw

    _proofs_hold(client, keys["dpo"], mine, other, seq)
    _governance_and_kept_record_verify(client, gate_env, tmp_path, mine[0], seq)
    _dry_run_says_the_erased_apart(gate_env, tmp_path)
    _decide(client, keys["dpo"], customer_request(OTHER_CUSTOMER, OTHER_EMAIL))  # the chain grows past the witness
    _extends(client, keys["dpo"], witnessed)


def _witness(client, headers, chain_id: str) -> dict:
    """The chain's signed checkpoint at its head, as a witness keeps it (`gate checkpoint save`)."""
    answer = client.get(f"/api/decision/chains/{chain_id}/checkpoint", headers=headers)
    assert answer.status_code == 200, answer.get_json()
    return {"chain_id": chain_id, **answer.get_json()["checkpoint"]}


def _extends(client, headers, witnessed: dict) -> None:
    """After the erasure the chain still extends the checkpoint witnessed before it: an RFC 6962
    consistency proof from its size to the head verifies against the witnessed root."""
    from gate.chain.merkle import verify_consistency

    chain_id, size = witnessed["chain_id"], witnessed["tree_size"]
    answer = client.get(f"/api/decision/chains/{chain_id}/consistency?first={size}", headers=headers).get_json()
    assert answer["second"] > size and answer["first_root"] == witnessed["root_hash"], answer
    assert verify_consistency(size, answer["second"], witnessed["root_hash"], answer["second_root"], answer["proof"])


def _proofs_hold(client, headers, mine: list[dict], other: dict, seq: int) -> None:
    kept = mine[0]
    stored = client.get(f"/api/decision/{kept['decision_id']}", headers=headers).get_json()
    assert stored["inputs_removed"]["cause"] == "erasure"
    assert stored["inputs_removed"]["ref"] == f"governance event {seq}"
    assert stored["record_hash"] == kept["record_hash"] and stored["audit_chain"] == kept["audit_chain"]
    verified = client.get(f"/api/decision/{kept['decision_id']}/verify", headers=headers).get_json()
    assert verified["verified"] is True and verified["inputs_removed"]["cause"] == "erasure", verified
    copy_ = client.post(f"/api/decision/{kept['decision_id']}/verify", json={"record": kept}, headers=headers)
    assert copy_.get_json()["verified"] is True and copy_.get_json()["checks"]["matches_ledger"] is True
    chain = client.get(f"/api/decision/chains/{kept['audit_chain']['chain_id']}", headers=headers).get_json()
    assert chain["verification"]["valid"] is True, chain["verification"]
    packet = client.get(f"/api/decision/{kept['decision_id']}/packet", headers=headers).get_json()
    assert EMAIL not in json.dumps(packet) and CUSTOMER not in json.dumps(packet)
    checked = client.post("/api/decision/packet/verify", json={"packet": packet}).get_json()
    assert checked["verified"] is True and checked["checks"]["audit_chain.inclusion_proof"] is True, checked
    assert f"inputs were removed by erasure (governance event {seq}" in checked["details"]["record"][0]
    hold = client.get(f"/api/holds/{mine[1]['decision_id']}", headers=headers).get_json()
    assert EMAIL not in json.dumps(hold) and CUSTOMER not in json.dumps(hold)
    whole = client.get(f"/api/decision/{other['decision_id']}", headers=headers).get_json()
    assert "inputs_removed" not in whole and whole["record_hash"] == other["record_hash"]
    assert client.post(f"/api/decision/{other['decision_id']}/replay", json={}, headers=headers).status_code == 200
    assert client.get(f"/api/decision/{other['decision_id']}/verify", headers=headers).get_json()["verified"] is True
    replay = client.post(f"/api/decision/{kept['decision_id']}/replay", json={}, headers=headers)
    assert replay.status_code == 410 and replay.get_json()["removed"]["cause"] == "erasure"
    export = client.post("/api/subjects/exports", json={"subject": CUSTOMER}, headers=headers).get_json()
    assert export["decisions"] == [] and export["holds"] == [] and export["events"] == [], export
    nothing = client.post(ERASURES, json={"subject": CUSTOMER}, headers=headers)  # nothing of theirs is left
    assert nothing.status_code == 404 and nothing.get_json()["error"] == "SUBJECT_NOT_FOUND"


def _governance_and_kept_record_verify(client, env: dict, tmp_path: Path, kept: dict, seq: int) -> None:
    """`gate verify` of the governance chain (with the erasure's request and approval, by two
    holders) and of the signed record the caller kept."""
    history = _gate(env, "keys", "history", "--scope", "tenant_a")
    assert history.returncode == 0, history.stderr
    assert CUSTOMER not in history.stdout and EMAIL not in history.stdout
    (tmp_path / "chain.json").write_text(history.stdout)
    (tmp_path / "keys.json").write_bytes(client.get("/api/decision/receipt-keys").get_data())
    verified = _gate(env, "verify", str(tmp_path / "chain.json"), "--key-registry", str(tmp_path / "keys.json"))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    document = json.loads(history.stdout)
    erasure = [e for e in document["governance"] if e.get("setting") == "subject_erasure"]
    assert [e["action"] for e in erasure] == ["policy_request", "policy_approve"] and erasure[1]["seq"] == seq
    assert erasure[1]["principal"]["holder"] == "service:second" != erasure[0]["principal"]["holder"]
    signer = client.application.extensions["gate"].signing.receipt_signer()
    # Offline, one holder alone cannot have erased: approving its own request, or erasing at once.
    for forge, code in ((_self_approved, "GOVERNANCE_SELF_APPROVAL"), (_set_alone, "GOVERNANCE_APPROVAL_REQUIRED")):
        forged = forge(copy.deepcopy(document), signer)
        (tmp_path / "forged.json").write_text(json.dumps(forged))
        refused = _gate(env, "verify", str(tmp_path / "forged.json"), "--key-registry", str(tmp_path / "keys.json"))
        assert refused.returncode == 1 and f"the governance rules refuse this change ({code})" in refused.stdout, \
            refused.stdout
    (tmp_path / "kept.json").write_text(json.dumps(kept))
    record = _gate(env, "verify", str(tmp_path / "kept.json"), "--key-registry", str(tmp_path / "keys.json"))
    assert record.returncode == 0, record.stdout + record.stderr


def _reseal_from(events: list[dict], start: int, signer) -> None:
    """Events `start`… sealed and chained again with the gate's own key (what a build that broke
    the rule would have signed)."""
    for index in range(start, len(events)):
        events[index]["previous_event_hash"] = events[index - 1]["event_hash"] if index else None
        seal(events[index], signer)


def _self_approved(document: dict, signer) -> dict:
    """The erasure approved by the holder that asked for it."""
    events = document["governance"]
    at = next(i for i, e in enumerate(events) if e.get("setting") == "subject_erasure" and e["action"] == "policy_approve")
    asked = next(e for e in events if e["seq"] == events[at]["request_seq"])
    events[at]["principal"], events[at]["actor"] = asked["principal"], asked["actor"]
    _reseal_from(events, at, signer)
    return document


def _set_alone(document: dict, signer) -> dict:
    """The erasure applied at once by the holder that asked (a `policy_set`), no approval."""
    events = document["governance"]
    at = next(i for i, e in enumerate(events) if e.get("setting") == "subject_erasure")
    events[at].update(action="policy_set", expires_at=None)
    del events[at + 1:]
    _reseal_from(events, at, signer)
    return document


def _dry_run_says_the_erased_apart(env: dict, tmp_path: Path) -> None:
    """`gate dry-run` over the scope's whole history, under a draft that blocks every discount
    above 10%: the two erased decisions are said apart, by erasure, never counted as changed."""
    draft = copy.deepcopy(customer_request()["rulebook"])
    draft["version"] = "2099-01-01"
    draft["rules"][0]["condition"]["value"] = 10
    (tmp_path / "draft.json").write_text(json.dumps(draft))
    run = _gate(env, "dry-run", "--rulebook-id", draft["rulebook_id"], "--draft", str(tmp_path / "draft.json"),
                "--scope", "tenant_a", "--baseline", "history", "--out", str(tmp_path / "dry"), "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads((tmp_path / "dry" / "migration.json").read_text())["dry_run"]
    assert result["decisions_total"] == 3 and result["inputs_removed"] == {"count": 2, "by": {"erasure": 2}}
    assert result["decisions_unreplayable"] == 2 and result["decisions_evaluated"] == 1
    assert "(2 by erasure)" in (tmp_path / "dry" / "report.md").read_text()


def test_bad_bodies_unknown_subjects_and_another_scope_change_nothing(gate, keys, database_url):
    client = gate.test_client()
    mine, _other = _set_up(client, keys)
    for body in ({}, {"subject": ""}, {"subject": 7}, {"subject": "x" * 513}, {"subject": CUSTOMER, "more": 1},
                 {"subject": CUSTOMER, "reason": ""}, [CUSTOMER]):
        refused = client.post(ERASURES, json=body, headers=keys["dpo"])
        assert refused.status_code == 400 and refused.get_json()["error"] == "SUBJECT_ERASURE_INVALID", (body, refused.get_json())
    unknown = client.post(ERASURES, json={"subject": "cus_nobody"}, headers=keys["dpo"])
    assert unknown.status_code == 404 and unknown.get_json()["error"] == "SUBJECT_NOT_FOUND"
    # tenant_b holds nothing of the customer (its data map declares the key): tenant_a's are never read.
    assert client.put("/api/privacy", json=privacy(), headers=keys["b"]).status_code == 200
    theirs = client.post(ERASURES, json={"subject": CUSTOMER}, headers=keys["b"])
    assert theirs.status_code == 404 and theirs.get_json()["error"] == "SUBJECT_NOT_FOUND"
    denied = client.post(ERASURES, json={"subject": CUSTOMER}, headers=keys["second"])  # approve, not admin
    assert denied.status_code == 403 and denied.get_json()["error"] == "PRIVACY_PERMISSION_DENIED"
    assert client.get(ERASURES, headers=keys["second"]).status_code == 403
    bad_approval = client.post(APPROVALS, json={"request_seq": "1"}, headers=keys["second"])
    assert bad_approval.status_code == 400 and bad_approval.get_json()["error"] == "GOVERNANCE_REQUEST_INVALID"
    missing = client.post(APPROVALS, json={"request_seq": 999}, headers=keys["second"])
    assert missing.status_code == 404 and missing.get_json()["error"] == "GOVERNANCE_REQUEST_NOT_FOUND"
    assert client.get(ERASURES, headers=keys["dpo"]).get_json()["pending"] == []
    texts = _texts(database_url)
    assert EMAIL in texts and CUSTOMER in texts  # nothing removed
    assert all("inputs_removed" not in client.get(f"/api/decision/{r['decision_id']}", headers=keys["dpo"]).get_json()
               for r in mine)


def test_an_erasure_never_reaches_another_scope_s_decisions_of_the_same_key(gate, keys, database_url):
    client = gate.test_client()
    mine, other = _set_up(client, keys)
    assert client.put("/api/privacy", json=privacy(), headers=keys["b"]).status_code == 200
    theirs = _decide(client, keys["b"], customer_request(CUSTOMER, "carol@example.net"))
    asked = client.post(ERASURES, json={"subject": CUSTOMER}, headers=keys["dpo"]).get_json()
    assert theirs["decision_id"] not in {d["decision_id"] for d in asked["decisions"]}
    also = client.post(ERASURES, json={"subject": OTHER_CUSTOMER}, headers=keys["dpo"]).get_json()
    done = client.post(APPROVALS, json={"request_seq": asked["request_seq"]}, headers=keys["second"]).get_json()
    assert sorted(done["removed"]) == sorted(r["decision_id"] for r in mine)
    # Two erasures wait side by side: approving one never makes the other stale (an act, not a setting).
    second = client.post(APPROVALS, json={"request_seq": also["request_seq"]}, headers=keys["second"])
    assert second.status_code == 200 and second.get_json()["removed"] == [other["decision_id"]], second.get_json()
    assert "inputs_removed" not in client.get(f"/api/decision/{theirs['decision_id']}", headers=keys["b"]).get_json()
    assert "carol@example.net" in _texts(database_url)


def test_the_cli_asks_from_stdin_cannot_approve_its_own_and_a_second_holder_erases(gate, keys, gate_env,
                                                                                   database_url):
    """`gate erase --subject-file -` (the key from stdin, out of the shell history) as the local
    operator; `gate subject erase-approve` by the same login is refused (one holder); an HTTP key
    of another holder approves; `gate subject erase-resume` then has nothing left to do."""
    client = gate.test_client()
    mine, _other = _set_up(client, keys)
    asked = _gate(gate_env, "erase", "--scope", "tenant_a", "--subject-file", "-", "--reason", "DSR-7",
                  stdin=CUSTOMER + "\n")
    assert asked.returncode == 0, asked.stderr
    assert CUSTOMER not in asked.stdout + asked.stderr and "waits for a second, distinct holder" in asked.stderr
    request = json.loads(asked.stdout)
    assert sorted(d["decision_id"] for d in request["decisions"]) == sorted(r["decision_id"] for r in mine)
    own = _gate(gate_env, "subject", "erase-approve", "--scope", "tenant_a", "--request-seq",
                str(request["request_seq"]))
    assert own.returncode == 2 and "GOVERNANCE_SELF_APPROVAL" in own.stderr, own.stderr
    assert EMAIL in _texts(database_url)
    approved = client.post(APPROVALS, json={"request_seq": request["request_seq"]}, headers=keys["second"])
    assert approved.status_code == 200, approved.get_json()
    assert EMAIL not in _texts(database_url) and CUSTOMER not in _texts(database_url)
    resumed = _gate(gate_env, "subject", "erase-resume", "--scope", "tenant_a")
    assert resumed.returncode == 0 and json.loads(resumed.stdout)["removed"] == [], resumed.stderr
    unknown = _gate(gate_env, "subject", "erase", "--scope", "tenant_a", "--subject", "cus_nobody")
    assert unknown.returncode == 2 and "SUBJECT_NOT_FOUND" in unknown.stderr, unknown.stderr
    (Path(gate_env["GATE_HOME"]) / "key.txt").write_text(OTHER_CUSTOMER)
    from_file = _gate(gate_env, "subject", "erase", "--scope", "tenant_a", "--subject-file",
                      str(Path(gate_env["GATE_HOME"]) / "key.txt"))
    assert from_file.returncode == 0 and len(json.loads(from_file.stdout)["decisions"]) == 1, from_file.stderr


def test_a_subject_with_more_decisions_than_one_request_names_is_erased_in_turns(gate, keys, database_url,
                                                                                 monkeypatch):
    """One request names at most `MAX_DECISIONS` (the oldest first) and says `more`; once it is
    approved, the next request finds only the rest."""
    import gate.services.erasure as erasure

    monkeypatch.setattr(erasure, "MAX_DECISIONS", 1)
    client = gate.test_client()
    mine, _other = _set_up(client, keys)
    first = client.post(ERASURES, json={"subject": CUSTOMER}, headers=keys["dpo"]).get_json()
    assert [d["decision_id"] for d in first["decisions"]] == [mine[0]["decision_id"]] and first["more"] is True
    assert client.post(APPROVALS, json={"request_seq": first["request_seq"]}, headers=keys["second"]).status_code == 200
    rest = client.post(ERASURES, json={"subject": CUSTOMER}, headers=keys["dpo"]).get_json()
    assert [d["decision_id"] for d in rest["decisions"]] == [mine[1]["decision_id"]] and rest["more"] is False
    assert client.post(APPROVALS, json={"request_seq": rest["request_seq"]}, headers=keys["second"]).status_code == 200
    assert EMAIL not in _texts(database_url) and CUSTOMER not in _texts(database_url)


@pytest.mark.parametrize("layout", ["parquet", "iceberg"])
def test_the_dataset_follows_an_erasure_at_its_next_export(gate, keys, tmp_path, layout):
    """The dataset kept the subject's values as keyed tokens (still personal data: the privacy key
    re-links them); after the erasure the next export leaves none of the subject's tokens in any
    file it keeps (bytes and every decoded Parquet value; Iceberg's data, manifests and catalog),
    while the other customer's stay."""
    import pyarrow.parquet as pq

    from workbench.dataset import iceberg
    from workbench.dataset.export import export_ledger

    client = gate.test_client()
    mine, other = _set_up(client, keys)
    runtime = gate.extensions["gate"]
    root = tmp_path / "out" / "dataset"
    lakehouse = iceberg.default_target(str(root), root.parent) if layout == "iceberg" else None

    def export() -> list[dict]:
        export_ledger(runtime.ledger, str(root), signer=None, settle_seconds=0, privacy_key=runtime.privacy.key,
                      lakehouse=lakehouse)
        return pq.read_table(root / "facts").to_pylist()

    def tokens(rows: list[dict], ids: set[str]) -> set[str]:
        return {value for row in rows if row["decision_id"] in ids
                for value in row.values() if isinstance(value, str) and value.startswith("hmac-sha256:")}

    before = export()
    theirs = tokens(before, {r["decision_id"] for r in mine})
    kept = tokens(before, {other["decision_id"]}) - theirs
    assert theirs and kept  # the searches below can fail

    asked = client.post(ERASURES, json={"subject": CUSTOMER}, headers=keys["dpo"]).get_json()
    assert client.post(APPROVALS, json={"request_seq": asked["request_seq"]},
                       headers=keys["second"]).status_code == 200
    after = export()
    assert tokens(after, {other["decision_id"]}) >= kept
    found = b""
    for path in sorted(p for p in (tmp_path / "out").rglob("*") if p.is_file()):
        found += path.read_bytes()
        if path.suffix == ".parquet":
            found += json.dumps(pq.read_table(path).to_pylist(), default=str).encode()
    assert [token for token in theirs if token.encode() in found] == []
    assert all(token.encode() in found for token in kept)
