"""The policy author's journey on the demo ledger, in a real browser: open the workbench, find
the degrading policy and its anomaly, draft a fix, see its exact and historical impact, export
the report and promote the draft."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.browser.conftest import Workbench, screenshot
from tests.browser.test_workbench_pages import draft_from_current, tab
from tests.demo_support import build_demo_home

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo_workbench(tmp_path_factory):
    paths = build_demo_home(tmp_path_factory.mktemp("demo-browser"))
    server = Workbench(paths["home"])
    yield server, paths
    server.stop()


def test_find_the_degradation_draft_a_fix_dry_run_export_and_promote(page, demo_workbench, tmp_path):
    server, paths = demo_workbench
    page.goto(server.url)
    page.locator("select").first.select_option("demo")
    page.locator(".bk-tab", has_text="Decisions").wait_for()

    # Overview: the degrading policy and the anomaly that names its version change.
    page.get_by_label("Policy").first.select_option("refund_approval")
    page.get_by_text("under policy_version '2026-08-01'").first.wait_for()
    screenshot(page, "journey-1-overview-anomaly")

    # Authoring: start from the current version, restore the earlier rules under a new version.
    fix = json.loads((ROOT / "data" / "rulebooks" / "refund-approval.json").read_text())
    fix["version"] = "2026-12-01"
    draft_from_current(page, "refund_approval", json.dumps(fix, indent=2))
    page.get_by_text("loaded refund_approval version 2026-08-01").wait_for()
    page.get_by_text("Valid Rulebook v1").wait_for()
    screenshot(page, "journey-2-authoring-fix")

    # Migration: exact impact beside the historical one.
    tab(page, "Migration")
    page.get_by_role("button", name="Dry-run draft over full history").click()
    page.get_by_text("decisions replayed").first.wait_for()
    page.get_by_text("Exact semantic diff (current → draft): different").wait_for()
    page.get_by_text("Caught failures").wait_for()
    screenshot(page, "journey-3-migration")

    # Export: the signed manifest and the HTML report download from the page.
    page.get_by_role("button", name="Export manifest and report").click()
    with page.expect_download() as download:
        page.get_by_role("button", name="Download migration.json").click()
    manifest = json.loads(Path(download.value.path()).read_text())
    assert manifest["dry_run"]["decisions_changed"] > 0
    assert manifest["signature"]
    with page.expect_download() as download:
        page.get_by_role("button", name="Download report.html").click()
    assert "<svg" in Path(download.value.path()).read_text()

    # Promote: a new version is registered; history is not edited.
    page.get_by_role("button", name="Promote draft").click()
    page.get_by_text("refund_approval version 2026-12-01 registered the current version").wait_for()
    screenshot(page, "journey-4-promoted")
    assert page.errors == []
