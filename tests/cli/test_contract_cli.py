"""`gate conformance` and `gate migration check` as subprocesses, against a live `gate serve`.
The refused variants of a migration manifest run `gate migration check` in this process
(`tests.cli_in_process`): what it prints and exits with, seven subprocess start-ups fewer."""

from __future__ import annotations

import copy
import json
import os
import subprocess

import pytest

from tests.cli_in_process import gate_in_process
from tests.conftest import ROOT
from tests.server.support import GATE, Server, call

MANIFEST = ROOT / "gate" / "data" / "migrations" / "refund-approval-2026-08-01.json"
CANDIDATE = ROOT / "gate" / "data" / "rulebooks" / "refund-approval-2026-08-01.json"


def run(*args, env=None):
    return subprocess.run([GATE, *args], env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture
def live(gate_env, tmp_path):
    env = {**os.environ, **gate_env}
    env.pop("GATE_REDIS_URL", None)
    server = Server(env, tmp_path / "server.log", workers=1).start()
    yield server
    server.stop()


def test_conformance_runner_against_a_live_server(live, issue_key):
    key = issue_key()["api_key"]
    done = run("conformance", "--endpoint", live.base, "--api-key", key, "--json")
    report = json.loads(done.stdout)
    by_id = {f["fixture_id"]: f for f in report["fixtures"]}
    status, _, adapters = call("GET", live.base + "/api/decision/adapters")
    listed = status == 200 and "refund_window" in json.dumps(adapters)
    if listed:  # the endpoint publishes the adapter: every fixture must pass, exit 0
        assert done.returncode == 0, done.stdout
        assert report["ok"] and report["passed"] == len(report["fixtures"])
    else:  # honest about what could not run: skipped with the reason, exit 3 (incomplete, not a pass)
        assert done.returncode == 3, done.stdout + done.stderr
        assert by_id["adapter-rulebook-approval"]["result"] == "skipped"
        assert "refund_window@1.0.0" in by_id["adapter-rulebook-approval"]["reason"]
        assert report["failed"] == 0 and report["passed"] == len(report["fixtures"]) - 1
    for fixture_id in ("direct-rulebook-approval", "rejected-executable-payload", "rejected-output-material-top-level",
                       "rejected-output-material-context-inputs", "unsupported-binding-mode", "binding-mode-conflict",
                       "needs-input"):
        assert by_id[fixture_id]["result"] == "passed", by_id[fixture_id]
    # The key travels from the environment too, and never appears in the output.
    text = run("conformance", "--endpoint", live.base, env={"GATE_API_KEY": key})
    assert key not in text.stdout + text.stderr and "direct-rulebook-approval" in text.stdout
    # Without a key every keyed fixture fails (401 is never a result to accept): exit 1.
    assert run("conformance", "--endpoint", live.base).returncode == 1
    assert run("conformance", "--endpoint", "ftp://x").returncode == 2


def test_migration_check_gates_the_golden_corpus(tmp_path):
    done = run("migration", "check", str(MANIFEST), "--rulebook", str(CANDIDATE), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["ok"] and result["gate_passed"] and result["problems"] == []
    assert result["observed_drift"] == ["verdict", "application_verdict", "action", "reason_code", "matched_rule_id"]
    by_id = {f["fixture_id"]: f for f in result["fixtures"]}
    assert by_id["refund-mid-amount"]["mode"] == "candidate"
    assert by_id["refund-mid-amount"]["drift_fields"] == result["observed_drift"]
    assert by_id["pricing-approve"] == {"fixture_id": "pricing-approve", "rulebook_id": "pricing_exception",
                                        "mode": "historical", "replay_status": "matched", "migrated": False,
                                        "compared": {"verdict": True, "evidence": True, "record_hash": True,
                                                     "policy_bundle_hash": True}, "drift_fields": []}
    manifest = json.loads(MANIFEST.read_text())

    def check(changed, *extra):
        path = tmp_path / "manifest.json"
        path.write_text(json.dumps(changed))
        return gate_in_process(["migration", "check", str(path), *extra, "--json"])

    not_approved = copy.deepcopy(manifest)
    not_approved["status"], not_approved["approval"]["status"] = "proposed", "pending"
    done = check(not_approved, "--rulebook", str(CANDIDATE))
    assert done.returncode == 1 and json.loads(done.stdout)["ok"] and not json.loads(done.stdout)["gate_passed"]
    assert any("not approved" in p for p in json.loads(done.stdout)["problems"])

    understated = copy.deepcopy(manifest)
    understated["expected_drift"]["fields"] = ["reason_code", "matched_rule_id"]
    done = check(understated, "--rulebook", str(CANDIDATE))
    assert done.returncode == 1 and any("differs from the declared drift" in p
                                        for p in json.loads(done.stdout)["problems"])

    wrong_class = copy.deepcopy(manifest)
    wrong_class["compatibility_class"] = "evaluator"
    assert check(wrong_class, "--rulebook", str(CANDIDATE)).returncode == 1

    invalid = copy.deepcopy(manifest)
    invalid["status"] = "shipped"
    done = check(invalid, "--rulebook", str(CANDIDATE))
    assert done.returncode == 1 and not json.loads(done.stdout)["ok"]
    assert json.loads(done.stdout)["problems"][0].startswith("schema: status")

    assert check(manifest).returncode == 1  # the candidate body is not in the corpus: cannot run
    other = ROOT / "gate" / "data" / "rulebooks" / "refund-approval.json"
    assert "does not hash" in check(manifest, "--rulebook", str(other)).stdout
    assert gate_in_process(["migration", "check", str(tmp_path / "missing.json")]).returncode == 2
    text = run("migration", "check", str(MANIFEST), "--rulebook", str(CANDIDATE))
    assert text.returncode == 0 and "gate_passed: true" in text.stdout
