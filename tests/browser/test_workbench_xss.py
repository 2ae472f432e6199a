"""Stored XSS from the API into the workbench (issue 18), in headless Debian chromium.

The ledger is written through the real decide service by key holders who chose markup for every
free-text field they control (`tests/workbench/hostile_ledger.py`): a rulebook version the
anomaly engine names, an action, a fact name and a fact value. On every page the payload must
show as literal text, no `img[src=x]` may exist, no dialog may open, and the app's own scripts
must run under the Content-Security-Policy without a single violation. A second test shows the
policy alone stops an inline handler and an inline script injected into the live page.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.browser.conftest import Workbench, screenshot, wait_for_rows
from tests.workbench.hostile_ledger import (
    HOSTILE_ACTION,
    HOSTILE_ANSWER,
    HOSTILE_FACT,
    HOSTILE_HOOK,
    HOSTILE_VALUE,
    HOSTILE_VERSION,
    RULEBOOK_ID,
    SCOPE,
    add_hostile_subscription,
    build_hostile_ledger,
)
from tests.workbench.markup_support import assert_report_is_text
from workbench.app.passwords import hash_password

pytestmark = [pytest.mark.browser, pytest.mark.slow]

WATCH = """document.addEventListener('securitypolicyviolation', e => {
  (window.__csp = window.__csp || []).push([e.violatedDirective, e.blockedURI, e.sourceFile, e.lineNumber].join(' '));
});"""


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    home = tmp_path_factory.mktemp("hostile-home")
    ids = build_hostile_ledger(home)
    add_hostile_subscription(home)
    server = Workbench(home, ["--refresh"])
    yield server, ids
    server.stop()


@pytest.fixture
def watched(page):
    """The page, recording every dialog (dismissed) and every CSP violation report."""
    page.dialogs = []
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    page.add_init_script(WATCH)
    return page


def violations(page) -> list[str]:
    return page.evaluate("window.__csp || []")


def assert_clean(page, name: str) -> None:
    """Nothing ran: no dialog, no element made from the payload, no CSP violation, no error."""
    screenshot(page, f"xss-{name}")
    assert page.dialogs == [], name
    assert page.locator("img[src=x]").count() == 0, name
    assert violations(page) == [], name
    assert page.errors == [], name


def tab(page, name: str) -> None:
    page.locator(".bk-tab", has_text=name).click()


def see(page, text: str) -> None:
    page.get_by_text(text, exact=False).first.wait_for()


def test_hostile_caller_text_is_text_on_every_page(watched, hostile):
    page, (server, ids) = watched, hostile
    response = page.goto(server.url)
    assert "'nonce-" in response.headers["content-security-policy"]
    page.locator("select").first.select_option(SCOPE)
    page.locator(".bk-tab", has_text="Decisions").wait_for()

    see(page, f"under version '{HOSTILE_VERSION}'")  # the anomaly reason on the Overview
    page.locator("canvas").first.wait_for()
    assert_clean(page, "overview")

    tab(page, "Decisions")
    see(page, "decision(s) · page 1 of")
    page.locator(".tabulator-cell", has_text=HOSTILE_VERSION).first.wait_for()
    page.get_by_label("Open decision id").fill(ids[-1])
    page.get_by_role("button", name="Open", exact=True).click()
    see(page, "Inclusion proof")
    see(page, json.dumps(HOSTILE_ACTION))
    see(page, json.dumps(HOSTILE_VERSION))
    page.get_by_label("Open decision id").fill(HOSTILE_VERSION)
    page.get_by_role("button", name="Open", exact=True).click()
    see(page, f"no decision '{HOSTILE_VERSION}'")  # a message quoting what was typed
    assert_clean(page, "decisions")

    tab(page, "Authoring")
    page.get_by_label("Rulebook").select_option(RULEBOOK_ID)
    page.get_by_role("button", name="Load current version").click()
    see(page, f"loaded {RULEBOOK_ID} version {HOSTILE_VERSION}")
    # Issue 21: the rule table, the live impact and the sweep show the hostile outcome text as text.
    wait_for_rows(page, ".rule-table")
    page.locator(".rule-table .tabulator-cell", has_text=HOSTILE_ACTION).first.wait_for()
    see(page, "change verdict · review queue")  # the live impact of the loaded draft
    page.get_by_role("button", name="Sweep threshold").click()
    see(page, "thresholds over")
    page.get_by_label("Stored decision id").fill(ids[-1])
    page.get_by_role("button", name="Evaluate on decision").click()
    page.get_by_text("Stored vs draft").wait_for()
    page.locator(".json-formatter-row .json-formatter-toggler-link").first.wait_for()
    assert_clean(page, "authoring")

    tab(page, "Migration")
    page.get_by_role("button", name="Dry-run draft over full history").click()
    see(page, "change verdict (")  # the Migration page's own line (the live impact also says "decisions replayed")
    page.get_by_role("button", name="Export manifest and report").click()
    see(page, "exported to")
    assert_clean(page, "migration")

    tab(page, "Events")  # issue 44: a subscription's URL and a receiver's answer are text
    see(page, HOSTILE_HOOK.split("/", 3)[3])  # the path part (the address itself may show as a link)
    see(page, HOSTILE_ANSWER)
    see(page, "status 503")
    assert_clean(page, "events")

    folders = sorted((server.home / "migration-reports").iterdir())
    assert folders
    assert_report_is_text(folders[-1])
    page.goto(Path(folders[-1] / "report.html").as_uri())  # the report as a reviewer opens it
    see(page, HOSTILE_VERSION)
    assert page.dialogs == [] and page.locator("img").count() == 0


def test_facts_with_hostile_names_and_values_are_text(watched, hostile):
    page, (server, _) = watched, hostile
    page.goto(server.url)
    page.locator("select").first.select_option(SCOPE)
    tab(page, "Authoring")
    page.get_by_label("Rulebook").select_option(RULEBOOK_ID)
    page.get_by_role("button", name="Load current version").click()
    see(page, "loaded")
    facts = page.get_by_label("Facts (JSON)")
    facts.fill(json.dumps({HOSTILE_FACT: HOSTILE_VALUE, "discount_percent": 5}))
    page.get_by_role("button", name="Evaluate facts").click()
    page.get_by_text("Draft result").wait_for()
    facts.fill(HOSTILE_VALUE)  # not JSON: the error message quotes nothing, but is text
    page.get_by_role("button", name="Evaluate facts").click()
    see(page, "facts are not JSON")
    assert_clean(page, "authoring-facts")


def test_the_policy_alone_blocks_injected_handlers_and_scripts(watched, hostile):
    """Markup put into the live page unescaped (as a missed escape would) does not run."""
    page, (server, _) = watched, hostile
    page.goto(server.url)
    page.locator("select").first.select_option(SCOPE)
    page.locator(".bk-tab", has_text="Decisions").wait_for()
    page.evaluate("""() => {
      const box = document.createElement('div');
      box.innerHTML = '<img src=x onerror="alert(\\'handler\\')"><svg onload="alert(\\'svg\\')"></svg>';
      document.body.appendChild(box);
      const script = document.createElement('script');
      script.textContent = "alert('script')";
      document.body.appendChild(script);
      const link = document.createElement('a');
      link.href = "javascript:alert('link')"; link.id = 'evil-link'; link.textContent = 'evil';
      document.body.appendChild(link);
    }""")
    page.locator("#evil-link").click()
    page.wait_for_timeout(1500)
    assert page.dialogs == []
    blocked = violations(page)
    assert any("script-src" in v for v in blocked), blocked


def test_the_sign_in_page_carries_the_policy_and_works_under_it(watched, tmp_path_factory):
    """With basic auth the login page is served under the same headers, and signing in works."""
    page = watched
    home = tmp_path_factory.mktemp("signin-home")
    build_hostile_ledger(home)
    (home / "users.json").write_text(json.dumps({"ops": hash_password("correct horse")}))
    (home / "grants.json").write_text(json.dumps({"ops": ["*"]}))
    server = Workbench(home, ["--refresh", "--basic-auth", str(home / "users.json"),
                              "--grants", str(home / "grants.json")])
    try:
        response = page.goto(server.url)
        assert "/login" in page.url
        policy = response.headers["content-security-policy"]
        assert "script-src 'self' 'nonce-" in policy and "frame-ancestors 'none'" in policy
        assert response.headers["x-frame-options"] == "DENY"
        page.locator("input[name=username]").fill("ops")
        page.locator("input[name=password]").fill("correct horse")
        page.locator("input[name=password]").press("Enter")
        page.locator("select").first.select_option(SCOPE)
        see(page, f"under version '{HOSTILE_VERSION}'")
        assert_clean(page, "signed-in-overview")
    finally:
        server.stop()
