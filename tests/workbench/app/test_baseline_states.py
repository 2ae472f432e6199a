"""The Authoring page's live impact and the Migration page compare the draft with what production
runs (workbench.migration.baseline); the history is the Migration page's second, named view."""

from __future__ import annotations

import copy
import json

import pytest

from workbench.app.access import Rights
from workbench.app.state.authoring import AuthoringState
from workbench.app.state.migration import MigrationState
from workbench.app.store import CURRENT, HISTORY
from workbench.migration.errors import DryRunError


def test_the_loaded_current_version_shows_no_change_live_and_on_the_migration_page(workbench_home, tmp_path):
    store, _, _ = workbench_home
    authoring = AuthoringState(store, scope="acme", rulebook_id="pricing_exception")
    authoring.load_current()
    live = authoring.compute_live(authoring.draft)["summary"]
    assert live["baseline"]["kind"] == "version" and live["baseline"]["version"] == authoring.draft["version"]
    assert live["decisions_evaluated"] > 0 and live["decisions_changed"] == 0
    assert live["review_load"]["before"] == live["review_load"]["after"]
    state = MigrationState(store, authoring, tmp_path, Rights.operator("tester"), scope="acme", rulebook_id="pricing_exception")
    assert state.against == CURRENT
    state.run()
    assert state.result["decisions_changed"] == 0 and "compared with version" in state.message
    state.against = HISTORY
    state.run()
    assert state.result["baseline"]["kind"] == "history" and "compared with the history" in state.message


def test_an_edit_changes_decisions_against_the_current_version(workbench_home, tmp_path):
    store, _, _ = workbench_home
    authoring = AuthoringState(store, scope="acme", rulebook_id="pricing_exception")
    authoring.load_current()
    draft = copy.deepcopy(authoring.draft)
    draft["version"] = "2026-12-01"
    draft["rules"][0]["condition"]["value"] = 15
    authoring.draft_text = json.dumps(draft)
    live = authoring.compute_live(authoring.draft)["summary"]
    assert live["baseline"]["kind"] == "version" and live["decisions_changed"] > 0


def test_an_unknown_comparison_is_refused(workbench_home):
    store, _, _ = workbench_home
    authoring = AuthoringState(store, scope="acme", rulebook_id="pricing_exception")
    authoring.load_current()
    with pytest.raises(DryRunError) as caught:
        store.migration.dry_run("acme", "pricing_exception", authoring.draft, against="yesterday")
    assert caught.value.code == "USAGE"


def test_a_version_published_for_shadow_is_not_the_baseline(workbench_home, tmp_path):
    """Last in this module: it starts a shadow. The newest registered version is then the shadowed
    draft, which does not run: the dry-run says it compares with the history instead."""
    store, _, _ = workbench_home
    authoring = AuthoringState(store, scope="acme", rulebook_id="pricing_exception")
    authoring.load_current()
    running = authoring.draft["version"]
    draft = copy.deepcopy(authoring.draft)
    draft["version"] = "2026-12-09"
    draft["rules"][0]["condition"]["value"] = 15
    authoring.draft_text = json.dumps(draft)
    state = MigrationState(store, authoring, tmp_path, Rights.operator("tester"), scope="acme", rulebook_id="pricing_exception")
    state.start_shadow()
    assert "in shadow" in state.message and store.current_rulebook("acme", "pricing_exception")["version"] == "2026-12-09"
    assert store.releases.running_rulebook("acme", "pricing_exception") is None
    result = store.migration.dry_run("acme", "pricing_exception", draft).result
    assert result["baseline"]["kind"] == "history" and running != "2026-12-09"
