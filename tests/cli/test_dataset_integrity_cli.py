"""The dataset is bound to the signed ledger (issue 18, item 3), through the CLI.

Each attack of the issue against an exported dataset: outcomes edited in place, a stray partition
file, a deleted file, a truncated file, a file of another schema, forged facts replayed by a
dry-run, and the cross-verification of a migration manifest against a forged dataset; plus the
offline verification of a dry-run, its dataset and the dataset's signature with nothing but a
saved public key registry.

The session's export and the truncated file's refusals run `gate` as a subprocess (the entry
point, one line on stderr and exit 2 as a shell sees them); the other checks run the same command
line in this process (`tests.cli_in_process`), a dozen subprocess start-ups saved per test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.cli_in_process import gate_in_process
from tests.conftest import gate_environment
from tests.workbench.ledger_support import LedgerWriter, at
from workbench.dataset import integrity
from workbench.dataset.location import open_location

pytestmark = pytest.mark.slow
GATE = str(Path(sys.executable).parent / "gate")
POLICY = "pricing_exception"
ROOT = Path(__file__).resolve().parents[2]
REPORT = ["report", "effectiveness", "--policy", POLICY, "--scope", "tenant_a", "--dataset", "ds", "--json"]


def gate_process(args, env, cwd=None):
    return subprocess.run([GATE, *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=300,
                          check=False, cwd=cwd)


def gate(args, env, cwd=None):
    return gate_in_process(args, env, cwd=cwd)


def report(tmp: Path, env, *extra: str, run=gate):
    return run([*REPORT, *extra], env, cwd=tmp)


def refused(done, *words):
    """Exit 2 with one clear line on stderr (no traceback), naming the words."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert all(word in lines[0] for word in words), lines[0]
    return lines[0]


def _seed_and_export(env: dict, out: Path) -> None:
    """A ledger with outcomes of mixed statuses, exported and signed by `gate export` to `out`."""
    writer = LedgerWriter(env["GATE_DATABASE_URL"], Path(env["GATE_SIGNING_KEY_FILE"]))
    for i in range(18):
        record = writer.decide("tenant_a", at(1 + i % 3, 1 + i, ms=i), discount=10 + i % 6, margin=15 + i % 3 * 8)
        writer.receipt("outcome", "tenant_a", record, at(4, 1 + i), ("succeeded", "failed", "succeeded")[i % 3])
    writer.close()
    done = gate_process(["export", "--out", str(out)], env)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="session")
def export_template(tmp_path_factory, sqlite_template):
    """One seeded SQLite ledger, its keyring and its signed export, made once per session: each
    `exported` gets a copy (a few milliseconds) instead of its own `gate export` (a subprocess of
    3 s of CPU, 9 s on a busy host; 17 tests use it). Nothing in them names their folder (the
    ledger, the keyring and the manifest hold no path), so a copy is the export it was copied from."""
    root = tmp_path_factory.mktemp("export-template")
    shutil.copyfile(sqlite_template, root / "gate.db")
    env = gate_environment(root / "home", f"sqlite:///{root / 'gate.db'}")
    _seed_and_export(env, root / "ds")
    return root


@pytest.fixture
def exported(gate_env, tmp_path, request):
    """A signed export of a ledger with outcomes of mixed statuses, and a draft that changes verdicts:
    on SQLite, a copy of the session's `export_template` (its ledger, keyring and dataset over this
    test's own); on PostgreSQL, seeded and exported here."""
    url = gate_env["GATE_DATABASE_URL"]
    if url.startswith("sqlite:///"):
        template = request.getfixturevalue("export_template")
        shutil.copyfile(template / "gate.db", url[len("sqlite:///"):])
        shutil.copytree(template / "home", gate_env["GATE_HOME"], dirs_exist_ok=True)  # the keyring that signed
        shutil.copytree(template / "ds", tmp_path / "ds")
    else:
        _seed_and_export(gate_env, tmp_path / "ds")
    draft = json.loads((ROOT / "gate" / "data" / "rulebooks" / "pricing-exception.json").read_text())
    draft["version"] = "2026-12-01"
    draft["rules"][0]["condition"]["value"] = 12  # block_deep_discount from 12 %: some approvals flip
    (tmp_path / "draft.json").write_text(json.dumps(draft))
    return tmp_path, gate_env


def manifest_of(root: Path) -> dict:
    return json.loads((root / "manifest.json").read_text())


def first_file(root: Path, table: str) -> Path:
    return root / manifest_of(root)["tables"][table]["files"][0]["path"]


def facts_file(root: Path) -> Path:
    return root / manifest_of(root)["facts"][POLICY]["files"][0]["path"]


def dry_run(tmp: Path, env, dataset: str = "ds", out: str = "out", run=gate):
    return run(["dry-run", "--rulebook-id", POLICY, "--draft", "draft.json", "--dataset", dataset, "--out", out],
                env, cwd=tmp)


def test_the_export_lists_every_file_and_signs_the_manifest(exported):
    tmp, _ = exported
    root = tmp / "ds"
    manifest = manifest_of(root)
    listed = list(integrity.iter_all(manifest))
    on_disk = {p.relative_to(root).as_posix() for p in root.rglob("*.parquet")}
    assert {entry.path for entry in listed} == on_disk  # every data and rollup file, and no other
    assert all(entry.sha256 and entry.bytes and entry.rows >= 0 for entry in listed)
    assert manifest["signature"]["algorithm"] == "ed25519" and manifest["signature"]["signed_field"] == "dataset_hash"
    assert manifest["dataset_hash"] == integrity.dataset_hash(manifest) and manifest["previous_dataset_hash"] is None
    head = manifest["chains"]["tenant_a"]
    assert head["size"] == 18 and head["head_decision_id"] and len(head["head_receipt_hash"]) == 64


def test_outcomes_edited_in_place_are_refused(exported):
    """Issue: editing outcomes in place moved the effectiveness report with exit 0."""
    tmp, env = exported
    before = report(tmp, env)
    assert before.returncode == 0, before.stderr
    assert json.loads(before.stdout)["source"]["dataset_hash"] == manifest_of(tmp / "ds")["dataset_hash"]
    path = first_file(tmp / "ds", "outcomes")
    table = pq.read_table(path)
    statuses = pa.array(["succeeded"] * table.num_rows, table.schema.field("status").type)
    pq.write_table(table.set_column(table.schema.get_field_index("status"), "status", statuses), path)
    refused(report(tmp, env), "outcomes/", "does not match its manifest")
    refused(report(tmp, env, "--limit", "all"), "outcomes/", "does not match its manifest")


def test_a_change_of_the_same_size_is_caught_by_the_digest(exported):
    """The size alone is not trusted: one byte changed in the middle of a file, after a run
    remembered the file in its digest store (GATE_HOME), is read again and refused."""
    tmp, env = exported
    assert report(tmp, env).returncode == 0
    store = json.loads((Path(env["GATE_HOME"]) / "cache" / "dataset-digests.json").read_text())
    path = first_file(tmp / "ds", "outcomes")
    assert str(path) in {item["path"] for item in store["files"]}
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    refused(report(tmp, env), "does not match its sha256")
    refused(dry_run(tmp, env), "DATASET_INVALID", "does not match its sha256")


def test_a_stray_partition_file_is_never_read(exported):
    """Issue: a partition file outside the manifest was read (here it would count every outcome twice)."""
    tmp, env = exported
    before = [report(tmp, env), report(tmp, env, "--limit", "all")]
    assert dry_run(tmp, env, out="before").returncode == 0
    path = first_file(tmp / "ds", "outcomes")
    shutil.copyfile(path, path.with_name("part-000009-0000.parquet"))
    decisions = first_file(tmp / "ds", "decisions")
    shutil.copyfile(decisions, decisions.with_name("part-000001-0099.parquet"))
    shutil.copyfile(facts_file(tmp / "ds"), facts_file(tmp / "ds").with_name("part-000002-0000.parquet"))
    after = [report(tmp, env), report(tmp, env, "--limit", "all")]
    assert [json.loads(done.stdout) for done in after] == [json.loads(done.stdout) for done in before]
    assert dry_run(tmp, env, out="after").returncode == 0
    result = [json.loads((tmp / out / "migration.json").read_text())["dry_run"] for out in ("before", "after")]
    assert result[0]["result_hash"] == result[1]["result_hash"] and result[0]["decisions_total"] == 18


def test_a_deleted_file_is_refused(exported):
    """Issue: deleting a listed file silently dropped its rows."""
    tmp, env = exported
    first_file(tmp / "ds", "outcomes").unlink()
    refused(report(tmp, env), "is missing")
    refused(dry_run(tmp, env), "DATASET_INVALID", "is missing")


def test_a_truncated_file_gives_one_line_and_exit_2(exported):
    """Issue: a truncated file gave a traceback."""
    tmp, env = exported
    path = first_file(tmp / "ds", "decisions")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    refused(report(tmp, env, run=gate_process), "bytes, the manifest lists")
    refused(dry_run(tmp, env, run=gate_process), "DATASET_INVALID")
    assert not (tmp / "out").exists()


def test_a_file_of_another_schema_is_refused_even_when_listed(exported):
    """Issue: a wrong-schema file was accepted by the dry-run. Also when an unsigned manifest lists
    it with its own digest (GATE_REQUIRE_SIGNING=false), its schema refuses it."""
    tmp, env = exported
    path = first_file(tmp / "ds", "decisions")
    rows = pq.read_table(path).num_rows
    pq.write_table(pa.table({"decision_id": [f"x{i}" for i in range(rows)], "amount": list(range(rows))}), path)
    refused(dry_run(tmp, env), "DATASET_INVALID", "does not match its manifest")
    manifest = manifest_of(tmp / "ds")
    entry = manifest["tables"]["decisions"]["files"][0]
    entry.update(integrity.describe_file(open_location(str(tmp / "ds")), entry["path"]))
    (tmp / "ds" / "manifest.json").write_text(json.dumps(integrity.seal(manifest, None)))
    unsigned = dict(env, GATE_REQUIRE_SIGNING="false", GATE_SIGNING_KEY_FILE=str(tmp / "none.json"))
    # Unsigned, it is read only by opt-in (issue 41), and then its schema refuses it.
    refused(dry_run(tmp, unsigned), "DATASET_INVALID", "not signed", "--allow-unsigned")
    opted_in = gate(["dry-run", "--rulebook-id", POLICY, "--draft", "draft.json", "--dataset", "ds", "--out", "out",
                     "--allow-unsigned"], unsigned, cwd=tmp)
    refused(opted_in, "DATASET_INVALID", "does not have the decisions table's schema")
    refused(report(tmp, env, "--allow-unsigned"), "does not have the decisions table's schema")


def _forge_facts(root: Path) -> None:
    """Every decision's discount made 1 % in the typed facts table: the draft flips nothing."""
    path = facts_file(root)
    table = pq.read_table(path)
    column = "discount_percent::n"
    forged = pc.multiply(pc.if_else(pc.is_valid(table[column]), 0, 0), 1).cast(table.schema.field(column).type)
    pq.write_table(table.set_column(table.schema.get_field_index(column), column, pc.add(forged, 1)), path)


def test_a_dry_run_over_forged_facts_is_refused(exported):
    """Issue: a dry-run over forged facts produced a signed manifest. Forged in place, relisted in
    an unsigned manifest, or relisted and signed with a key the gate does not trust: refused."""
    tmp, env = exported
    _forge_facts(tmp / "ds")
    refused(dry_run(tmp, env), "DATASET_INVALID", "does not match its manifest")
    manifest = manifest_of(tmp / "ds")
    entry = manifest["facts"][POLICY]["files"][0]
    entry.update(integrity.describe_file(open_location(str(tmp / "ds")), entry["path"]))
    (tmp / "ds" / "manifest.json").write_text(json.dumps(integrity.seal(manifest, None)))
    refused(dry_run(tmp, env), "DATASET_INVALID", "not signed")
    other = tmp / "other-keys.json"
    assert gate(["keys", "signing-init"], {**env, "GATE_SIGNING_KEY_FILE": str(other)}).returncode == 0
    from tests.workbench.manifest_support import signer_of

    forged = integrity.seal(manifest, signer_of({"GATE_SIGNING_KEY_FILE": str(other)}))
    (tmp / "ds" / "manifest.json").write_text(json.dumps(forged))
    refused(dry_run(tmp, env), "DATASET_INVALID", "no trusted Ed25519 key")
    assert not (tmp / "out").exists()


def test_verify_answers_not_valid_across_original_and_forged(exported):
    """Issue: `--verify` answered valid for the original manifest against the forged dataset and
    for a manifest of other history against the original."""
    tmp, env = exported
    assert dry_run(tmp, env).returncode == 0
    shutil.copytree(tmp / "ds", tmp / "forged")
    _forge_facts(tmp / "forged")
    done = gate(["dry-run", "--verify", "out", "--draft", "draft.json", "--dataset", "forged", "--json"], env, cwd=tmp)
    assert done.returncode == 1, done.stdout + done.stderr
    checks = json.loads(done.stdout)["checks"]
    assert checks["dataset_files"] is False and checks["dataset_hash"] is True and checks["signature"] is True
    text = gate(["dry-run", "--verify", "out", "--dataset", "forged"], env, cwd=tmp)
    assert text.returncode == 1 and text.stdout.splitlines()[0].endswith("NOT VERIFIED")

    # A genuine dry-run of other history (the ledger one decision later) against the original.
    writer = LedgerWriter(env["GATE_DATABASE_URL"], Path(env["GATE_SIGNING_KEY_FILE"]))
    writer.decide("tenant_a", at(5, 1), discount=14)
    writer.close()
    shutil.copytree(tmp / "ds", tmp / "later")
    assert gate(["export", "--out", str(tmp / "later")], env).returncode == 0
    assert manifest_of(tmp / "later")["previous_dataset_hash"] == manifest_of(tmp / "ds")["dataset_hash"]
    assert dry_run(tmp, env, dataset="later", out="out-later").returncode == 0
    done = gate(["dry-run", "--verify", "out-later", "--dataset", "ds", "--json"], env, cwd=tmp)
    checks = json.loads(done.stdout)["checks"]
    assert done.returncode == 1 and checks["dataset_hash"] is False and checks["dataset_signature"] is False
    assert gate(["dry-run", "--verify", "out-later", "--dataset", "later"], env, cwd=tmp).returncode == 0


def test_offline_verification_with_only_the_public_key_registry(exported, client):
    """A dry-run, its dataset's files and the dataset's signature verify with a saved key
    registry (GET /api/decision/receipt-keys) and no keyring at all; another key is refused."""
    tmp, env = exported
    assert dry_run(tmp, env).returncode == 0
    (tmp / "reg.json").write_text(json.dumps(client.get("/api/decision/receipt-keys").json))
    offline = {**env, "GATE_SIGNING_KEY_FILE": str(tmp / "absent.json"), "GATE_REQUIRE_SIGNING": "false"}
    args = ["dry-run", "--verify", "out", "--draft", "draft.json", "--dataset", "ds", "--json"]
    done = gate([*args, "--key-registry", "reg.json"], offline, cwd=tmp)
    assert done.returncode == 0, done.stdout + done.stderr
    checks = json.loads(done.stdout)["checks"]
    assert checks["dataset_signature"] and checks["dataset_files"] and checks["signature"]
    assert gate(args, offline, cwd=tmp).returncode == 1  # no trusted key: authenticity unproven
