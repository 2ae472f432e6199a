"""The workbench over a dataset changed behind its manifest's back: a clear message on the page,
no report and no decision list from the changed rows (issue 18, item 3), in a real browser."""

from __future__ import annotations

import json

import pytest

from tests.browser.conftest import Workbench, screenshot
from tests.browser.test_workbench_pages import open_scope, tab

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def changed(tmp_path_factory):
    from tests.workbench.app.conftest import build_small_ledger

    home = tmp_path_factory.mktemp("browser-integrity-home")
    build_small_ledger(home)
    server = Workbench(home, ["--refresh"])
    dataset = home / "dataset"
    manifest = json.loads((dataset / "manifest.json").read_text())
    entry = next(e for e in manifest["tables"]["outcomes"]["files"] if "scope=acme" in e["path"])
    path = dataset / entry["path"]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01  # the same size, another digest
    path.write_bytes(bytes(data))
    yield server, entry["path"]
    server.stop()


def test_a_changed_dataset_file_is_refused_with_a_message(page, changed):
    workbench, changed_path = changed
    open_scope(page, workbench)
    page.locator(".wb-message", has_text="the dataset cannot be used").first.wait_for()
    page.get_by_text(f"{changed_path} does not match its sha256").first.wait_for()
    assert page.get_by_text("decisions considered").count() == 0  # no report from the changed rows
    screenshot(page, "overview-dataset-refused")
    tab(page, "Decisions")
    page.locator(".wb-message:visible", has_text="does not match its sha256").first.wait_for()
    assert page.get_by_text("decision(s) · page 1 of").count() == 0
    screenshot(page, "decisions-dataset-refused")
    assert page.errors == []


@pytest.fixture(scope="module")
def forged(tmp_path_factory):
    """Issue 41, defect 1: outcomes forged and every digest and the dataset_hash recomputed, the
    old signature kept: a workbench over it served before the forgery, as an operator would."""
    from tests.workbench.app.conftest import build_small_ledger
    from tests.workbench.manifest_support import forge_outcomes

    home = tmp_path_factory.mktemp("browser-forged-home")
    build_small_ledger(home)
    server = Workbench(home, ["--refresh"])
    forge_outcomes(home / "dataset", keep_signature=True)
    yield server
    server.stop()


def test_a_forged_dataset_shows_the_refusal_instead_of_figures(page, forged):
    open_scope(page, forged)
    page.locator(".wb-message", has_text="the dataset cannot be used").first.wait_for()
    page.get_by_text("its signature does not verify").first.wait_for()
    assert page.get_by_text("decisions considered").count() == 0  # no figure from the forged rows
    assert page.get_by_text("signed by key").count() == 0  # no key named for content it never signed
    screenshot(page, "overview-dataset-forged")
    tab(page, "Decisions")
    page.locator(".wb-message:visible", has_text="signature does not verify").first.wait_for()
    assert page.get_by_text("decision(s) · page 1 of").count() == 0
    assert page.errors == []
