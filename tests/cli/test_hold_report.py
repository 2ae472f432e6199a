"""The hold report (`hold_report_v1`, issue 43 item 6) through the one registry: `gate report holds`
as a subprocess from the live ledger and from a signed export, and the API's route with its
parameter refusals and its scoping. After each test's first subprocesses, the same command lines
run in this process (`tests.cli_in_process`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gate.protocol.report_envelopes import verify
from gate.reports.registry import HOLD_REPORT
from tests.cli_in_process import gate_in_process as here  # `gate ARGS` in this process
from tests.workbench.hold_support import HoldWriter
from tests.workbench.ledger_support import at

GATE = str(Path(sys.executable).parent / "gate")
POLICY = "pricing_exception"
DETERMINISTIC = ("time_to_resolution", "approval_rate", "expiry_rate", "later_failed")


def gate(args, env):
    return subprocess.run([GATE, *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=180,
                          check=False)


@pytest.fixture
def seeded(gate_env, tmp_path):
    """tenant_a: five held decisions (two approved by two reviewers, one denied, one expired, one
    open) and an outcome of each approved one; tenant_b: one open hold."""
    writer = HoldWriter(gate_env["GATE_DATABASE_URL"], tmp_path / "writer-keys.json")
    held = [writer.held("tenant_a", at(1, 1 + i)) for i in range(5)]
    writer.approve("tenant_a", held[0], at(1, 1, 13), reviewer="key_alice")   # 1 h
    writer.approve("tenant_a", held[1], at(1, 2, 15), reviewer="key_bob")     # 3 h
    writer.deny("tenant_a", held[2], at(1, 3, 14), reviewer="key_alice")      # 2 h
    writer.sweep(at(1, 5, 13))                                                # held[3] (01-04) expires
    writer.approve("tenant_a", held[4], at(1, 5, 13, 30), reviewer="key_bob")  # 1.5 h, before its deadline
    writer.receipt("outcome", "tenant_a", held[0], at(2, 1), "failed")
    writer.receipt("outcome", "tenant_a", held[1], at(2, 1), "succeeded")
    writer.held("tenant_b", at(1, 6))
    writer.close()
    return gate_env


def expected_policy_figures(report):
    figures = report["holds"]
    assert figures["time_to_resolution"] == {"n": 4, "p50_seconds": 6300.0, "p90_seconds": 9720.0}
    assert figures["approval_rate"] == {"approved": 3, "denied": 1, "n": 4, "rate": 0.75,
                                        "interval_95": [0.3006, 0.9544]}
    assert figures["expiry_rate"] == {"expired": 1, "n": 5, "rate": 0.2, "interval_95": [0.0362, 0.6245]}
    # held[4] was approved without an outcome record: no terminal outcome, not a success.
    assert figures["later_failed"] == {"failed": 1, "succeeded": 1, "n": 2, "rate": 0.5,
                                       "interval_95": [0.0945, 0.9055], "too_young": 0, "no_terminal_outcome": 1}
    assert figures["backlog"]["open"] == 0
    assert [(r["reviewer"], r["resolved"]) for r in report["reviewers"]] == [("key_alice", 2), ("key_bob", 2)]
    assert [q["queue"] for q in report["queues"]] == ["default"]


def test_gate_report_holds_from_a_signed_export_and_from_the_ledger(seeded, tmp_path):
    out = tmp_path / "ds"
    exported = gate(["export", "--out", str(out), "--settle-seconds", "0"], seeded)
    assert exported.returncode == 0, exported.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    done = gate(["report", "holds", "--policy", POLICY, "--scope", "tenant_a", "--dataset", str(out), "--json"],
                seeded)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert verify(HOLD_REPORT, report) and report["hold_report_version"] == "hold_report_v1"
    assert report["parameters"] == {"policy_version": None, "limit": 1000, "outcome_window_days": 30}
    assert report["source"]["dataset_hash"] == manifest["dataset_hash"] and report["source"]["trust"] == "signed"
    assert report["window"]["as_of"] == manifest["hold_chains"]["tenant_a"]["as_of"]
    expected_policy_figures(report)
    live = here(["report", "holds", "--policy", POLICY, "--scope", "tenant_a", "--json"], seeded)
    assert live.returncode == 0, live.stderr
    from_ledger = json.loads(live.stdout)
    assert "source" not in from_ledger
    assert {k: from_ledger["holds"][k] for k in DETERMINISTIC} == {k: report["holds"][k] for k in DETERMINISTIC}
    assert from_ledger["reviewers"] == report["reviewers"]
    # Every scope of the dataset: tenant_b's open hold joins the backlog.
    every = json.loads(here(["report", "holds", "--policy", POLICY, "--dataset", str(out), "--json"], seeded).stdout)
    assert every["holds"]["backlog"]["open"] == 1 and every["holds"]["approval_rate"]["n"] == 4


def test_gate_report_holds_text_and_refusals(seeded):
    text = gate(["report", "holds", "--policy", POLICY, "--scope", "tenant_a", "--outcome-window-days", "0"], seeded)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == f"Holds of policy {POLICY} (all versions) from the live ledger"
    assert "  limit=1000  outcome_window_days=0" in lines
    assert ("Holds: 0 open, oldest n/a; time to resolution p50 1.8 h (n=4); expiry rate 20.0% "
            "(95% 3.6–62.5%, n=5)") in lines
    assert "  approval rate 75.0% (95% 30.1–95.4%, n=4)" in lines
    assert "Reviewer key_bob: 2 resolved" in lines and lines[-1].startswith("holds_hash ")
    refused = here(["report", "holds", "--policy", POLICY, "--scope", "tenant_a", "--threshold", "0.5"], seeded)
    assert refused.returncode == 2 and "threshold" in refused.stderr
    window = here(["report", "holds", "--policy", POLICY, "--scope", "tenant_a", "--outcome-window-days", "4000"],
                  seeded)
    assert window.returncode == 2 and "outcome_window_days must be from 0 to 3650" in window.stderr


def test_the_api_serves_the_hold_report_of_the_callers_scope_only(seeded, make_app):
    from gate.settings import Settings
    from gate_cli.keys_cmd import create_key

    settings = Settings.from_env(seeded)
    own = create_key(settings, "tenant_a", "growth", 10_000, None)["api_key"]
    other = create_key(settings, "tenant_b", "growth", 10_000, None)["api_key"]
    client = make_app().test_client()
    path = f"/api/decision/policies/{POLICY}/holds"
    answer = client.get(path, headers={"x-api-key": own})
    assert answer.status_code == 200 and verify(HOLD_REPORT, answer.json)
    expected_policy_figures(answer.json)
    theirs = client.get(path, headers={"x-api-key": other}).json
    assert theirs["holds"]["backlog"]["open"] == 1 and theirs["holds"]["approval_rate"]["n"] == 0
    assert theirs["reviewers"] == []
    bad = client.get(path + "?min_sample=3", headers={"x-api-key": own})
    assert bad.status_code == 400 and bad.json["error"] == "REQUEST_INVALID"
    anonymous = client.get(path)
    assert anonymous.status_code == 401 and anonymous.json["error"] == "SVC_POLICY_HOLDS_UNAUTHORIZED"
    spec = client.get("/openapi.json").json["paths"]["/api/decision/policies/{policy_id}/holds"]
    assert {p["name"] for p in spec["get"]["parameters"]} >= {"policy_version", "limit", "outcome_window_days"}
