"""`--cluster` through the real `gate` entry point (subprocesses): the same report, the same
dry-run result and a committed rollup rebuild as without a cluster, and one clear line for an
unreachable scheduler. The rollup rebuild starts and closes its own local cluster of two worker
processes (`--cluster local`); the report and the dry-run reach one local cluster this module
starts once (`--cluster tcp://…`, the scheduler address an operator gives), two cluster start-ups
fewer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed")

from tests.cli_in_process import gate_in_process
from workbench.cluster import LOCAL, connect
from workbench.dataset.synth import synthesize

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import dryrun_data

pytestmark = pytest.mark.slow
GATE = str(Path(sys.executable).parent / "gate")


def gate(*args: str, home: Path, timeout: float = 300, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GATE_HOME": str(home), "GATE_REQUIRE_SIGNING": "false",
           "GATE_SIGNING_KEY_FILE": str(home / "none.json"), **extra}
    return subprocess.run([GATE, *args], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("cluster-cli")
    synthesize(str(root / "ds"), decisions=6_000, seed=3)
    (root / "home").mkdir()
    return root


@pytest.fixture(scope="module")
def scheduler():
    """The address of a local cluster of two worker processes, shared by this module's tests."""
    with connect(LOCAL, workers=2) as client:
        yield client.scheduler.address


def test_report_on_a_local_cluster_is_the_report_of_one_process(dataset, scheduler):
    args = ("report", "anomalies", "--policy", "refund_approval", "--dataset", str(dataset / "ds"),
            "--limit", "all", "--min-sample", "5", "--threshold", "0", "--json", "--allow-unsigned")
    single = gate(*args, home=dataset / "home")
    clustered = gate(*args, "--cluster", scheduler, home=dataset / "home")
    assert single.returncode == clustered.returncode == 0, clustered.stderr
    assert json.loads(clustered.stdout) == json.loads(single.stdout)
    assert json.loads(clustered.stdout)["anomaly_hash"] == json.loads(single.stdout)["anomaly_hash"]


def test_dry_run_on_a_local_cluster_has_the_result_hash_of_one_process(tmp_path, scheduler):
    dryrun_data.generate(tmp_path / "history", 6_000, 10)
    (tmp_path / "draft.json").write_text(json.dumps(dryrun_data.rulebooks()[1]))
    (tmp_path / "home").mkdir()
    results = {}
    for name, extra in (("single", ()), ("cluster", ("--cluster", scheduler))):
        done = gate("dry-run", "--rulebook-id", dryrun_data.RULEBOOK_ID, "--draft", str(tmp_path / "draft.json"),
                    "--dataset", str(tmp_path / "history"), "--out", str(tmp_path / name), "--json", "--allow-unsigned",
                    *extra,
                    home=tmp_path / "home")
        assert done.returncode == 0, done.stderr
        results[name] = json.loads((tmp_path / name / "migration.json").read_text())["dry_run"]
    assert results["cluster"] == results["single"]
    assert results["cluster"]["decisions_changed"] > 0


def test_rollup_rebuild_on_a_local_cluster_is_committed_and_read(dataset, tmp_path):
    target = tmp_path / "ds"
    synthesize(str(target), decisions=3_000, seed=8)
    done = gate("export", "--out", str(target), "--rebuild-rollups", "--cluster", "local", "--json",
                home=dataset / "home")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["run"] == body["rollups"]["run"] == 2
    assert body["rollups"]["recomputed_partitions"] == body["rollups"]["decision_partitions"] > 0
    report = ("report", "effectiveness", "--policy", "refund_approval", "--dataset", str(target), "--limit", "all",
              "--json", "--allow-unsigned")
    from_rollups = gate(*report, home=dataset / "home")
    assert from_rollups.returncode == 0, from_rollups.stderr
    assert json.loads(from_rollups.stdout)["source"]["dataset_hash"] == body["dataset_hash"]


# The scheduler is waited for 2 s here, not the default 10 (tests/workbench/test_cluster.py holds
# the default): each unreachable try below cost 10 s of waiting, the most of this test's time.
QUICK = {"GATE_CLUSTER_CONNECT_SECONDS": "2"}


def test_an_unreachable_scheduler_is_one_line_and_exit_2_within_the_timeout(dataset):
    started = time.monotonic()
    done = gate("report", "effectiveness", "--policy", "refund_approval", "--dataset", str(dataset / "ds"),
                "--limit", "all", "--allow-unsigned", "--cluster", "tcp://127.0.0.1:9", home=dataset / "home", timeout=60,
                **QUICK)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(
        "gate report: CLUSTER_UNAVAILABLE: cannot reach the Dask scheduler at 'tcp://127.0.0.1:9' within 2 s")
    assert time.monotonic() - started < 32
    home = {"GATE_HOME": str(dataset / "home"), "GATE_REQUIRE_SIGNING": "false",
            "GATE_SIGNING_KEY_FILE": str(dataset / "home" / "none.json")}
    # Refused before any cluster is tried: the same command lines in this process (tests.cli_in_process).
    refused = gate_in_process(["export", "--out", str(dataset / "ds"), "--cluster", "local"], home)
    assert refused.returncode == 2 and "give --rebuild-rollups" in refused.stderr
    rebuild = gate("export", "--out", str(dataset / "ds"), "--rebuild-rollups", "--cluster", "tcp://127.0.0.1:9",
                   home=dataset / "home", timeout=60, **QUICK)
    assert rebuild.returncode == 2 and rebuild.stderr.count("\n") == 1
    assert rebuild.stderr.startswith("gate export: CLUSTER_UNAVAILABLE: cannot reach the Dask scheduler at 'tcp://127.0.0.1:9' within 2 s")
    assert json.loads((dataset / "ds" / "manifest.json").read_text())["runs"] == 1  # nothing committed
    (dataset / "draft.json").write_text(json.dumps({"rulebook_id": "refund_approval"}))
    usage = gate_in_process(["dry-run", "--rulebook-id", "refund_approval", "--draft", str(dataset / "draft.json"),
                             "--out", str(dataset / "out"), "--cluster", "local"], home)
    assert usage.returncode == 2 and "--cluster replays a dataset's partitions: give --dataset" in usage.stderr
    # a bad draft is refused before the (unreachable) cluster is tried
    bad = gate_in_process(["dry-run", "--rulebook-id", "refund_approval", "--draft", str(dataset / "draft.json"),
                           "--dataset", str(dataset / "ds"), "--allow-unsigned", "--out", str(dataset / "out"),
                           "--cluster", "tcp://127.0.0.1:9"], home)
    assert bad.returncode == 2 and "DRAFT_INVALID" in bad.stderr and "Dask" not in bad.stderr
