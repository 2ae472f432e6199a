"""Issue 18 item 4 (b): a consistent truncation of the newest decisions (rows and links deleted,
nodes, peaks and head rebuilt; no key needed) is invisible to every check recomputed from the
ledger. Signed checkpoints kept outside the ledger name it: the gate's own checkpoint log (chain
view, hosted verify, packet export, proofs) and a witness's log (`gate checkpoint save`,
`gate verify --checkpoints`). On SQLite and PostgreSQL; the CLI over HTTP from a live server. The
edited or unreadable witness log is refused by `gate` subprocesses (entry point, exit status and
one stderr line as a shell sees them); the other tests run the same command lines in this process
(`tests.cli_in_process`), about fifteen subprocess start-ups saved per backend."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sqlalchemy import delete, select, update
from werkzeug.serving import make_server

from gate.chain.merkle import CompactRange, verify_checkpoint, verify_consistency
from gate.ledger.tables import (
    chain_checkpoints,
    chain_heads,
    chain_links,
    decisions,
    merkle_nodes,
)
from tests.cli_in_process import gate_in_process

pytestmark = pytest.mark.usefixtures("backend")

GATE = str(Path(sys.executable).parent / "gate")


def decide(client, key, request, n=1):
    out = []
    for _ in range(n):
        response = client.post("/api/decide", json=request, headers={"x-api-key": key})
        assert response.status_code == 200, response.json
        out.append(response.json)
        response.close()  # as a WSGI server does once the answer is sent: the cadence checkpoint runs then
    return out


def truncate(app, chain_id: str, keep: int) -> None:
    """What a database writer without any key can do: delete the newest decisions with their
    links, tree nodes and stored checkpoints, and rebuild the head from what is left."""
    ledger = app.extensions["gate"].ledger
    with ledger.engine.begin() as connection:
        newer = (chain_links.c.chain_id == chain_id) & (chain_links.c.chain_position > keep)
        gone = [row[0] for row in connection.execute(select(chain_links.c.decision_id).where(newer))]
        connection.execute(delete(decisions).where(decisions.c.decision_id.in_(gone)))
        connection.execute(delete(chain_links).where(newer))
        nodes = {(row.level, row.idx): row.hash for row in connection.execute(
            select(merkle_nodes).where(merkle_nodes.c.chain_id == chain_id))}
        for level, idx in [ref for ref in nodes if (ref[1] + 1) << ref[0] > keep]:
            del nodes[(level, idx)]
            connection.execute(delete(merkle_nodes).where((merkle_nodes.c.chain_id == chain_id)
                                                          & (merkle_nodes.c.level == level)
                                                          & (merkle_nodes.c.idx == idx)))
        connection.execute(delete(chain_checkpoints).where((chain_checkpoints.c.chain_id == chain_id)
                                                           & (chain_checkpoints.c.tree_size > keep)))
        last = json.loads(connection.execute(select(chain_links.c.link_json).where(
            (chain_links.c.chain_id == chain_id) & (chain_links.c.chain_position == keep))).scalar())
        peaks = CompactRange.from_nodes(keep, lambda level, idx: nodes[(level, idx)]).peaks
        connection.execute(update(chain_heads).where(chain_heads.c.chain_id == chain_id).values(
            size=keep, head_link_hash=last["link_hash"], merkle_root=last["merkle_root"],
            tree_peaks=json.dumps(list(peaks))))


def get(client, key, url):
    return client.get(url, headers={"x-api-key": key})


def run(args, env, check=None, process=False):
    if process:
        done = subprocess.run([GATE, *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=120,
                              check=False)
    else:
        done = gate_in_process(args, env)
    if check is not None:
        assert done.returncode == check, done.stdout + done.stderr
    return done


def gate_verify(tmp_path, client, packet, *extra, process=False):
    (tmp_path / "reg.json").write_text(json.dumps(client.get("/api/decision/receipt-keys").json))
    path = tmp_path / "packet.json"
    path.write_text(json.dumps(packet))
    done = run(["verify", str(path), "--key-registry", str(tmp_path / "reg.json"), "--json", *extra], {}, process=process)
    return done.returncode, (json.loads(done.stdout) if done.stdout.strip() else done.stderr)


def packet_of(client, key, decision_id, query=""):
    response = get(client, key, f"/api/decision/{decision_id}/packet{query}")
    assert response.status_code == 200, response.json
    return response.json


# --------------------------------------------------------------------------- without a checkpoint


def test_without_a_checkpoint_a_consistent_truncation_passes_every_ledger_check(make_app, api_key, sample_request,
                                                                               tmp_path):
    """The limit SECURITY.md states: what the ledger alone cannot show."""
    app = make_app(checkpoint_log=None)
    client = app.test_client()
    records = decide(client, api_key, sample_request, 5)
    chain_id = records[0]["audit_chain"]["chain_id"]
    truncate(app, chain_id, 3)
    view = get(client, api_key, f"/api/decision/chains/{chain_id}").json
    assert view["chain_size"] == 3 and view["verification"]["valid"] is True, view["verification"]["failures"]
    assert get(client, api_key, f"/api/decision/{records[0]['decision_id']}/verify").json["verified"] is True
    code, result = gate_verify(tmp_path, client, packet_of(client, api_key, records[0]["decision_id"]))
    assert code == 0 and result["verified"] is True


# --------------------------------------------------------------------------- the gate's own log


def test_the_checkpoint_endpoint_publishes_and_logs_a_verifiable_checkpoint(app, client, api_key, issue_key,
                                                                           sample_request, gate_env):
    records = decide(client, api_key, sample_request, 5)
    chain_id = records[0]["audit_chain"]["chain_id"]
    url = f"/api/decision/chains/{chain_id}/checkpoint"
    body = get(client, api_key, url + "?first=2").json
    checkpoint, consistency = body["checkpoint"], body["consistency"]
    key = client.get("/api/decision/receipt-keys").json["keys"][0]["public_key"]
    assert checkpoint["tree_size"] == 5 and verify_checkpoint(checkpoint, key)
    assert (consistency["first"], consistency["second"]) == (2, 5)
    assert verify_consistency(2, 5, consistency["first_root"], checkpoint["root_hash"], consistency["proof"])
    logged = (Path(gate_env["GATE_HOME"]) / "checkpoints.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in logged] == [checkpoint]
    assert get(client, api_key, url).json["consistency"] is None
    assert len((Path(gate_env["GATE_HOME"]) / "checkpoints.jsonl").read_text().splitlines()) == 1  # held once
    # Scoped like the chain view; bad sizes are 400 and log nothing.
    stranger = issue_key(scope="tenant_b")["api_key"]
    assert get(client, stranger, url).status_code == 404 and get(client, stranger, url).json["error"] == "CHAIN_NOT_FOUND"
    assert client.get(url).status_code == 401
    for bad in ("0", "6", "x", "-1"):
        response = get(client, api_key, f"{url}?first={bad}")
        assert response.status_code == 400 and response.json["error"] == "REQUEST_INVALID", bad


def test_the_gates_log_names_a_truncation_and_a_regrown_fork(app, client, api_key, sample_request):
    records = decide(client, api_key, sample_request, 5)
    chain_id = records[0]["audit_chain"]["chain_id"]
    assert get(client, api_key, f"/api/decision/chains/{chain_id}/checkpoint").status_code == 200
    truncate(app, chain_id, 3)

    view = get(client, api_key, f"/api/decision/chains/{chain_id}").json
    assert view["verification"]["valid"] is False and view["verification"]["checks"]["checkpoint_log"] is False
    assert "checkpoint_log.size" in {f["check"] for f in view["verification"]["failures"]}
    assert view["checkpoint"] is None and view["checkpoint_log"]["tree_size"] == 5
    hosted = get(client, api_key, f"/api/decision/{records[0]['decision_id']}/verify").json
    assert hosted["verified"] is False and "checkpoint_log" in hosted["failed_checks"]
    assert hosted["chain_failures"] == ["checkpoint_log.size"]
    for url in (f"/api/decision/{records[0]['decision_id']}/packet", f"/api/decision/chains/{chain_id}/checkpoint",
                f"/api/decision/chains/{chain_id}/consistency?first=1"):
        response = get(client, api_key, url)
        assert response.status_code == 409 and response.json["error"] == "CHAIN_INTEGRITY_FAILED", url
        assert response.json["failed_checks"] == ["checkpoint_log.size"]

    decide(client, api_key, sample_request, 2)  # regrown to size 5: another tree than the held one
    view = get(client, api_key, f"/api/decision/chains/{chain_id}").json
    assert view["chain_size"] == 5 and view["verification"]["checks"]["checkpoint_log"] is False
    assert "checkpoint_log.consistency" in {f["check"] for f in view["verification"]["failures"]}
    response = get(client, api_key, f"/api/decision/{records[0]['decision_id']}/packet")
    assert response.status_code == 409 and response.json["failed_checks"] == ["checkpoint_log.consistency"]


def test_a_growing_chain_stays_consistent_with_the_log_and_cadence_appends(make_app, api_key, sample_request,
                                                                           gate_env):
    app = make_app(checkpoint_every=2)
    client = app.test_client()
    records = decide(client, api_key, sample_request, 5)
    log = Path(gate_env["GATE_HOME"]) / "checkpoints.jsonl"
    assert [json.loads(line)["tree_size"] for line in log.read_text().splitlines()] == [2, 4]
    view = get(client, api_key, f"/api/decision/chains/{records[0]['audit_chain']['chain_id']}").json
    assert view["verification"]["valid"] is True and view["checkpoint_log"]["tree_size"] == 4
    assert get(client, api_key, f"/api/decision/{records[0]['decision_id']}/verify").json["checks"][
        "checkpoint_log"] is True
    # An edited log line is not a checkpoint the gate relies on: the reads say the log is unreadable.
    log.write_text(log.read_text() + "not json\n")
    view = get(client, api_key, f"/api/decision/chains/{records[0]['audit_chain']['chain_id']}").json
    assert "checkpoint_log.unreadable" in {f["check"] for f in view["verification"]["failures"]}


def test_the_cadence_checkpoint_is_written_once_the_answer_is_sent(make_app, api_key, sample_request, gate_env):
    app = make_app(checkpoint_every=1)
    response = app.test_client().post("/api/decide", json=sample_request, headers={"x-api-key": api_key})
    log = Path(gate_env["GATE_HOME"]) / "checkpoints.jsonl"
    assert response.status_code == 200 and not log.exists()  # answered; the checkpoint not yet written
    response.close()  # what the WSGI server does once the answer is sent
    assert [json.loads(line)["tree_size"] for line in log.read_text().splitlines()] == [1]


def test_an_unreadable_gate_log_is_named_and_never_fails_a_decide(make_app, api_key, sample_request, tmp_path):
    app = make_app(checkpoint_log=tmp_path, checkpoint_every=1)  # a folder: neither readable nor writable as a log
    client = app.test_client()
    records = decide(client, api_key, sample_request, 2)  # the cadence checkpoint fails: logged, the decide stands
    chain_id = records[0]["audit_chain"]["chain_id"]
    response = get(client, api_key, f"/api/decision/chains/{chain_id}/checkpoint")
    assert response.status_code == 409 and response.json["failed_checks"] == ["checkpoint_log.unreadable"]
    assert get(client, api_key, f"/api/decision/chains/{chain_id}").json["verification"]["checks"][
        "checkpoint_log"] is False


def test_a_regrown_chain_under_a_kept_stored_checkpoint_is_not_published(make_app, api_key, sample_request):
    """Truncated and regrown, but the ledger's own checkpoint row of that size was left: its root
    is not the stored tree's, so it is never handed to a witness."""
    app = make_app(checkpoint_log=None)
    client = app.test_client()
    records = decide(client, api_key, sample_request, 4)
    chain_id = records[0]["audit_chain"]["chain_id"]
    kept = get(client, api_key, f"/api/decision/chains/{chain_id}/checkpoint").json["checkpoint"]
    with app.extensions["gate"].ledger.engine.connect() as connection:
        stored = connection.execute(select(chain_checkpoints.c.checkpoint_json).where(
            chain_checkpoints.c.tree_size == 4)).scalar()
    truncate(app, chain_id, 2)
    decide(client, api_key, sample_request, 2)
    with app.extensions["gate"].ledger.engine.begin() as connection:
        connection.execute(delete(chain_checkpoints).where(chain_checkpoints.c.tree_size == 4))
        connection.execute(chain_checkpoints.insert().values(chain_id=chain_id, tree_size=4, checkpoint_json=stored))
    response = get(client, api_key, f"/api/decision/chains/{chain_id}/checkpoint")
    assert response.status_code == 409 and response.json["failed_checks"] == ["chain_checkpoints.root_hash"]
    assert kept["tree_size"] == 4


def test_without_a_log_nothing_is_written(make_app, api_key, sample_request, gate_env):
    app = make_app({"GATE_CHECKPOINT_LOG": "off", "GATE_CHECKPOINT_EVERY": "1"})
    client = app.test_client()
    records = decide(client, api_key, sample_request, 2)
    assert get(client, api_key, f"/api/decision/chains/{records[0]['audit_chain']['chain_id']}/checkpoint"
               ).status_code == 200
    assert not (Path(gate_env["GATE_HOME"]) / "checkpoints.jsonl").exists()


# --------------------------------------------------------------------------- a witness's log


def test_a_witness_log_makes_gate_verify_fail_a_truncated_or_forked_chain(make_app, api_key, sample_request,
                                                                         gate_env, tmp_path):
    app = make_app(checkpoint_log=None)  # the gate's own storage is the attacker's: only the witness helps
    client = app.test_client()
    records = decide(client, api_key, sample_request, 4)
    chain_id, first = records[0]["audit_chain"]["chain_id"], records[0]["decision_id"]
    witness = tmp_path / "witness.jsonl"
    save = ["checkpoint", "save", "--scope", "tenant_a", "--log", str(witness)]
    assert "appended to" in run(save, gate_env, check=0).stdout
    assert "already held" in run(save, gate_env, check=0).stdout
    logs = ["--checkpoints", str(witness)]

    code, result = gate_verify(tmp_path, client, packet_of(client, api_key, first), *logs)
    assert code == 0 and result["checks"]["checkpoint_log"] is True
    decide(client, api_key, sample_request)  # the chain grew: a proof from the held size is needed
    code, result = gate_verify(tmp_path, client, packet_of(client, api_key, first), *logs)
    assert code == 1 and "checkpoint_log.consistency" in result["failed_checks"]
    code, result = gate_verify(tmp_path, client, packet_of(client, api_key, first, "?consistency_from=4"), *logs)
    assert code == 0 and result["checks"]["chain_consistency"] is True, result["failed_checks"]

    truncate(app, chain_id, 3)
    packet = packet_of(client, api_key, first)
    assert gate_verify(tmp_path, client, packet)[0] == 0  # without the witness's log: undetectable
    code, result = gate_verify(tmp_path, client, packet, *logs)
    assert code == 1 and {"checkpoint_log", "checkpoint_log.size"} <= set(result["failed_checks"])
    refused = run(save, gate_env, check=1)
    assert "REFUSED" in refused.stderr and "checkpoint_log.size" in refused.stderr
    assert len(witness.read_text().splitlines()) == 1  # nothing appended

    decide(client, api_key, sample_request, 2)  # regrown to 5 leaves: not an extension of the held 4
    packet = packet_of(client, api_key, first, "?consistency_from=4")
    assert packet["chain_consistency"]["first"] == 4
    code, result = gate_verify(tmp_path, client, packet, *logs)
    assert code == 1 and "checkpoint_log.consistency" in result["failed_checks"]
    assert "consistency" in run(save, gate_env, check=1).stderr


def test_an_edited_or_unreadable_witness_log_is_refused(make_app, api_key, sample_request, gate_env, tmp_path):
    app = make_app(checkpoint_log=None)
    client = app.test_client()
    records = decide(client, api_key, sample_request, 2)
    witness = tmp_path / "witness.jsonl"
    run(["checkpoint", "save", "--scope", "tenant_a", "--log", str(witness)], gate_env, check=0, process=True)
    packet = packet_of(client, api_key, records[0]["decision_id"])
    held = json.loads(witness.read_text())
    witness.write_text(json.dumps({**held, "root_hash": "0" * 64}) + "\n")  # edited: its signature fails
    code, result = gate_verify(tmp_path, client, packet, "--checkpoints", str(witness), process=True)
    assert code == 1 and "checkpoint_log" in result["failed_checks"]
    witness.write_text("{not json\n")
    code, message = gate_verify(tmp_path, client, packet, "--checkpoints", str(witness), process=True)
    assert code == 2 and "line 1" in message
    code, message = gate_verify(tmp_path, client, packet, "--checkpoints", str(tmp_path / "missing.jsonl"), process=True)
    assert code == 2 and "does not exist" in message


@pytest.fixture
def served(make_app):
    """The app on a real HTTP port (a thread of this process), for the CLI's --url mode."""
    app = make_app(checkpoint_log=None)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield app, f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_gate_checkpoint_save_from_a_running_gate(served, api_key, issue_key, sample_request, tmp_path):
    app, base = served
    client = app.test_client()
    records = decide(client, api_key, sample_request, 3)
    chain_id = records[0]["audit_chain"]["chain_id"]
    (tmp_path / "reg.json").write_text(json.dumps(client.get("/api/decision/receipt-keys").json))
    witness = tmp_path / "witness.jsonl"
    save = ["checkpoint", "save", "--url", base, "--chain", chain_id, "--api-key-env", "DG_KEY",
            "--key-registry", str(tmp_path / "reg.json"), "--log", str(witness), "--json"]
    env = {"DG_KEY": api_key}
    assert json.loads(run(save, env, check=0).stdout)["tree_size"] == 3
    decide(client, api_key, sample_request, 2)
    assert json.loads(run(save, env, check=0).stdout)["appended"] is True  # extends: proof from 3 to 5
    assert [json.loads(line)["tree_size"] for line in witness.read_text().splitlines()] == [3, 5]
    truncate(app, chain_id, 4)
    assert "checkpoint_log.size" in run(save, env, check=1).stderr
    # Another scope's key sees no such chain; a key the registry does not hold proves nothing.
    assert run(save, {"DG_KEY": issue_key(scope="tenant_b")["api_key"]}, check=2).returncode == 2
    (tmp_path / "reg.json").write_text(json.dumps({"keys": []}))
    assert "no trusted key" in run(save, env, check=1).stderr
