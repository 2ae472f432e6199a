"""The engines on a real Dask cluster (workbench.cluster): a LocalCluster of two worker
processes computes the reports' partials, the dry-run's passes and the rollup rebuild, and every
result equals the single-process one (report hashes, the dry-run's manifest and result_hash, the
rebuilt rollups' reports). One cluster for the module, closed at its end."""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

pytest.importorskip("distributed")

from gate.reports.registry import REPORTS, Cohort
from workbench.cluster import CONNECT_SECONDS, LOCAL, ClusterError, connect, connect_seconds
from workbench.cluster.rebuild import cluster_rebuild
from workbench.cluster.reports import cluster_frames
from workbench.dataset.load import DatasetError, from_dataset
from workbench.dataset.rebuild import rebuild_rollups
from workbench.dataset.synth import synthesize
from workbench.demo import scenario as S
from workbench.migration import dry_run
from workbench.reports.policy import ReportParams, build_report

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import dryrun_data

EVERY = ReportParams(limit=None, min_sample=5, threshold=0.0, max_items=100)
CREATED_AT = "2026-08-01T00:00:00.000Z"


@pytest.fixture(scope="module")
def client():
    with connect(LOCAL, workers=2) as dask_client:
        workers = dask_client.scheduler_info()["workers"]
        assert len(workers) == 2 and all(w["nthreads"] == 1 for w in workers.values())
        assert len({w["id"] for w in workers.values()}) == 2
        yield dask_client


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    root = tmp_path_factory.mktemp("cluster") / "ds"
    manifest = synthesize(str(root), decisions=12_000, seed=11)
    return root, manifest


# The report kinds a cluster computes: those over decisions (a kind that reads holds reads them in
# one process, and `gate report --cluster` refuses it).
DECISION_REPORTS = {name: kind for name, kind in REPORTS.items() if not kind.reads_holds}


def _reports(frames, policy, params, cohort):
    return {name: build_report(kind, frames, policy, params, cohort) for name, kind in DECISION_REPORTS.items()}


def _single(root, policy, params, scopes=None, version=None):
    """Every report kind in one process: from the rows, and from the dataset's rollups."""
    out = {}
    for name, kind in DECISION_REPORTS.items():
        frames = from_dataset(root, scopes=scopes, policy_id=policy, policy_version=kind.loaded_version(params)
                              if version is None else version, limit=None)
        cohort = Cohort(scopes[0] if scopes else "", frozenset(scopes or ()))
        out[name] = (build_report(kind, replace(frames, rollup=None), policy, params, cohort),
                     build_report(kind, frames, policy, params, cohort))
    return out


def test_every_report_kind_on_a_cluster_equals_the_single_process_report(client, synthetic):
    root, manifest = synthetic
    scopes = sorted(manifest["chains"])
    cohort = Cohort(own_scope=scopes[0], opted_in=frozenset(scopes))
    for policy in S.POLICIES:
        for name, kind in DECISION_REPORTS.items():
            version = kind.loaded_version(EVERY)
            rows = replace(from_dataset(root, policy_id=policy, policy_version=version, limit=None), rollup=None)
            single = build_report(kind, rows, policy, EVERY, cohort)
            clustered = build_report(kind, cluster_frames(client, root, policy_id=policy, policy_version=version),
                                     policy, EVERY, cohort)
            assert clustered == single, (policy, name)  # the sealed report, its hash included
    # A selection of scopes, one version, a verdict: still the same reports.
    versions = {"refund_approval": None}
    one = ReportParams(limit=None, min_sample=5, threshold=0.0, max_items=100, verdict="yes")
    for params in (one, replace(EVERY, policy_version=_a_version(root))):
        for name, kind in DECISION_REPORTS.items():
            version = kind.loaded_version(params)
            rows = replace(from_dataset(root, scopes=scopes[1:3], policy_id="refund_approval",
                                        policy_version=version, limit=None), rollup=None)
            frames = cluster_frames(client, root, policy_id="refund_approval", policy_version=version,
                                    scopes=scopes[1:3])
            assert build_report(kind, frames, "refund_approval", params, cohort) == \
                build_report(kind, rows, "refund_approval", params, cohort), name
    assert versions


def _a_version(root) -> str:
    frames = from_dataset(root, policy_id="refund_approval", limit=None)
    return frames.decisions.select(pl.col("policy_version").min()).collect().item()


def test_a_changed_file_refuses_the_cluster_report(client, tmp_path, synthetic):
    root, manifest = synthetic
    copy = tmp_path / "ds"
    shutil.copytree(root, copy)
    victim = copy / manifest["tables"]["outcomes"]["files"][-1]["path"]
    victim.write_bytes(victim.read_bytes()[:-1] + b"\0")
    with pytest.raises(DatasetError, match="does not match its manifest"):
        cluster_frames(client, copy, policy_id="refund_approval")


def test_the_dry_run_on_a_cluster_equals_the_single_process_dry_run(client, tmp_path, monkeypatch):
    root = tmp_path / "history"
    # partial rows (the scalar evaluator) and decisions without facts; three write runs (chunks of
    # 7,000), so each (scope, month) partition holds the files of several runs: several units
    monkeypatch.setattr(dryrun_data, "CHUNK", 7_000)
    manifest = dryrun_data.generate(root, 20_000, 10)
    assert len({entry["path"].rsplit("/", 1)[-1] for entry in manifest["tables"]["decisions"]["files"]}) == 3
    _old, draft = dryrun_data.rulebooks()
    for scope in (None, dryrun_data.SCOPES[1]):
        flips = {}
        runs = {}
        for name, cluster in (("single", None), ("cluster", client)):
            flips[name] = tmp_path / f"{name}-{scope}.parquet"
            runs[name] = dry_run(draft, dryrun_data.RULEBOOK_ID, scope=scope, dataset=root, created_at=CREATED_AT,
                                 flips_path=flips[name], cluster=cluster)
        single, clustered = runs["single"].manifest, runs["cluster"].manifest
        assert clustered == single
        assert clustered["dry_run"]["result_hash"] == single["dry_run"]["result_hash"]
        assert single["dry_run"]["decisions_changed"] > 100 and single["dry_run"]["decisions_scalar"] > 0
        # the history the run names reads the same rows (lazy scans of the checked files)
        for frame in ("decisions", "outcomes"):
            one, other = (getattr(runs[name].history, frame).collect().sort("decision_id", "month")
                          for name in ("single", "cluster"))
            assert other.sort(other.columns).equals(one.sort(one.columns)), frame
        assert runs["cluster"].history.versions.sort("scope", "policy_version", "rulebook_hash").equals(
            runs["single"].history.versions.sort("scope", "policy_version", "rulebook_hash"))
        # every flip, with its latest outcome, in both files (the rows in another order)
        assert pl.read_parquet(flips["cluster"]).sort("decision_id").equals(
            pl.read_parquet(flips["single"]).sort("decision_id"))


def test_a_changed_file_refuses_the_cluster_dry_run_as_the_single_process_one(client, tmp_path):
    from workbench.migration import DryRunError

    root = tmp_path / "history"
    manifest = dryrun_data.generate(root, 3_000, 10)
    victim = root / manifest["facts"][dryrun_data.RULEBOOK_ID]["files"][0]["path"]
    victim.write_bytes(victim.read_bytes()[:-1] + b"\0")
    draft = dryrun_data.rulebooks()[1]
    refusals = []
    for cluster in (None, client):
        with pytest.raises(DryRunError) as refused:  # raised on a worker, pickled whole to the client
            dry_run(draft, dryrun_data.RULEBOOK_ID, dataset=root, created_at=CREATED_AT, cluster=cluster)
        refusals.append((refused.value.code, refused.value.message))
    assert refusals[0] == refusals[1] and refusals[0][0] == "DATASET_INVALID"


def test_the_rollup_rebuild_on_a_cluster_equals_the_single_process_rebuild(client, tmp_path):
    here, there = tmp_path / "here", tmp_path / "there"
    first = synthesize(str(here), decisions=8_000, seed=5)
    shutil.copytree(here, there)
    single = rebuild_rollups(str(here), signer=None)
    clustered = cluster_rebuild(client, str(there), signer=None)
    for manifest in (single, clustered):
        member = manifest["rollups"]
        assert manifest["runs"] == member["run"] == 2 and manifest["last_run"]["rollups_rebuilt"]
        assert member["recomputed_partitions"] == member["decision_partitions"] == first["rollups"]["decision_partitions"]
    assert {k: v["rows"] for k, v in single["rollups"]["file_digests"].items()} == \
        {k: v["rows"] for k, v in clustered["rollups"]["file_digests"].items()}
    for name, path in single["rollups"]["files"].items():
        a, b = pl.read_parquet(here / path), pl.read_parquet(there / clustered["rollups"]["files"][name])
        exact = [c for c, t in a.schema.items() if not t.is_float()]
        assert a.select(exact).equals(b.select(exact)), name
        for column in set(a.columns) - set(exact):
            # float sums (fact moments) are added in thread order: not bit-stable between two
            # single-process rebuilds either; equal to rounding
            assert ((a[column] - b[column]).abs() <= 1e-9 * (1 + a[column].abs())).all(), (name, column)
    scopes = sorted(first["chains"])
    cohort = Cohort(own_scope=scopes[0], opted_in=frozenset(scopes))
    for policy in S.POLICIES:
        from_here = _reports(from_dataset(here, policy_id=policy, limit=None), policy, EVERY, cohort)
        from_there = _reports(from_dataset(there, policy_id=policy, limit=None), policy, EVERY, cohort)
        rows = _reports(replace(from_dataset(here, policy_id=policy, limit=None), rollup=None), policy, EVERY, cohort)
        assert from_here["effectiveness"]["source"]["dataset_hash"] == single["dataset_hash"]
        strip = [{k: {m: v for m, v in r.items() if m != "source" and not m.endswith("_hash")}
                  for k, r in rep.items()} for rep in (from_here, from_there, rows)]
        assert strip[0] == strip[1] == strip[2], policy
    assert json.loads((there / "manifest.json").read_text())["dataset_hash"] == clustered["dataset_hash"]


def test_a_changed_file_refuses_the_cluster_rebuild_on_a_worker_and_commits_nothing(client, tmp_path):
    from workbench.dataset.location import DatasetError as LocationError

    root = tmp_path / "ds"
    manifest = synthesize(str(root), decisions=2_000, seed=6)
    victim = root / manifest["tables"]["outcomes"]["files"][0]["path"]
    victim.write_bytes(victim.read_bytes()[:-1] + b"\0")
    messages = []
    for rebuild in (lambda: rebuild_rollups(str(root), signer=None),
                    lambda: cluster_rebuild(client, str(root), signer=None)):
        with pytest.raises(LocationError, match="does not match its manifest") as refused:
            rebuild()
        messages.append(str(refused.value))
    assert messages[0] == messages[1]
    assert json.loads((root / "manifest.json").read_text())["runs"] == 1
    assert sorted(p.name for p in (root / "rollups").iterdir()) == ["run-000001"]


def test_an_unreachable_scheduler_is_one_clear_error_within_the_timeout():
    with pytest.raises(ClusterError, match=r"cannot reach the Dask scheduler at 'tcp://127\.0\.0\.1:9' within 2 s"), \
            connect("tcp://127.0.0.1:9", timeout=2):
        pass


def test_the_scheduler_is_waited_for_10_s_unless_the_setting_says_otherwise(monkeypatch):
    assert connect_seconds({}) == CONNECT_SECONDS == 10
    assert connect_seconds({"GATE_CLUSTER_CONNECT_SECONDS": " 2.5 "}) == 2.5
    for value in ("0", "-1", "601", "nan", "inf", "ten"):
        with pytest.raises(ClusterError, match="GATE_CLUSTER_CONNECT_SECONDS must be a number"):
            connect_seconds({"GATE_CLUSTER_CONNECT_SECONDS": value})
    monkeypatch.setenv("GATE_CLUSTER_CONNECT_SECONDS", "1")  # connect reads it when no timeout is given
    with pytest.raises(ClusterError, match="within 1 s"), connect("tcp://127.0.0.1:9"):
        pass


def test_the_workbench_dry_run_on_its_cluster_address_equals_the_single_process_one(client, tmp_path, monkeypatch):
    """The workbench's setting (GATE_CLUSTER, here the running cluster's scheduler address: the
    path of a remote scheduler): its full-history dry-run on the cluster, the live impact not."""
    import copy

    from gate.keys.config import SigningSetup
    from gate.ledger import Ledger
    from tests.workbench.app.conftest import build_small_ledger
    from workbench.app.store import WorkbenchStore

    build_small_ledger(tmp_path)
    monkeypatch.setenv("GATE_CLUSTER", client.scheduler.address)
    signing = SigningSetup.load(tmp_path / "signing-keys.json", None, "hmac")
    on_cluster = WorkbenchStore(Ledger(f"sqlite:///{tmp_path / 'gate.db'}"), signing, tmp_path / "dataset")
    monkeypatch.delenv("GATE_CLUSTER")
    alone = WorkbenchStore(on_cluster.ledger, signing, tmp_path / "dataset", clock=on_cluster.clock)
    try:
        assert on_cluster.cluster == client.scheduler.address and alone.cluster is None
        on_cluster.refresh_dataset()
        draft = copy.deepcopy(on_cluster.current_rulebook("acme", "pricing_exception"))
        draft["rules"][0]["condition"]["value"] = 15
        draft["version"] = "2026-12-01"
        clustered = on_cluster.migration.dry_run("acme", "pricing_exception", draft)
        single = alone.migration.dry_run("acme", "pricing_exception", draft)
        assert clustered.result == single.result
        assert clustered.result["decisions_changed"] > 0
        unreachable = WorkbenchStore(on_cluster.ledger, signing, tmp_path / "dataset", cluster="tcp://127.0.0.1:9")
        summary = unreachable.migration.impact_summary("acme", "pricing_exception", draft)
        assert summary["decisions_changed"] > 0  # not on it
    finally:
        on_cluster.ledger.dispose()
