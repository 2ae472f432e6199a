"""`gate dry-run` as a subprocess: a signed run, its verification, tampering, and bad input (the
six refusals run the same command line in process, `tests.cli_in_process`: the subprocess path is
the signed run's and the verification's above them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_in_process import gate_in_process
from tests.workbench.dryrun_support import decide, rule, rulebook, write_dataset
from tests.workbench.manifest_support import signer_of

pytestmark = pytest.mark.slow
GATE = str(Path(sys.executable).parent / "gate")

OLD = rulebook([rule("big", {"field": "amount", "operator": "gt", "value": 100}, "no", "TOO_BIG"),
                rule("vip", {"field": "tier", "operator": "eq", "value": "vip"}, "yes", "VIP", priority=5)])
DRAFT = rulebook([rule("big", {"field": "amount", "operator": "gt", "value": 50}, "no", "TOO_BIG"),
                  rule("vip", {"field": "tier", "operator": "eq", "value": "vip"}, "yes", "VIP", priority=5)],
                 version="2.0.0")


def run(args, env, cwd, process=True):
    if not process:
        return gate_in_process(["dry-run", *args], env, cwd=cwd)
    return subprocess.run([GATE, "dry-run", *args], env={**os.environ, **env}, cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def setup(tmp_path, gate_env):
    facts = [{"amount": a, "tier": t} for a in (10, 60, 120) for t in ("vip", "std")]
    write_dataset(tmp_path / "ds", decide(OLD, facts, no_facts=(5,)), [], signer=signer_of(gate_env))
    (tmp_path / "draft.json").write_text(json.dumps(DRAFT))
    return tmp_path, gate_env


def test_run_verify_and_tamper(setup):
    tmp, env = setup
    done = run(["--rulebook-id", "refunds", "--draft", "draft.json", "--dataset", "ds", "--out", "out", "--json"], env, tmp)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["decisions_evaluated"] == 5 and summary["decisions_unreplayable"] == 1
    assert {"from": "review", "to": "no", "count": 1} in summary["transitions"]
    assert sorted(p.name for p in (tmp / "out").iterdir()) == ["flips.parquet", "migration.json", "report.html", "report.md"]
    manifest = json.loads((tmp / "out" / "migration.json").read_text())
    keyring = json.loads(Path(env["GATE_SIGNING_KEY_FILE"]).read_text())
    assert manifest["signature"]["algorithm"] == "ed25519" and manifest["signature"]["key_id"] in json.dumps(keyring)

    done = run(["--verify", "out", "--draft", "draft.json", "--dataset", "ds"], env, tmp)
    assert done.returncode == 0 and "VERIFIED" in done.stdout, done.stdout + done.stderr
    # `gate verify` checks records: given the manifest, it points to the command that checks it
    done = subprocess.run([GATE, "verify", "out/migration.json"], env={**os.environ, **env}, cwd=tmp,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "") and "decision None" not in done.stderr
    assert done.stderr.startswith("gate verify: VERIFY_INPUT_UNREADABLE: out/migration.json is a dry-run's "
                                  "migration manifest (rulebook_migration_v1), not a record: check it with "
                                  "gate dry-run --verify out/migration.json"), done.stderr

    manifest["dry_run"]["decisions_changed"] += 1
    (tmp / "tampered.json").write_text(json.dumps(manifest))
    done = run(["--verify", "tampered.json", "--json"], env, tmp)
    assert done.returncode == 1
    checks = json.loads(done.stdout)["checks"]
    assert checks["result_hash"] is False and checks["migration_hash"] is False

    other = dict(env, GATE_SIGNING_KEY_FILE=str(tmp / "other-keys.json"))
    subprocess.run([GATE, "keys", "signing-init"], env={**os.environ, **other}, check=True, capture_output=True)
    done = run(["--verify", "out"], other, tmp)
    assert done.returncode == 1 and "no trusted Ed25519 key" in done.stdout


@pytest.mark.parametrize("case", ["invalid_draft", "unknown_rulebook", "empty_scope", "other_version",
                                  "no_key", "unreadable_draft"])
def test_bad_input_writes_nothing(setup, case):
    tmp, env = setup
    args = ["--rulebook-id", "refunds", "--draft", "draft.json", "--dataset", "ds", "--out", "out"]
    expected = {"invalid_draft": "DRAFT_INVALID", "unknown_rulebook": "RULEBOOK_UNKNOWN",
                "empty_scope": "HISTORY_EMPTY", "other_version": "DATASET_INVALID",
                "no_key": "SIGNING_KEY_MISSING", "unreadable_draft": "DRAFT_UNREADABLE"}[case]
    if case == "invalid_draft":
        bad = json.loads(json.dumps(DRAFT))
        bad["rules"][0]["condition"]["handler"] = "exec"
        (tmp / "draft.json").write_text(json.dumps(bad))
    elif case == "unknown_rulebook":
        (tmp / "draft.json").write_text(json.dumps(dict(DRAFT, rulebook_id="loans")))
        args[1] = "loans"
    elif case == "empty_scope":
        args += ["--scope", "nobody"]
    elif case == "other_version":
        (tmp / "ds" / "manifest.json").write_text(json.dumps({"dataset_schema_version": "decision_dataset_v9"}))
    elif case == "no_key":
        env = dict(env, GATE_SIGNING_KEY_FILE=str(tmp / "missing-keys.json"))
    else:
        (tmp / "draft.json").write_text("{not json")
    done = run(args + ["--json"], env, tmp, process=False)
    assert done.returncode == 2, done.stdout + done.stderr
    error = json.loads(done.stderr)
    assert error["error"] == expected
    if case == "invalid_draft":
        assert error["errors"][0]["field"] == "rulebook.rules[0].condition.handler"
    assert not (tmp / "out").exists()
    text = run(args, env, tmp, process=case == "invalid_draft")  # one refusal as the shell sees it
    assert text.returncode == 2 and f"gate dry-run: {expected}:" in text.stderr
