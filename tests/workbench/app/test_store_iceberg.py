"""The workbench over the Iceberg layout: a store whose dataset is an Iceberg export of the same
ledger shows exactly what the store over the Parquet export shows (status, the policy reports, the
monthly course, versions, decision pages and details, rule history, the live impact, a sweep, the
dry-run), and its refresh continues the Iceberg dataset."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from tests.workbench.app.conftest import build_small_ledger
from tests.workbench.ledger_support import at

ROOT = Path(__file__).resolve().parents[3]
POLICY = "pricing_exception"


def plain(value):
    """`value` without what names the dataset it was read from (`source`, the seals over it)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if k != "source" and not k.endswith("_hash")}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    from gate.keys.config import SigningSetup
    from gate.ledger import Ledger
    from workbench.app.store import WorkbenchStore
    from workbench.dataset.export import export_ledger
    from workbench.dataset.iceberg import default_target

    home = tmp_path_factory.mktemp("workbench-iceberg")
    ids = build_small_ledger(home)
    signing = SigningSetup.load(home / "signing-keys.json", None, "hmac")
    parquet = WorkbenchStore(Ledger(f"sqlite:///{home / 'gate.db'}"), signing, home / "parquet")
    parquet.refresh_dataset()
    ice = WorkbenchStore(Ledger(f"sqlite:///{home / 'gate.db'}"), signing, home / "ice")
    from gate.keys.signing import receipt_signer_for

    export_ledger(ice.ledger, str(home / "ice"), signer=receipt_signer_for(signing.attestation_key()),
                  lakehouse=default_target(str(home / "ice"), home))
    yield parquet, ice, ids, home
    parquet.ledger.dispose()
    ice.ledger.dispose()


def draft() -> dict:
    rulebook = json.loads((ROOT / "gate" / "data" / "rulebooks" / "pricing-exception.json").read_text())
    rulebook["version"] += "-draft"
    rulebook["rules"][0]["condition"]["value"] = 18
    return rulebook


def test_every_figure_of_the_workbench_is_the_same_over_both_layouts(stores):
    parquet, ice, ids, _ = stores
    assert json.loads((Path(ice.dataset_dir) / "manifest.json").read_text())["layout"] == "iceberg"
    status = [store.dataset_status() for store in (parquet, ice)]
    assert status[0]["ok"] and status[0]["rows"] == status[1]["rows"]
    for scope in ("acme", "globex"):
        both = [(store.overview.policy_reports(scope, POLICY), store.overview.monthly_series(scope, POLICY),
                 store.overview.version_changes(scope, POLICY),
                 store.decisions.decision_page(scope, policy_id=POLICY, limit=10),
                 [asdict(row) if not isinstance(row, dict) else row
                  for row in store.migration.rule_history(scope, POLICY)])
                for store in (parquet, ice)]
        assert plain(both[0][0]) == plain(both[1][0])
        assert both[0][1].equals(both[1][1]) and both[0][2].equals(both[1][2])
        assert both[0][3][1] == both[1][3][1] and both[0][3][0].equals(both[1][3][0])
        assert both[0][4] == both[1][4]
        detail = [store.decisions.decision_detail(scope, ids[scope][0]) for store in (parquet, ice)]
        assert detail[0] is not None and plain(detail[0]) == plain(detail[1])
        summaries = [store.migration.impact_summary(scope, POLICY, draft()) for store in (parquet, ice)]
        assert plain(summaries[0]) == plain(summaries[1])
        sweeps = [store.migration.sweep(scope, POLICY, draft(), ("review_thin_margin", "margin_percent", 0),
                                        [10.0, 20.0, 30.0])
                  for store in (parquet, ice)]
        assert plain(sweeps[0]) == plain(sweeps[1])
        runs = [store.migration.dry_run(scope, POLICY, draft()).result for store in (parquet, ice)]
        assert runs[0]["decisions_total"] > 0 and plain(runs[0]) == plain(runs[1])


def test_the_refresh_continues_the_iceberg_dataset(stores):
    parquet, ice, _, home = stores
    from tests.workbench.ledger_support import LedgerWriter

    writer = LedgerWriter(f"sqlite:///{home / 'gate.db'}", home / "signing-keys.json")
    writer.decide("acme", at(5, 2))
    writer.close()
    refreshed = [store.refresh_dataset() for store in (parquet, ice)]
    assert refreshed[0]["new_rows"] == refreshed[1]["new_rows"] and refreshed[1]["run"] == 2
    manifest = json.loads((Path(ice.dataset_dir) / "manifest.json").read_text())
    assert manifest["layout"] == "iceberg" and len(manifest["iceberg"]["tables"]["decisions"]["snapshots"]) == 2
    assert parquet.dataset_status()["rows"] == ice.dataset_status()["rows"]
