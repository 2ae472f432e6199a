"""`gate report` and `gate scopes benchmarks` as subprocesses: the API's sealed reports on the
terminal, from the live ledger and from a Parquet dataset (same hash), and their refusals. The
benchmark opt-ins and the reads of an export's rollups run the same command lines in this process
(`tests.cli_in_process`) after their first subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gate.ledger import Ledger
from tests.cli_in_process import gate_in_process as here  # `gate ARGS` in this process
from tests.workbench.ledger_support import LedgerWriter, at
from tests.workbench.workbench_support import write_dataset
from workbench.dataset.load import from_ledger
from workbench.reports.policy import ReportParams, effectiveness_report

GATE = str(Path(sys.executable).parent / "gate")
POLICY = "pricing_exception"


def gate(args, env):
    return subprocess.run([GATE, *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=120)


@pytest.fixture
def seeded(gate_env, tmp_path):
    writer = LedgerWriter(gate_env["GATE_DATABASE_URL"], tmp_path / "writer-keys.json")
    for i in range(15):
        for scope in ("tenant_a", "peer_1", "peer_2", "peer_3"):
            record = writer.decide(scope, at(1 + i % 3, 1 + i, ms=i), discount=10 + i % 4, margin=15 + i % 3 * 8)
            writer.receipt("outcome", scope, record, at(4, 1 + i), ("succeeded", "failed", "pending")[i % 3])
    writer.close()
    return gate_env


def test_report_json_is_the_api_report_from_ledger_and_dataset(seeded, tmp_path):
    done = gate(["report", "effectiveness", "--policy", POLICY, "--scope", "tenant_a", "--json"], seeded)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    ledger = Ledger(seeded["GATE_DATABASE_URL"])
    frames = from_ledger(ledger, "tenant_a", POLICY, limit=1000)
    assert report == effectiveness_report(frames, POLICY, ReportParams())
    write_dataset(tmp_path / "ds", frames.decisions.collect().to_dicts(), frames.outcomes.collect().to_dicts())
    ledger.dispose()
    from_files = gate(["report", "effectiveness", "--policy", POLICY, "--scope", "tenant_a", "--dataset",
                       str(tmp_path / "ds"), "--json", "--allow-unsigned"], seeded)
    assert from_files.returncode == 0, from_files.stderr
    # The same report, naming (and so, through its hash, binding to) the dataset manifest it read.
    from_dataset = json.loads(from_files.stdout)
    manifest = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    assert from_dataset["source"] == {"kind": "dataset", "dataset_hash": manifest["dataset_hash"], "key_id": None,
                                      "trust": "unsigned", "synthetic": False}
    # A ledger report states its window's removed inputs by cause; a dataset's rows carry no cause.
    assert report["inputs_removed"] == {"count": 0, "by": {}} and "inputs_removed" not in from_dataset
    same = ("source", "inputs_removed", "effectiveness_hash")
    assert {k: v for k, v in from_dataset.items() if k not in same} == \
        {k: v for k, v in report.items() if k not in same}
    from gate.protocol.report_envelopes import verify

    assert verify("effectiveness", from_dataset) and from_dataset["effectiveness_hash"] != report["effectiveness_hash"]


def test_readable_text_by_default(seeded):
    text = gate(["report", "effectiveness", "--policy", POLICY, "--scope", "tenant_a"], seeded)
    assert text.returncode == 0, text.stderr
    assert "Effectiveness score" in text.stdout and "Sample: 15 decisions" in text.stdout
    assert "effectiveness_hash " in text.stdout
    assert "Health: " in text.stdout and " over the latest 15 decisions (limit 1000, every version), " in text.stdout
    anomalies = gate(["report", "anomalies", "--policy", POLICY, "--scope", "tenant_a", "--min-sample", "3",
                      "--threshold", "0"], seeded)
    assert anomalies.returncode == 0, anomalies.stderr
    assert "anomalies   recommendation:" in anomalies.stdout and "anomaly_hash " in anomalies.stdout


def test_scopes_opt_in_drives_benchmarks(seeded):
    def bench():
        done = here(["report", "benchmarks", "--policy", POLICY, "--scope", "tenant_a", "--json"], seeded)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    assert bench()["cross_customer"]["status"] == "not_opted_in"
    status = gate(["scopes", "benchmarks", "--scope", "tenant_a", "--status", "--json"], seeded)
    assert json.loads(status.stdout)["opted_in"] is False
    for scope in ("tenant_a", "peer_1", "peer_2", "peer_3"):
        done = here(["scopes", "benchmarks", "--scope", scope, "--opt-in"], seeded)
        assert done.returncode == 0 and "is opted in to" in done.stdout
    report = bench()
    assert report["cross_customer"]["status"] == "available" and "peer" not in json.dumps(report)
    text = gate(["report", "benchmarks", "--policy", POLICY, "--scope", "tenant_a"], seeded).stdout
    assert "Cross-customer: available" in text and "success_rate" in text
    assert here(["scopes", "benchmarks", "--scope", "peer_3", "--opt-out"], seeded).returncode == 0
    assert bench()["cross_customer"]["status"] == "insufficient_cohort"


@pytest.mark.parametrize("args,message", [
    (["report", "effectiveness", "--policy", POLICY, "--scope", "a", "--limit", "0"], "limit must be"),
    (["report", "effectiveness", "--policy", POLICY, "--scope", "a", "--limit", "all"], "--limit all"),
    (["report", "effectiveness", "--policy", POLICY], "--scope is required"),
    (["report", "anomalies", "--policy", POLICY, "--scope", "a", "--threshold", "7"], "threshold must be"),
    (["report", "effectiveness", "--policy", POLICY, "--scope", "a", "--threshold", "0.5"], "not a parameter"),
])
def test_bad_input_exits_2_with_the_reason(gate_env, args, message):
    done = gate(args, gate_env)
    assert done.returncode == 2 and message in done.stderr and done.stdout == ""


def test_dataset_of_another_schema_version_is_refused(gate_env, tmp_path):
    write_dataset(tmp_path / "old", [], [], version="decision_dataset_v0")
    done = gate(["report", "effectiveness", "--policy", POLICY, "--dataset", str(tmp_path / "old")], gate_env)
    assert done.returncode == 2 and "decision_dataset_v0" in done.stderr


def test_whole_history_reports_from_an_export_merge_its_rollups(seeded, tmp_path):
    """`gate report --dataset DIR --limit all` answers from the export's report rollups, and the
    answer is the report the engines compute from the rows."""
    from dataclasses import replace

    from workbench.dataset.load import from_dataset
    from workbench.reports.policy import anomaly_report

    out = tmp_path / "ds"
    exported = gate(["export", "--out", str(out)], seeded)
    assert exported.returncode == 0, exported.stderr
    args = ["--policy", POLICY, "--dataset", str(out), "--limit", "all", "--min-sample", "3", "--json"]
    done = here(["report", "anomalies", "--scope", "tenant_a", "--threshold", "0", *args], seeded)
    assert done.returncode == 0, done.stderr
    from gate.keys.config import SigningSetup
    from workbench.dataset.trust import Trust

    own = SigningSetup.load(Path(seeded["GATE_SIGNING_KEY_FILE"]), None, "hmac").trust_anchors()
    frames = from_dataset(out, scopes=["tenant_a"], policy_id=POLICY, limit=None, trust=Trust(anchors=own))
    assert frames.rollup is not None and frames.source["trust"] == "signed"
    params = ReportParams(limit=None, min_sample=3, threshold=0.0)
    assert json.loads(done.stdout) == anomaly_report(replace(frames, rollup=None), POLICY, params)

    # It really reads them: a stored count changed by hand changes the answer …
    def effective(*extra):
        run = here(["report", "effectiveness", "--scope", "tenant_a", *args, *extra], seeded)
        assert run.returncode == 0, run.stderr
        return json.loads(run.stdout)["sample"]["decisions_considered"]

    assert effective() == 15
    manifest = json.loads((out / "manifest.json").read_text())
    sample = out / manifest["rollups"]["files"]["effectiveness.sample"]
    import polars as pl

    from workbench.dataset import integrity
    from workbench.dataset.location import open_location

    pl.read_parquet(sample).with_columns(pl.col("decisions") * 2).write_parquet(sample)
    # (changed behind the manifest's back it is refused: tests/cli/test_dataset_integrity_cli.py)
    manifest["rollups"]["file_digests"]["effectiveness.sample"].update(
        integrity.describe_file(open_location(str(out)), manifest["rollups"]["files"]["effectiveness.sample"]))
    (out / "manifest.json").write_text(json.dumps(integrity.seal(manifest, None)))
    assert effective("--allow-unsigned") == 30  # relisted by hand: unsigned, read only by opt-in
    # … and a manifest whose rollups are not its last run's is answered from the rows.
    manifest["rollups"]["run"] = 0
    (out / "manifest.json").write_text(json.dumps(integrity.seal(manifest, None)))
    assert effective("--allow-unsigned") == 15
