"""Issue 41, defect 5: one signing rule for exports in every shell (`workbench.signing`). The
Migration page's export and the workbench's refresh refuse without a key while signing is
required, as `gate dry-run` and `gate export` do, and write nothing; with a key they sign."""

from __future__ import annotations

import copy
import json

import pytest

from tests.workbench.app.conftest import build_small_ledger

pytestmark = pytest.mark.slow


def _draft(authoring) -> None:
    authoring.load_current()
    draft = copy.deepcopy(authoring.draft)
    draft["version"] = "2026-12-01"
    draft["rules"][0]["condition"]["value"] = 15
    authoring.draft_text = json.dumps(draft, indent=2)


@pytest.fixture
def keyless(tmp_path):
    """A workbench with no signing key while signing is required, over an unsigned dataset it
    reads by opt-in (`--allow-unsigned`)."""
    from gate.keys.config import SigningSetup
    from gate.ledger import Ledger
    from workbench.app.store import WorkbenchStore
    from workbench.dataset.export import export_ledger

    build_small_ledger(tmp_path)
    ledger = Ledger(f"sqlite:///{tmp_path / 'gate.db'}")
    export_ledger(ledger, str(tmp_path / "dataset"), signer=None)
    store = WorkbenchStore(ledger, SigningSetup.load(None, None, "hmac", required=True), tmp_path / "dataset",
                           allow_unsigned=True)
    yield store, tmp_path
    ledger.dispose()


def test_the_migration_page_export_is_refused_without_a_key(keyless):
    from workbench.app.access import Rights
    from workbench.app.state.authoring import AuthoringState
    from workbench.app.state.migration import MigrationState

    store, home = keyless
    authoring = AuthoringState(store, scope="acme", rulebook_id="pricing_exception")
    _draft(authoring)
    state = MigrationState(store, authoring, home / "exports", Rights.operator("tester"), scope="acme", rulebook_id="pricing_exception")
    state.run()
    assert state.result is not None and state.result["decisions_evaluated"] > 0
    assert state.result["source"]["dataset_key_id"] is None  # an unsigned dataset names no key
    state.export()
    assert state.exported is None and "export refused (SIGNING_KEY_MISSING)" in state.message
    assert not (home / "exports").exists()  # nothing written


def test_the_workbench_refresh_is_refused_without_a_key(keyless):
    from workbench.signing import SigningRefused

    store, home = keyless
    before = (home / "dataset" / "manifest.json").read_bytes()
    with pytest.raises(SigningRefused) as refused:
        store.refresh_dataset()
    assert refused.value.code == "SIGNING_KEY_MISSING"
    assert (home / "dataset" / "manifest.json").read_bytes() == before


def test_with_a_key_the_page_export_is_signed(workbench_home, tmp_path):
    from workbench.app.access import Rights
    from workbench.app.state.authoring import AuthoringState
    from workbench.app.state.migration import MigrationState

    store, _, _ = workbench_home
    authoring = AuthoringState(store, scope="acme", rulebook_id="pricing_exception")
    _draft(authoring)
    state = MigrationState(store, authoring, tmp_path, Rights.operator("tester"), scope="acme", rulebook_id="pricing_exception")
    state.run()
    state.export()
    manifest = json.loads((tmp_path.glob("*/migration.json").__next__()).read_text())
    assert manifest["signature"]["key_id"] and manifest["dry_run"]["source"]["dataset_key_id"]


def test_an_unsigned_dataset_is_shown_only_by_opt_in_and_says_so(keyless, monkeypatch):
    """Issue 41, defect 1 on the pages: without the opt-in the Overview shows the refusal and no
    figure; with it every figure is marked UNSIGNED (status line, Overview, report envelopes)."""
    from workbench.app.state.decisions import DecisionsState
    from workbench.app.state.overview import OverviewState
    from workbench.app.store import WorkbenchStore

    store, home = keyless
    strict = WorkbenchStore(store.ledger, store.signing, home / "dataset")
    refused = OverviewState(strict, scope="acme", policy_id="pricing_exception")
    assert refused.reports is None and refused.message.startswith("the dataset cannot be used: ")
    assert "it is not signed" in refused.message and "--allow-unsigned" in refused.message
    assert strict.dataset_status()["ok"] is False
    listed = DecisionsState(strict, scope="acme")
    assert "it is not signed" in listed.message
    shown = OverviewState(store, scope="acme", policy_id="pricing_exception")
    assert shown.message.startswith("UNSIGNED dataset (read by opt-in: no key vouches for these figures) · ")
    assert all(report["source"]["trust"] == "unsigned" and report["source"]["key_id"] is None
               for report in shown.reports.values())
    assert store.dataset_status()["source"]["trust"] == "unsigned"
