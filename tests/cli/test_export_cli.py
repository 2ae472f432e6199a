"""`gate export` as a subprocess: runs, incremental reruns, JSON summary, progress bar on a
terminal, and clear errors with exit status 2. Reruns, the incremental run and the keyless runs run
the same command lines in this process (`tests.cli_in_process`); each first run, the progress bar
and every refusal stay real subprocesses."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as pads
import pytest

from tests.cli_in_process import gate_in_process as here  # `gate ARGS` in this process
from tests.workbench.ledger_support import LedgerWriter, at

GATE = str(Path(sys.executable).parent / "gate")


def gate(args, env, **kwargs):
    return subprocess.run([GATE, *args], env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=120, **kwargs)


@pytest.fixture
def seeded(gate_env):
    writer = LedgerWriter(gate_env["GATE_DATABASE_URL"], Path(gate_env["GATE_SIGNING_KEY_FILE"]))
    for index in range(6):
        record = writer.decide(("acme", "globex")[index % 2], at(1 + index, 3))
        writer.receipt("outcome", ("acme", "globex")[index % 2], record, at(2 + index, 4), "succeeded")
    writer.close()
    return gate_env


def test_export_then_rerun_then_json(seeded, tmp_path):
    out = tmp_path / "ds"
    done = gate(["export", "--out", str(out)], seeded)
    assert done.returncode == 0, done.stderr
    assert "export run 1" in done.stdout and "decisions +6" in done.stdout
    # six decisions in six (scope, month) partitions, every one rolled up on the first run
    assert "report rollups: 6 of 6 partitions recomputed" in done.stdout
    assert done.stderr == ""  # no progress bar when stderr is not a terminal
    table = pads.dataset(str(out / "outcomes"), format="parquet", partitioning="hive").to_table()
    assert table.num_rows == 6
    manifest = (out / "manifest.json").read_bytes()
    again = here(["export", "--out", f"file://{out}"], seeded)
    assert again.returncode == 0 and "nothing new since export run 1" in again.stdout
    assert (out / "manifest.json").read_bytes() == manifest
    summary = json.loads(here(["export", "--out", str(out), "--json"], seeded).stdout)
    assert summary["run"] is None and summary["rows"]["decisions"] == 6
    scoped = json.loads(here(["export", "--out", str(tmp_path / "one"), "--scope", "acme", "--json"],
                             seeded).stdout)
    assert scoped["new_rows"]["decisions"] == 3 and scoped["run"] == 1
    assert all("scope=acme" in path for path in scoped["files"])


def test_progress_bar_on_a_terminal(seeded, tmp_path):
    master, slave = pty.openpty()
    try:
        done = subprocess.run([GATE, "export", "--out", str(tmp_path / "ds")], env={**os.environ, **seeded},
                              stdout=subprocess.PIPE, stderr=slave, timeout=120)
        os.close(slave)
        drawn = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(master)
    assert done.returncode == 0
    assert b"100% |" in drawn and b"12/12 rows" in drawn
    assert b"rollups 100% |" in drawn and b"6/6 partitions" in drawn


def test_errors_exit_2_with_a_message_and_write_nothing(seeded, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    done = gate(["export", "--out", str(blocker / "ds")], seeded)
    assert done.returncode == 2 and done.stderr.startswith("gate export: DATASET_INVALID: cannot write")
    other = tmp_path / "v0"
    other.mkdir()
    (other / "manifest.json").write_text('{"dataset_schema_version": "decision_dataset_v0"}')
    done = gate(["export", "--out", str(other)], seeded)
    assert done.returncode == 2 and "decision_dataset_v0" in done.stderr and "new location" in done.stderr
    assert sorted(path.name for path in other.iterdir()) == ["manifest.json"]
    done = gate(["export", "--out", str(tmp_path / "x"), "--batch-size", "0"], seeded)
    assert done.returncode == 2 and "--batch-size" in done.stderr and not (tmp_path / "x").exists()
    done = gate(["export"], seeded)
    assert done.returncode == 2 and "--out" in done.stderr


def test_incremental_runs_chain_signed_manifests_and_reuse_listed_digests(seeded, tmp_path):
    """Run 2 hashes only its own files (run 1's entries are carried over as listed), names run 1's
    manifest in `previous_dataset_hash`, and is signed by the gate's key like run 1."""
    from gate.keys.anchors import TrustAnchors
    from gate.keys.signing import load_keyring
    from workbench.dataset import integrity
    from workbench.dataset.location import open_location

    out = tmp_path / "ds"
    assert here(["export", "--out", str(out)], seeded).returncode == 0
    first = json.loads((out / "manifest.json").read_text())
    writer = LedgerWriter(seeded["GATE_DATABASE_URL"], Path(seeded["GATE_SIGNING_KEY_FILE"]))
    writer.decide("acme", at(1, 20))
    writer.close()
    done = here(["export", "--out", str(out)], seeded)
    assert done.returncode == 0, done.stderr
    second = json.loads((out / "manifest.json").read_text())
    anchors = TrustAnchors.from_keyring(load_keyring(Path(seeded["GATE_SIGNING_KEY_FILE"])))
    assert integrity.signature_problem(first, anchors) is None and integrity.signature_problem(second, anchors) is None
    assert second["previous_dataset_hash"] == first["dataset_hash"] and first["previous_dataset_hash"] is None
    for table, item in first["tables"].items():
        assert second["tables"][table]["files"][:len(item["files"])] == item["files"]
    assert {e["run"] for e in second["tables"]["decisions"]["files"]} == {1, 2}
    integrity.check_files(open_location(str(out)), integrity.iter_all(second))
    assert second["chains"]["acme"]["size"] == 4 and second["chains"]["globex"] == first["chains"]["globex"]


def test_an_earlier_file_changed_behind_the_manifest_refuses_the_next_run(seeded, tmp_path):
    """A run recomputes the rollups of the partitions it touches from earlier runs' files: one
    changed behind the manifest's back refuses the run (exit 2, one line) instead of being signed."""
    out = tmp_path / "ds"
    assert gate(["export", "--out", str(out)], seeded).returncode == 0
    manifest = json.loads((out / "manifest.json").read_text())
    entry = next(e for e in manifest["tables"]["decisions"]["files"] if "scope=acme" in e["path"]
                 and "month=2026-01" in e["path"])
    path = out / entry["path"]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    writer = LedgerWriter(seeded["GATE_DATABASE_URL"], Path(seeded["GATE_SIGNING_KEY_FILE"]))
    writer.decide("acme", at(1, 20))  # a new decision in the changed file's partition
    writer.close()
    done = gate(["export", "--out", str(out)], seeded)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert entry["path"] in lines[0] and "does not match its sha256" in lines[0]
    assert json.loads((out / "manifest.json").read_text()) == manifest  # nothing committed


def test_without_a_signing_key_the_export_refuses_unless_signing_is_off(seeded, tmp_path):
    keyless = dict(seeded, GATE_SIGNING_KEY_FILE=str(tmp_path / "absent.json"))
    done = gate(["export", "--out", str(tmp_path / "ds")], keyless)
    assert done.returncode == 2 and "no key to sign the dataset manifest" in done.stderr
    assert not (tmp_path / "ds").exists()
    done = here(["export", "--out", str(tmp_path / "ds")], dict(keyless, GATE_REQUIRE_SIGNING="false"))
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    assert "signature" not in manifest and len(manifest["dataset_hash"]) == 64


def test_an_empty_ledger_exports_a_signed_empty_dataset_that_every_reader_opens(gate_env, tmp_path):
    """Issue 65: an empty ledger's first export wrote no manifest, so every workbench page and
    report said the dataset could not be used. It now commits run 1 with no rows, signed; a rerun
    with still nothing new changes nothing."""
    out = tmp_path / "ds"
    first = gate(["export", "--out", str(out), "--json"], gate_env)  # a subprocess of the real entry point
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    assert summary["run"] == 1 and summary["files"] == [] and summary["new_rows"]["decisions"] == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["runs"] == 1 and manifest["signature"]
    assert all(entry["rows"] == 0 and entry["files"] == [] for entry in manifest["tables"].values())
    before = (out / "manifest.json").read_bytes()
    again = here(["export", "--out", str(out)], gate_env)
    assert again.returncode == 0 and "nothing new since export run 1" in again.stdout
    assert (out / "manifest.json").read_bytes() == before
    report = here(["report", "effectiveness", "--policy", "pricing_exception", "--scope", "acme",
                   "--dataset", str(out), "--json"], gate_env)
    assert report.returncode == 0, report.stderr
    sample = json.loads(report.stdout)["sample"]
    assert sample["decisions_considered"] == 0 and sample["first_decision_at"] is None, sample
    # and the workbench's pages open it (without a manifest each said "the dataset cannot be used")
    from gate.keys.config import SigningSetup
    from gate.ledger import Ledger
    from workbench.app.store import WorkbenchStore

    store = WorkbenchStore(Ledger(gate_env["GATE_DATABASE_URL"]),
                           SigningSetup.load(Path(gate_env["GATE_SIGNING_KEY_FILE"]), None, "hmac"), out)
    try:
        status = store.dataset_status()
        assert status["ok"] is True, status
    finally:
        store.ledger.dispose()
