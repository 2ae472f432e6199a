"""Issue 41, defects 1 and 2, through the CLI as a subprocess: a dataset is read only when its
manifest's signature verifies with a key this gate trusts (or, unsigned, by `--allow-unsigned`,
then every report says so), a rollback to an older signed manifest is refused, and a dataset
behind the live ledger past the bound is marked stale and not signed over by a dry-run."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.cli.test_dataset_integrity_cli import (
    POLICY,
    dry_run,
    export_template,  # noqa: F401  (the fixture `exported` copies)
    exported,  # noqa: F401  (the fixture)
    first_file,
    gate,
    manifest_of,
    refused,
    report,
)
from tests.workbench.manifest_support import forge_outcomes

pytestmark = pytest.mark.slow


def forge(root: Path, *, keep_signature: bool) -> dict:
    return forge_outcomes(root, keep_signature=keep_signature)


REPORT_TEXT = ["report", "effectiveness", "--policy", POLICY, "--scope", "tenant_a", "--dataset", "ds"]


def test_a_signed_dataset_names_the_key_that_signed_it(exported):  # noqa: F811
    tmp, env = exported
    done = report(tmp, env)
    assert done.returncode == 0, done.stderr
    source = json.loads(done.stdout)["source"]
    signature = manifest_of(tmp / "ds")["signature"]
    assert source["trust"] == "signed" and source["key_id"] == signature["key_id"] and "stale" not in source
    text = gate(REPORT_TEXT, env, cwd=tmp)
    assert f"signed by key {signature['key_id']}" in text.stdout


@pytest.mark.parametrize("keep_signature", [True, False], ids=["old-signature-kept", "signature-removed"])
def test_a_forged_dataset_is_refused_in_one_line(exported, keep_signature):  # noqa: F811
    """Issue 41, defect 1: exit 0 with a key that never signed the content (or key_id null)."""
    tmp, env = exported
    forge(tmp / "ds", keep_signature=keep_signature)
    words = ("signature does not verify",) if keep_signature else ("not signed", "--allow-unsigned")
    refused(report(tmp, env), "manifest.json", *words)
    refused(report(tmp, env, "--limit", "all"), *words)
    refused(gate([*REPORT_TEXT, "--limit", "all", "--cluster", "local"], env, cwd=tmp), *words)
    refused(dry_run(tmp, env), "DATASET_INVALID", *words)
    sweep = gate(["sweep", "--rulebook-id", POLICY, "--draft", "draft.json", "--dataset", "ds", "--rule",
                  "block_deep_discount", "--field", "discount_percent", "--from", "10", "--to", "12", "--steps", "3"], env, cwd=tmp)
    assert sweep.returncode == 2 and words[0] in sweep.stderr, sweep.stderr
    if keep_signature:  # a signature that does not verify is refused even by the opt-in
        refused(report(tmp, env, "--allow-unsigned"), "signature does not verify")


def test_unsigned_data_is_read_only_by_opt_in_and_says_unsigned(exported):  # noqa: F811
    tmp, env = exported
    forge(tmp / "ds", keep_signature=False)
    done = report(tmp, env, "--allow-unsigned")
    assert done.returncode == 0, done.stderr
    source = json.loads(done.stdout)["source"]
    assert source["trust"] == "unsigned" and source["key_id"] is None
    text = gate([*REPORT_TEXT, "--allow-unsigned"], env, cwd=tmp)
    assert text.returncode == 0 and "UNSIGNED dataset" in text.stdout, text.stderr
    refused(gate([*REPORT_TEXT[:-2], "--allow-unsigned"], env, cwd=tmp), "--allow-unsigned", "--dataset")


def test_a_rollback_to_an_older_signed_manifest_is_refused(exported):  # noqa: F811
    """Issue 41, defect 2: an older signed manifest over newer files, or the whole older dataset."""
    tmp, env = exported
    older = tmp / "older"
    shutil.copytree(tmp / "ds", older)
    assert report(tmp, env).returncode == 0  # the reader has seen run 1
    from tests.workbench.ledger_support import LedgerWriter, at

    writer = LedgerWriter(env["GATE_DATABASE_URL"], Path(env["GATE_SIGNING_KEY_FILE"]))
    writer.decide("tenant_a", at(5, 1), discount=11, margin=20)
    writer.close()
    assert gate(["export", "--out", "ds", "--settle-seconds", "0"], env, cwd=tmp).returncode == 0
    assert report(tmp, env).returncode == 0  # run 2 follows run 1: the newest seen moves on
    shutil.rmtree(tmp / "ds")
    shutil.copytree(older, tmp / "ds")  # the whole older dataset put back
    refused(report(tmp, env), "rollback", "dataset-newest.json")
    refused(dry_run(tmp, env), "DATASET_INVALID", "rollback")
    assert not (tmp / "out").exists()


def _age_dataset(tmp: Path, env: dict, seconds: int) -> None:
    """One more decision in the ledger after the export, its chain head moved `seconds` after the cut."""
    from tests.workbench.ledger_support import LedgerWriter, at

    writer = LedgerWriter(env["GATE_DATABASE_URL"], Path(env["GATE_SIGNING_KEY_FILE"]))
    writer.decide("tenant_a", at(5, 2), discount=11, margin=20)
    writer.close()
    cut = manifest_of(tmp / "ds")["updated_at"]
    from datetime import datetime, timedelta

    moved = datetime.fromisoformat(cut.replace("Z", "+00:00")) + timedelta(seconds=seconds)
    url = env["GATE_DATABASE_URL"]
    assert url.startswith("sqlite:///")
    with sqlite3.connect(url[len("sqlite:///"):]) as connection:
        connection.execute("UPDATE chain_heads SET updated_at = ? WHERE scope = 'tenant_a'",
                           (moved.strftime("%Y-%m-%dT%H:%M:%S.000Z"),))


def test_a_stale_dataset_is_marked_and_a_dry_run_will_not_sign_over_it(exported, tmp_path):  # noqa: F811
    tmp, env = exported
    if not env["GATE_DATABASE_URL"].startswith("sqlite:///"):
        pytest.skip("the chain head's time is set through SQLite")
    _age_dataset(tmp, env, 3 * 3600)
    done = report(tmp, env)
    assert done.returncode == 0, done.stderr
    assert "stale" not in json.loads(done.stdout)["source"]  # three hours behind, within the default day
    tight = {**env, "GATE_DATASET_STALE_AFTER": "3600"}
    stale = json.loads(report(tmp, tight).stdout)["source"]["stale"]
    assert stale["bound_seconds"] == 3600 and stale["behind_scopes"] == ["tenant_a"] and stale["lag_seconds"] >= 3 * 3600 - 1
    assert "STALE: " in gate(REPORT_TEXT, tight, cwd=tmp).stdout
    refused(dry_run(tmp, tight), "DATASET_STALE", "--allow-stale")
    assert not (tmp / "out").exists()
    signed = gate(["dry-run", "--rulebook-id", POLICY, "--draft", "draft.json", "--dataset", "ds", "--out", "out",
                   "--allow-stale"], tight, cwd=tmp)
    assert signed.returncode == 0, signed.stderr
    migration = json.loads((tmp / "out" / "migration.json").read_text())
    assert migration["dry_run"]["source"]["stale"]["bound_seconds"] == 3600 and "signature" in migration
    refused(gate(REPORT_TEXT, {**env, "GATE_DATASET_STALE_AFTER": "soon"}, cwd=tmp), "GATE_DATASET_STALE_AFTER")


def test_the_first_report_after_the_export_is_not_stale(exported):  # noqa: F811
    tmp, env = exported
    first_file(tmp / "ds", "outcomes")
    done = report(tmp, {**env, "GATE_DATASET_STALE_AFTER": "0"})
    assert done.returncode == 0 and "stale" not in json.loads(done.stdout)["source"]
    assert os.path.isfile(Path(env["GATE_HOME"]) / "cache" / "dataset-newest.json")


def test_a_reader_with_no_private_key_trusts_the_public_key_registry(exported, tmp_path):  # noqa: F811
    """Issue 63, defect 7: verifying a dataset needs no secret. A home with no keyring reads the
    signed dataset with the gate's public key registry (`--key-registry`, or GATE_KEY_REGISTRY as
    the workbench and the notebooks read it); without one it is refused; a bad registry file is one
    line, exit 2."""
    from gate.keys.config import SigningSetup

    tmp, env = exported
    registry = tmp / "receipt-keys.json"
    keys = SigningSetup.load(Path(env["GATE_SIGNING_KEY_FILE"]), None, "hmac").registry_entries()
    registry.write_text(json.dumps({"keys": keys}))
    empty = tmp_path / "no-key-home"
    empty.mkdir()
    public = {k: v for k, v in env.items() if k not in ("GATE_SIGNING_KEY_FILE", "GATE_DATABASE_URL")}
    public["GATE_HOME"] = str(empty)
    key_id = manifest_of(tmp / "ds")["signature"]["key_id"]
    refused(report(tmp, public), "no trusted Ed25519 key")
    for extra, environment in ((("--key-registry", str(registry)), public),
                               ((), {**public, "GATE_KEY_REGISTRY": str(registry)})):
        done = report(tmp, environment, *extra)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["source"]["key_id"] == key_id
    unsigned_out = {**public, "GATE_REQUIRE_SIGNING": "false"}  # no key to sign with: the result is unsigned
    ran = gate(["dry-run", "--rulebook-id", POLICY, "--draft", "draft.json", "--dataset", "ds", "--out", "out-public",
                "--key-registry", str(registry)], unsigned_out, cwd=tmp)
    assert ran.returncode == 0, ran.stderr
    assert json.loads((tmp / "out-public" / "migration.json").read_text())["dry_run"]["source"]["dataset_key_id"] == key_id
    refused(gate(["dry-run", "--rulebook-id", POLICY, "--draft", "draft.json", "--dataset", "ds", "--out", "out-none"],
                 unsigned_out, cwd=tmp), "DATASET_INVALID", "no trusted Ed25519 key")
    (tmp / "bad.json").write_text('{"keys": [{"public_key": "not a key"}]}')
    refused(report(tmp, public, "--key-registry", str(tmp / "bad.json")), "the key registry", "bad.json")
    refused(report(tmp, public, "--key-registry", str(tmp / "missing.json")), "cannot read the key registry")
    assert not [p for p in empty.rglob("*") if p.is_file() and b"PRIVATE KEY" in p.read_bytes()]
