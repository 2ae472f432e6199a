"""The Overview's fast path (issue 22: picking a scope and policy within 0.5 s at 1M decisions)
shows exactly the figures of the reference path: the limited reports read through
`workbench.dataset.recent` instead of the lazy plan, the monthly course from the rollups instead of the
rows, finished figures cached per manifest hash. Not timed: `bench_workbench` measures the speed;
these tests pin that nothing it gained changed a figure, and the cache's invalidation and bound."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from gate.keys.config import SigningSetup
from gate.keys.signing import generate_keyring
from gate.ledger import Ledger
from gate.ledger.reports import set_benchmark_opt_in
from tests.workbench.ledger_support import LedgerWriter, at
from workbench.app import store as store_module
from workbench.app.state.overview import OverviewState
from workbench.app.store import WorkbenchStore
from workbench.dataset.export import export_ledger
from workbench.dataset.load import DatasetError, from_dataset
from workbench.dataset.recent import recent_frames
from workbench.dataset.synth import synthesize

POLICIES = ("refund_approval", "agent_action_gate", "pricing_exception")


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """A synthetic demo dataset and two stores over it: the fast one and the reference one."""
    home = tmp_path_factory.mktemp("fast-path")
    synthesize(str(home / "ds"), decisions=6_000, seed=3)
    generate_keyring(home / "keys.json", "2026-11-01T00:00:00.000Z")
    ledger = Ledger(f"sqlite:///{home / 'gate.db'}")
    ledger.upgrade()
    signing = SigningSetup.load(home / "keys.json", None, "hmac")
    yield (WorkbenchStore(ledger, signing, home / "ds", allow_unsigned=True), WorkbenchStore(ledger, signing, home / "ds", reference=True, allow_unsigned=True),
           home / "ds", ledger)
    ledger.dispose()


def _scopes(root: Path) -> list[str]:
    return sorted(p.name[len("scope="):] for p in (root / "decisions").glob("scope=*"))


def _collected(frames):
    facts = None if frames.facts is None else frames.facts.collect()
    return frames.decisions.collect(), frames.outcomes.collect(), facts


@pytest.mark.parametrize("limit", [1, 7, 1000, 2_000, 10_000_000])
def test_recent_frames_are_the_lazy_selection(synthetic, limit):
    _, _, root, _ = synthetic
    scopes = _scopes(root)
    for chosen in ([scopes[0]], scopes[:3], ["no-such-scope"], None):
        for policy in POLICIES:
            fast = _collected(recent_frames(root, scopes=chosen, policy_id=policy, limit=limit))
            slow = _collected(from_dataset(root, scopes=chosen, policy_id=policy, limit=limit))
            assert_frame_equal(fast[0], slow[0])  # same rows, same order
            assert_frame_equal(fast[1], slow[1], check_row_order=False)
            if slow[2] is None:
                assert fast[2] is None
            else:
                assert_frame_equal(fast[2], slow[2], check_row_order=False)


def test_recent_frames_refuse_what_from_dataset_refuses(tmp_path):
    (tmp_path / "manifest.json").write_text('{"dataset_schema_version": "decision_dataset_v0"}')
    with pytest.raises(DatasetError):
        recent_frames(tmp_path, scopes=["demo"], policy_id="refund_approval", limit=10)
    with pytest.raises(DatasetError):
        recent_frames(tmp_path / "missing", scopes=["demo"], policy_id="refund_approval", limit=10)


@pytest.mark.parametrize("limit", [1, 1000, 100_000])
def test_overview_figures_equal_the_reference_path(synthetic, limit):
    fast, reference, root, _ = synthetic
    marked = 0
    for scope in _scopes(root)[:3]:
        for policy in POLICIES:
            expected = OverviewState(reference, scope=scope, policy_id=policy, limit=limit)
            shown = OverviewState(fast, scope=scope, policy_id=policy, limit=limit)
            assert shown.reports == expected.reports
            assert_frame_equal(shown.series, expected.series)
            assert_frame_equal(shown.versions, expected.versions)  # from the rollups, from the rows
            marked += shown.versions.height
            assert shown.message == expected.message
    assert marked


def test_overview_with_a_benchmark_cohort_equals_the_reference_path(synthetic):
    fast, reference, root, ledger = synthetic
    scopes = _scopes(root)
    for scope in scopes:
        set_benchmark_opt_in(ledger, scope, True, "2026-11-01T00:00:00.000Z")
    try:
        for limit in (50, 1000):
            expected = reference.overview.policy_reports(scopes[0], "refund_approval", limit=limit)
            assert fast.overview.policy_reports(scopes[0], "refund_approval", limit=limit) == expected
        # An opt-out changes the cohort: the cached figures of the old cohort are not reused.
        set_benchmark_opt_in(ledger, scopes[1], False, "2026-11-01T00:00:00.000Z")
        assert (fast.overview.policy_reports(scopes[0], "refund_approval", limit=50)
                == reference.overview.policy_reports(scopes[0], "refund_approval", limit=50))
    finally:
        for scope in scopes:
            set_benchmark_opt_in(ledger, scope, False, "2026-11-01T00:00:00.000Z")


def test_cached_figures_are_copies(synthetic):
    fast, _, root, _ = synthetic
    scope = _scopes(root)[0]
    first = fast.overview.policy_reports(scope, "refund_approval")
    first["effectiveness"]["effectiveness_score"] = -1
    assert fast.overview.policy_reports(scope, "refund_approval")["effectiveness"]["effectiveness_score"] != -1


def test_the_figure_cache_is_bounded(synthetic, monkeypatch):
    shared, _, root, _ = synthetic
    monkeypatch.setattr(store_module, "FIGURE_CACHE_SIZE", 3)
    fast = WorkbenchStore(shared.ledger, shared.signing, root, allow_unsigned=True)
    for limit in range(1, 8):
        fast.overview.policy_reports(_scopes(root)[0], "refund_approval", limit=limit)
        assert len(fast._figures) == min(limit, 3)
    # The least recently used went first: the newest three are answered from the cache.
    assert [key[4] for key in fast._figures] == [5, 6, 7]


def test_a_refresh_is_never_answered_from_the_cache(tmp_path):
    """Figures come from the dataset as it is now: after an export that adds decisions (and a
    new month), the reports and the monthly course count them."""
    writer = LedgerWriter(f"sqlite:///{tmp_path / 'gate.db'}", tmp_path / "signing-keys.json")
    for index in range(12):
        record = writer.decide("acme", at(1 + index % 2, 1 + index, 10), discount=10, margin=30)
        writer.receipt("outcome", "acme", record, at(1 + index % 2, 1 + index, 10) + timedelta(days=1), "succeeded")
    store = WorkbenchStore(Ledger(f"sqlite:///{tmp_path / 'gate.db'}"),
                           SigningSetup.load(tmp_path / "signing-keys.json", None, "hmac"), tmp_path / "dataset")
    store.refresh_dataset()
    state = OverviewState(store, scope="acme", policy_id="pricing_exception")
    assert state.reports["effectiveness"]["sample"]["decisions_considered"] == 12
    assert state.series["month"].to_list() == ["2026-01", "2026-02"]
    for index in range(5):
        record = writer.decide("acme", at(3, 1 + index, 10), discount=10, margin=30)
        writer.receipt("outcome", "acme", record, at(3, 2 + index, 10), "failed")
    writer.close()
    # Exported by another process (`gate export`, signed as it signs): only the manifest tells the store.
    from workbench.signing import dataset_signer

    export_ledger(store.ledger, str(tmp_path / "dataset"), signer=dataset_signer(store.signing))
    state.refresh()
    assert state.reports["effectiveness"]["sample"]["decisions_considered"] == 17
    assert state.series["month"].to_list() == ["2026-01", "2026-02", "2026-03"]
    assert state.series.filter(pl.col("month") == "2026-03")["decisions"].item() == 5
    reference = WorkbenchStore(store.ledger, store.signing, tmp_path / "dataset", reference=True)
    assert (store.overview.policy_reports("acme", "pricing_exception")
            == reference.overview.policy_reports("acme", "pricing_exception"))
    assert_frame_equal(store.overview.monthly_series("acme", "pricing_exception"),
                       reference.overview.monthly_series("acme", "pricing_exception"))
    store.ledger.dispose()


def _copy_dataset(root: Path, to: Path) -> Path:
    import shutil

    shutil.copytree(root, to)
    return to


def test_ties_and_null_times_at_the_boundary(synthetic, tmp_path):
    """Decisions sharing their time at the limit's boundary (the tie broken by decision id) and
    decisions without a time (sorted first, as newest) are chosen as the lazy path chooses."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    _, _, root, _ = synthetic
    copy = _copy_dataset(root, tmp_path / "ds")
    scope = _scopes(copy)[0]
    months = sorted((copy / "decisions" / f"scope={scope}").glob("month=*"))
    for month, make in ((months[-1], "tie"), (months[-2], "null")):
        for path in month.glob("*.parquet"):
            table = pq.read_table(path)
            times = table.column("created_at").to_pylist()
            if make == "tie":  # every other decision of the newest month at one instant
                times = [times[0] if i % 2 else t for i, t in enumerate(times)]
            else:  # a few decisions of the month before without a time
                times = [None if i % 7 == 0 else t for i, t in enumerate(times)]
            index = table.schema.get_field_index("created_at")
            field = table.schema.field(index).with_nullable(True)
            table = table.set_column(index, field, pa.array(times, type=field.type))
            pq.write_table(table, path)
    # The edited files are listed again (a dataset whose files do not match its manifest is refused).
    from tests.workbench.manifest_support import write_listed_manifest

    write_listed_manifest(copy, json.loads((copy / "manifest.json").read_text()))
    nulls = 0
    for policy in POLICIES:
        for limit in (1, 3, 40, 120, 400, 5_000):
            fast = _collected(recent_frames(copy, scopes=[scope], policy_id=policy, limit=limit))
            slow = _collected(from_dataset(copy, scopes=[scope], policy_id=policy, limit=limit))
            assert_frame_equal(fast[0], slow[0])
            assert_frame_equal(fast[1], slow[1], check_row_order=False)
            nulls += slow[0]["created_at"].null_count()
    assert nulls  # the null times were among the chosen


def test_the_monthly_course_without_rollups_is_read_from_the_rows(synthetic, tmp_path):
    """A dataset without current rollups (an older export, another outcome mapping) still shows
    the reference figures: the course falls back to the rows."""
    import json

    shared, _, root, _ = synthetic
    for change in ("drop", "classes"):
        copy = _copy_dataset(root, tmp_path / change)
        manifest = json.loads((copy / "manifest.json").read_text())
        if change == "drop":
            del manifest["rollups"]
        else:
            manifest["rollups"]["classes_hash"] = "0" * 64
        # Sealed again (unsigned): a manifest changed after its export is otherwise refused.
        from workbench.dataset import integrity

        (copy / "manifest.json").write_text(json.dumps(integrity.seal(manifest, None)))
        fast = WorkbenchStore(shared.ledger, shared.signing, copy, allow_unsigned=True)
        reference = WorkbenchStore(shared.ledger, shared.signing, copy, reference=True, allow_unsigned=True)
        scope = _scopes(copy)[1]
        for policy in POLICIES:
            assert_frame_equal(fast.overview.monthly_series(scope, policy),
                               reference.overview.monthly_series(scope, policy))
            assert fast.overview.policy_reports(scope, policy) == reference.overview.policy_reports(scope, policy)
