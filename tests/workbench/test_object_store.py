"""Datasets on an object store (docs/dataset.md "Locations"): `gate export` writes both layouts to
an S3-compatible store, and `gate report` and `gate dry-run` read them back with exactly the
figures of the same export on a local disk; a changed object is refused, never reported.

The store is moto's S3 server on a loopback port (the `dev` extra), configured as an operator
would configure a real one: the standard AWS_* variables, read by Arrow, by Polars and, through
`workbench.dataset.iceberg.object_store_properties`, by pyiceberg.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_in_process import gate_in_process
from tests.workbench.ledger_support import LedgerWriter, at

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
GATE = str(Path(sys.executable).parent / "gate")
POLICY = "pricing_exception"
BUCKET = "gate-datasets"


@pytest.fixture(scope="module")
def store():
    """An S3-compatible server on a free loopback port, with one bucket; its AWS_* settings."""
    import boto3
    from moto.server import ThreadedMotoServer

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's server logs every request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "gate-test",
           "AWS_SECRET_ACCESS_KEY": "gate-test-secret", "AWS_REGION": "us-east-1"}
    client = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_REGION"],
                          aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])
    client.create_bucket(Bucket=BUCKET)
    yield env, client
    server.stop()


def gate(env: dict, *args: str, process: bool = False) -> subprocess.CompletedProcess:
    """`gate ARGS` in process (tests.cli_in_process) or, with `process=True`, as a subprocess: the
    first export, report and dry-run of the local dataset and the refused report run as processes
    (the entry point and its exit status); the repeats over the other layouts run in process."""
    if not process:
        return gate_in_process(args, env, cwd=ROOT)
    return subprocess.run([GATE, *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=300,
                          cwd=ROOT)


@pytest.fixture
def seeded(gate_env, tmp_path, store):
    writer = LedgerWriter(gate_env["GATE_DATABASE_URL"], tmp_path / "writer-keys.json")
    for i in range(24):
        for scope in ("tenant_a", "peer_1"):
            record = writer.decide(scope, at(1 + i % 3, 1 + i, ms=i), discount=8 + i % 20, margin=12 + i % 3 * 8)
            writer.receipt("outcome", scope, record, at(4, 1 + i), ("succeeded", "failed", "pending")[i % 3])
    writer.close()
    # The writer signs with its own keyring; the readers trust the gate's (GATE_SIGNING_KEY_FILE),
    # which signs each export's manifest.
    return {**gate_env, **store[0]}


def without_source(report: dict) -> dict:
    return {k: v for k, v in report.items() if k != "source" and not k.endswith("_hash")}


def draft(tmp_path: Path) -> Path:
    rulebook = json.loads((ROOT / "gate" / "data" / "rulebooks" / "pricing-exception.json").read_text())
    rulebook["version"] += "-draft"
    rulebook["rules"][0]["condition"]["value"] = 15
    path = tmp_path / "draft.json"
    path.write_text(json.dumps(rulebook))
    return path


def test_both_layouts_on_an_object_store_read_back_as_the_local_export(seeded, tmp_path, store):
    local, parquet, ice = str(tmp_path / "local"), f"s3://{BUCKET}/{tmp_path.name}/ds", f"s3://{BUCKET}/{tmp_path.name}/ice"
    for args in (["--out", local], ["--out", parquet],
                 ["--out", ice, "--format", "iceberg", "--catalog-uri", f"sqlite:///{tmp_path}/catalog.db"]):
        done = gate(seeded, "export", *args, "--settle-seconds", "0", "--json", process=args[1] == local)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["run"] == 1
    listed = store[1].list_objects_v2(Bucket=BUCKET, Prefix=f"{tmp_path.name}/")["Contents"]
    keys = {item["Key"] for item in listed}
    assert f"{tmp_path.name}/ds/manifest.json" in keys and f"{tmp_path.name}/ice/manifest.json" in keys
    assert any("/ice/iceberg/warehouse/gate/decisions/data/" in key for key in keys)  # the Iceberg data files
    assert not (tmp_path / "ds").exists() and not (tmp_path / "ice").exists()  # nothing landed on the disk

    reports = {}
    for name, dataset in (("local", local), ("parquet", parquet), ("iceberg", ice)):
        for kind in ("effectiveness", "anomalies", "confidence"):
            done = gate(seeded, "report", kind, "--policy", POLICY, "--scope", "tenant_a", "--dataset", dataset,
                        "--limit", "all", "--json", process=(name, kind) == ("local", "effectiveness"))
            assert done.returncode == 0, (name, kind, done.stderr)
            reports[name, kind] = json.loads(done.stdout)
    for kind in ("effectiveness", "anomalies", "confidence"):
        assert reports["local", kind]["source"]["kind"] == "dataset"
        assert without_source(reports["parquet", kind]) == without_source(reports["local", kind]), kind
        assert without_source(reports["iceberg", kind]) == without_source(reports["local", kind]), kind
    assert reports["local", "effectiveness"]["sample"]["decisions_considered"] == 24

    runs = {}
    for name, dataset in (("local", local), ("parquet", parquet), ("iceberg", ice)):
        out = tmp_path / f"dry-run-{name}"
        done = gate(seeded, "dry-run", "--rulebook-id", POLICY, "--draft", str(draft(tmp_path)), "--dataset", dataset,
                    "--out", str(out), "--json", process=name == "local")
        assert done.returncode == 0, (name, done.stderr)
        runs[name] = json.loads((out / "migration.json").read_text())
        if name == "local":  # verifying over a local dataset is tests/cli/test_dry_run_cli.py's
            continue
        verified = gate(seeded, "dry-run", "--verify", str(out), "--dataset", dataset, "--json")
        assert verified.returncode == 0 and json.loads(verified.stdout)["valid"], (name, verified.stdout, verified.stderr)
    figures = {name: {k: v for k, v in run["dry_run"].items() if k not in ("source", "created_at", "result_hash")}
               for name, run in runs.items()}
    assert figures["local"]["decisions_total"] == 48 and figures["local"]["decisions_changed"] > 0
    assert figures["parquet"] == figures["local"] and figures["iceberg"] == figures["local"]
    assert runs["parquet"]["dry_run"]["source"]["location"] == parquet


def test_a_changed_object_is_refused_by_the_reports_and_the_dry_run(seeded, tmp_path, store):
    parquet = f"s3://{BUCKET}/{tmp_path.name}/ds"
    assert gate(seeded, "export", "--out", parquet, "--settle-seconds", "0").returncode == 0
    client = store[1]
    keys = [item["Key"] for item in client.list_objects_v2(Bucket=BUCKET, Prefix=f"{tmp_path.name}/ds/decisions/")
            ["Contents"] if item["Key"].endswith(".parquet") and "/scope=tenant_a/" in item["Key"]]
    original = client.get_object(Bucket=BUCKET, Key=keys[0])["Body"].read()
    # Same size, one byte changed near the end (inside the Parquet footer's statistics).
    changed = original[:-100] + bytes([original[-100] ^ 0x01]) + original[-99:]
    client.put_object(Bucket=BUCKET, Key=keys[0], Body=changed)

    report = gate(seeded, "report", "effectiveness", "--policy", POLICY, "--scope", "tenant_a", "--dataset", parquet,
                  "--json", process=True)
    assert report.returncode != 0 and report.stdout == ""
    assert "does not match its manifest" in report.stderr and keys[0].split("/ds/", 1)[1] in report.stderr
    run = gate(seeded, "dry-run", "--rulebook-id", POLICY, "--draft", str(draft(tmp_path)), "--dataset", parquet,
               "--out", str(tmp_path / "refused"))
    assert run.returncode != 0 and "DATASET_INVALID" in run.stderr + run.stdout
    assert not (tmp_path / "refused" / "migration.json").exists()

    # A location with no dataset, and a bucket that does not exist, are refused by name.
    missing = gate(seeded, "report", "effectiveness", "--policy", POLICY, "--scope", "tenant_a", "--dataset",
                   f"s3://{BUCKET}/{tmp_path.name}/nothing-here")
    assert missing.returncode != 0 and "no manifest.json" in missing.stderr
    no_bucket = gate(seeded, "report", "effectiveness", "--policy", POLICY, "--scope", "tenant_a", "--dataset",
                     "s3://no-such-bucket-here/ds")
    assert no_bucket.returncode != 0 and no_bucket.stdout == "" and "Traceback" not in no_bucket.stderr
    assert "no-such-bucket-here" in no_bucket.stderr
