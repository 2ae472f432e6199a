"""`gate export --format iceberg` as a subprocess: a run, a rerun, the JSON summary with the
snapshots; `gate report` and `gate dry-run` (and its --verify) over the Iceberg layout equal to
the Parquet layout; and one-line errors with exit status 2 that write nothing: an unreachable
catalog, options without the format, a layout switch, a missing snapshot, a changed data file.
After the first Iceberg export and the first refusal (subprocesses: the entry point and exit
status 2 as a shell sees them), every other command line runs in this process
(`tests.cli_in_process`): one import of PyIceberg instead of one per command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_in_process import gate_in_process as here  # `gate ARGS` in this process
from tests.workbench.ledger_support import LedgerWriter, at
from workbench.dataset.iceberg import open_catalog, public_uri

GATE = str(Path(sys.executable).parent / "gate")
POLICY = "pricing_exception"
ROOT = Path(__file__).resolve().parents[2]


def gate(args, env, cwd=None):
    return subprocess.run([GATE, *args], env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=180, cwd=cwd)


@pytest.fixture
def seeded(gate_env, tmp_path):
    writer = LedgerWriter(gate_env["GATE_DATABASE_URL"], Path(gate_env["GATE_SIGNING_KEY_FILE"]))
    for index in range(24):
        scope = ("acme", "globex")[index % 2]
        record = writer.decide(scope, at(1 + index % 4, 3 + index % 20, ms=index), discount=5 + index % 30)
        writer.receipt("outcome", scope, record, at(5, 4 + index % 20, ms=index), ("succeeded", "failed")[index % 2])
    writer.close()
    return gate_env


def one_error_line(done) -> str:
    assert done.returncode == 2 and done.stdout == "", (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_export_report_and_dry_run_over_the_iceberg_layout(seeded, tmp_path):
    ice, parquet = tmp_path / "ice", tmp_path / "parquet"
    done = gate(["export", "--out", str(ice), "--format", "iceberg"], seeded)
    assert done.returncode == 0, done.stderr
    assert "export run 1" in done.stdout and "decisions +24" in done.stdout and "Iceberg snapshots: decisions " in done.stdout
    assert (ice / "iceberg" / "catalog.db").is_file() and (ice / "iceberg" / "warehouse").is_dir()
    assert not (ice / "decisions").exists() and (ice / "facts").is_dir()
    again = json.loads(here(["export", "--out", str(ice), "--format", "iceberg", "--json"], seeded).stdout)
    manifest = json.loads((ice / "manifest.json").read_text())
    assert again["run"] is None and again["snapshots"]["decisions"] == \
        manifest["iceberg"]["tables"]["decisions"]["snapshot_id"]
    assert here(["export", "--out", str(parquet)], seeded).returncode == 0
    line = one_error_line(here(["export", "--out", str(ice), "--format", "parquet"], seeded))
    assert "holds an Iceberg dataset: export it with --format iceberg" in line

    args = ["report", "effectiveness", "--policy", POLICY, "--scope", "acme", "--json", "--dataset"]
    reports = [json.loads(here([*args, str(root)], seeded).stdout) for root in (ice, parquet)]
    assert reports[0]["source"]["dataset_hash"] == manifest["dataset_hash"]
    same = ("source", "effectiveness_hash")
    assert {k: v for k, v in reports[0].items() if k not in same} == \
        {k: v for k, v in reports[1].items() if k not in same}

    draft = json.loads((ROOT / "gate" / "data" / "rulebooks" / "pricing-exception.json").read_text())
    draft["version"] += "-draft"
    draft["rules"][0]["condition"]["value"] = 18
    (tmp_path / "draft.json").write_text(json.dumps(draft))
    summaries = []
    for name in ("ice", "parquet"):
        done = here(["dry-run", "--rulebook-id", POLICY, "--draft", "draft.json", "--dataset", name,
                     "--out", f"out-{name}", "--json"], seeded, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        # The result names its dataset (source), so its hashes differ; every figure is the same.
        summaries.append({k: v for k, v in json.loads(done.stdout).items()
                          if k not in ("source", "out", "result_hash", "migration_hash")})
    assert summaries[0] == summaries[1] and summaries[0]["decisions_changed"] > 0
    done = here(["dry-run", "--verify", "out-ice", "--draft", "draft.json", "--dataset", "ice"], seeded, cwd=tmp_path)
    assert done.returncode == 0 and "VERIFIED" in done.stdout, done.stdout + done.stderr

    # A changed data file of a table fails the verification of the dry-run's dataset.
    entry = manifest["iceberg"]["tables"]["outcomes"]["files"][0]
    path = Path(manifest["iceberg"]["warehouse"].removeprefix("file://")) / entry["path"]
    data = path.read_bytes()
    path.write_bytes(data[:-20] + bytes(20))
    done = here(["dry-run", "--verify", "out-ice", "--draft", "draft.json", "--dataset", "ice", "--json"], seeded,
                cwd=tmp_path)
    assert done.returncode == 1 and json.loads(done.stdout)["checks"]["dataset_files"] is False
    line = one_error_line(here([*args, str(ice)], seeded))
    assert "does not match its sha256" in line and entry["path"] in line
    path.write_bytes(data)

    # A missing snapshot: the catalog's table is not the one the manifest names.
    catalog = open_catalog(f"sqlite:///{ice / 'iceberg' / 'catalog.db'}", manifest["iceberg"]["warehouse"])
    schema = catalog.load_table("gate.decisions").schema()
    catalog.drop_table("gate.decisions")
    assert "Table does not exist: gate.decisions" in one_error_line(here([*args, str(ice)], seeded))
    catalog.create_table("gate.decisions", schema=schema)
    assert "has no snapshot" in one_error_line(here([*args, str(ice)], seeded))
    done = here(["dry-run", "--rulebook-id", POLICY, "--draft", "draft.json", "--dataset", "ice", "--out", "again"],
                seeded, cwd=tmp_path)
    assert done.returncode == 2 and "DATASET_INVALID" in done.stderr and not (tmp_path / "again").exists()


def test_errors_exit_2_with_one_line_and_write_nothing(seeded, tmp_path):
    fresh = tmp_path / "fresh"
    # One refusal as a shell sees it (a subprocess), the rest in this process (tests.cli_in_process).
    line = one_error_line(gate(["export", "--out", str(fresh), "--format", "iceberg", "--catalog-uri",
                                "postgresql+psycopg://gate:secret@127.0.0.1:9/none"], seeded))
    assert "cannot open the Iceberg catalog postgresql+psycopg://gate:***@127.0.0.1:9/none" in line
    assert "secret" not in line and not (fresh / "manifest.json").exists()
    assert "need --format iceberg" in one_error_line(here(["export", "--out", str(fresh), "--namespace", "x"], seeded))
    parquet = tmp_path / "parquet"
    assert here(["export", "--out", str(parquet)], seeded).returncode == 0
    before = (parquet / "manifest.json").read_bytes()
    writer = LedgerWriter(seeded["GATE_DATABASE_URL"], Path(seeded["GATE_SIGNING_KEY_FILE"]))
    writer.decide("acme", at(6, 1))
    writer.close()
    line = one_error_line(here(["export", "--out", str(parquet), "--format", "iceberg"], seeded))
    assert "holds a Parquet dataset: export it with --format parquet" in line
    assert (parquet / "manifest.json").read_bytes() == before and not (parquet / "iceberg").exists()


def test_a_password_never_reaches_the_manifest():
    assert public_uri("postgresql://gate:s3cret@db.internal:5432/catalog") == \
        "postgresql://gate:***@db.internal:5432/catalog"
    assert public_uri("sqlite:////var/gate/catalog.db") == "sqlite:////var/gate/catalog.db"


def test_a_rollup_rebuild_of_an_iceberg_dataset_is_refused_and_writes_nothing(seeded, tmp_path):
    """The Iceberg layout keeps no rollups: a rebuild (which reads the Parquet file lists) is
    refused with one line, never a run of empty rollups that reports would then trust."""
    ice = tmp_path / "ice"
    assert here(["export", "--out", str(ice), "--format", "iceberg"], seeded).returncode == 0
    before = (ice / "manifest.json").read_bytes()
    line = one_error_line(here(["export", "--out", str(ice), "--rebuild-rollups"], seeded))
    assert "Iceberg layout, which keeps no report rollups" in line
    assert (ice / "manifest.json").read_bytes() == before and not (ice / "rollups").exists()
