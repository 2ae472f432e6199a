"""The `gate` console script through its real entry point (subprocesses). A test that runs
`gate verify` again on another input, once its first run proved the entry point, runs the
repeats in process (`tests.cli_in_process`): the same `main`, exit status and output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_in_process import gate_in_process

GATE = str(Path(sys.executable).parent / "gate")


def run(args, env, check=True, process=True):
    if process:
        done = subprocess.run([GATE, *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=60)
    else:
        done = gate_in_process(args, env)
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_keys_create_prints_the_key_once_as_json(gate_env):
    out = json.loads(run(["keys", "create", "--scope", "acme", "--plan", "starter", "--rate-limit", "5",
                          "--monthly-cap", "100", "--json"], gate_env).stdout)
    assert out["api_key"].startswith("dg_") and out["scope"] == "acme"
    assert (out["rate_limit"], out["monthly_cap"]) == (5, 100)
    listing = run(["keys", "list", "--json"], gate_env).stdout
    assert out["api_key"] not in listing and "key_hash" not in listing
    assert json.loads(listing)[0]["key_id"] == out["key_id"]


@pytest.mark.parametrize("args", [["--plan", "platinum"], ["--rate-limit", "0"], ["--monthly-cap", "-1"]])
def test_keys_create_rejects_bad_limits(gate_env, args):
    done = run(["keys", "create", "--scope", "acme", *args, "--json"], gate_env, check=False)
    assert done.returncode == 2 and done.stderr.startswith("gate keys: CLI_REFUSED: ") and done.stderr.count("\n") == 1


def test_signing_init_refuses_to_overwrite_and_rotate_keeps_history(gate_env, tmp_path):
    env = {**gate_env, "GATE_SIGNING_KEY_FILE": str(tmp_path / "k.json")}
    first = json.loads(run(["keys", "signing-init"], env).stdout)
    assert oct((tmp_path / "k.json").stat().st_mode & 0o777) == "0o600"
    assert run(["keys", "signing-init"], env, check=False).returncode == 2
    rotated = json.loads(run(["keys", "signing-rotate"], env).stdout)
    assert rotated["retired_key_ids"] == [first["active_key_id"]]
    assert rotated["active_key_id"] != first["active_key_id"]


def test_disable_unknown_key_fails(gate_env):
    done = run(["keys", "disable", "key_nope"], gate_env, check=False)
    assert done.returncode == 2 and "CLI_REFUSED: no API key" in done.stderr


def test_serve_refuses_several_workers_without_redis(gate_env):
    env = dict(gate_env)
    done = subprocess.run([GATE, "serve", "--workers", "2"], env={k: v for k, v in os.environ.items()
                          if k != "GATE_REDIS_URL"} | env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "GATE_REDIS_URL" in done.stderr


def test_verify_offline_exit_codes(client, api_key, sample_request, tmp_path, gate_env):
    record = client.post("/api/decide", json=sample_request, headers={"x-api-key": api_key}).json
    registry = client.get("/api/decision/receipt-keys").json
    (tmp_path / "r.json").write_text(json.dumps(record))
    (tmp_path / "reg.json").write_text(json.dumps(registry))
    (tmp_path / "in.json").write_text(json.dumps(sample_request))
    ok = run(["verify", str(tmp_path / "r.json"), "--key-registry", str(tmp_path / "reg.json"),
              "--input", str(tmp_path / "in.json"), "--json"], {})
    assert json.loads(ok.stdout)["verified"] is True
    # integrity only, no trust anchor: not verified
    assert run(["verify", str(tmp_path / "r.json")], {}, check=False, process=False).returncode == 1
    tampered = dict(record, verdict="no")
    (tmp_path / "t.json").write_text(json.dumps(tampered))
    bad = run(["verify", str(tmp_path / "t.json"), "--key-registry", str(tmp_path / "reg.json")], {}, check=False,
              process=False)
    assert bad.returncode == 1 and "[FAIL] record_hash" in bad.stdout
    assert run(["verify", str(tmp_path / "missing.json")], {}, check=False, process=False).returncode == 2


def test_verify_with_hmac_secret_from_environment(make_app, api_key, sample_request, tmp_path):
    app = make_app({"GATE_RECEIPT_HMAC_SECRET": "k" * 40})
    record = app.test_client().post("/api/decide", json=sample_request, headers={"x-api-key": api_key}).json
    (tmp_path / "r.json").write_text(json.dumps(record))
    assert run(["verify", str(tmp_path / "r.json"), "--hmac-secret-env", "SECRET"], {"SECRET": "k" * 40}).returncode == 0
    wrong = run(["verify", str(tmp_path / "r.json"), "--hmac-secret-env", "SECRET"], {"SECRET": "x" * 40},
                check=False, process=False)
    assert wrong.returncode == 1


def test_verify_runs_with_only_the_core_importable(client, api_key, sample_request, tmp_path):
    """`gate verify` must not import Flask, SQLAlchemy, Polars or Panel."""
    record = client.post("/api/decide", json=sample_request, headers={"x-api-key": api_key}).json
    (tmp_path / "r.json").write_text(json.dumps(record))
    blocker = tmp_path / "block"
    blocker.mkdir()
    for name in ("flask", "sqlalchemy", "polars", "panel", "werkzeug", "alembic", "api"):
        (blocker / f"{name}.py").write_text(f"raise ImportError('{name} is not installed')\n")
    code = ("import sys; from gate_cli.main import main; "
            f"sys.exit(main(['verify', {str(tmp_path / 'r.json')!r}, '--json']))")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(blocker)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr  # integrity valid, authenticity unproven without a key
    assert json.loads(done.stdout)["integrity_valid"] is True


def test_packet_verifies_offline_and_names_tampering(client, api_key, sample_request, tmp_path):
    records = [client.post("/api/decide", json=sample_request, headers={"x-api-key": api_key}).json for _ in range(3)]
    record = records[0]
    client.post(f"/api/decision/{record['decision_id']}/execution", headers={"x-api-key": api_key}, json={
        "execution_status": "executed", "decision_record_hash": record["record_hash"],
        "decision_receipt_hash": record["receipt_hash"]})
    packet = client.get(f"/api/decision/{record['decision_id']}/packet?include_input=true",
                        headers={"x-api-key": api_key}).json
    (tmp_path / "reg.json").write_text(json.dumps(client.get("/api/decision/receipt-keys").json))
    (tmp_path / "p.json").write_text(json.dumps(packet))
    ok = run(["verify", str(tmp_path / "p.json"), "--key-registry", str(tmp_path / "reg.json")], {})
    assert "FAIL" not in ok.stdout
    packet["execution_receipts"][0]["execution_status"] = "failed"
    (tmp_path / "t.json").write_text(json.dumps(packet))
    bad = run(["verify", str(tmp_path / "t.json"), "--key-registry", str(tmp_path / "reg.json"), "--json"], {},
              check=False, process=False)
    assert bad.returncode == 1
    assert "execution_receipts[0].execution_hash" in json.loads(bad.stdout)["failed_checks"]
