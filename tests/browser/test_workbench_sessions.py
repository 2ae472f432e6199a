"""Issue 57 in a real browser, signing in against the password file: what only a browser shows.

- Chromium follows a sign-in's redirect: `next=///evil.example/phish` sent it to evil.example
  (Python saw no host in `///host`, browsers do); it now stays on the workbench.
- A page script cannot read the session cookie: before, the Bokeh session token embedded in the
  page held every cookie (`{"cookies": {"user": …}}`) although `document.cookie` was empty, and
  `autoload.js` served it to any origin.
- The header's **Sign out** ends the session: the workbench asks for a password again, and
  another tab open on the workbench closes itself.

The same behaviours over plain HTTP, with the error paths, are in
tests/workbench/app/test_sessions.py; the provider's logout in tests/browser/test_oidc_signin.py."""

from __future__ import annotations

import json
import re
import subprocess

import httpx
import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.browser.conftest import GATE, Workbench, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.slow]
PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="module")
def workbench(tmp_path_factory):
    from tests.workbench.app.conftest import build_small_ledger

    home = tmp_path_factory.mktemp("sessions-home")
    build_small_ledger(home)
    users, grants = home / "users.json", home / "grants.json"
    subprocess.run([GATE, "workbench-passwd", str(users), "ana"], input=PASSWORD + "\n", text=True,
                   check=True, capture_output=True, timeout=120)
    grants.write_text(json.dumps({"users": {"ana": {"acme": ["viewer"]}}}))
    server = Workbench(home, ["--refresh", "--basic-auth", str(users), "--grants", str(grants)])
    yield server
    server.stop()


def submit(page, user: str, password: str) -> None:
    page.locator("input[name=username]").fill(user)
    page.locator("input[name=password]").fill(password)
    with page.expect_navigation():
        page.locator("button[type=submit]").click()


@pytest.mark.parametrize("foreign", ["///evil.example/phish", "////evil.example/"])
def test_chromium_stays_on_the_workbench_after_signing_in(page, workbench, foreign):
    origin = f"http://127.0.0.1:{workbench.port}/"
    page.goto(f"{origin}login?next={foreign}")
    submit(page, "ana", PASSWORD)
    assert page.url.startswith(origin) and "evil.example" not in page.url
    page.locator("select").first.wait_for()  # the workbench itself


# Everything a script on the page can read: the document (with the Bokeh session token in its
# render items), every script's text, document.cookie, and what autoload.js answers it.
_VISIBLE = """async () => {
  const autoload = await fetch('/workbench/autoload.js?bokeh-autoload-element=x', {credentials: 'include'});
  return {html: document.documentElement.outerHTML, scripts: [...document.scripts].map(s => s.text).join('\\n'),
          cookie: document.cookie, autoload_status: autoload.status, autoload: await autoload.text()};
}"""


def test_no_page_script_sees_the_session_cookie_and_sign_out_ends_it(page, workbench):
    from bokeh.util.token import get_token_payload

    page.goto(workbench.url)
    submit(page, "ana", PASSWORD)
    page.locator("select").first.wait_for()
    cookie = next(c["value"] for c in page.context.cookies() if c["name"] == "user")
    assert len(cookie) > 40
    seen = page.evaluate(_VISIBLE)
    token = re.search(r'"token":\s*"([^"]+)"', seen["scripts"]).group(1)
    payload = get_token_payload(token)
    assert payload["cookies"] == {} and "Cookie" not in payload["headers"]
    for text in (seen["html"], seen["scripts"], seen["autoload"]):
        assert cookie.strip('"') not in text
    assert seen["autoload_status"] == 403 and seen["cookie"] == ""  # the next_url cookie is HttpOnly too
    # The header's Sign out (on every page) ends the session: the workbench asks for a password,
    # and another tab still open on the workbench closes itself.
    other = page.context.new_page()
    other.goto(workbench.url)
    other.locator("select").first.wait_for()
    page.get_by_text("Sign out", exact=True).wait_for()
    screenshot(page, "sessions-signed-in")
    with page.expect_navigation():
        page.get_by_text("Sign out", exact=True).click()
    assert page.url.endswith("/logout")
    other.get_by_text("Your session ended").wait_for()
    assert other.locator("select").count() == 0
    page.goto(workbench.url)
    assert "/login" in page.url and page.locator("input[name=password]").is_visible()
    assert page.errors == []


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A small ledger's store and a password file, for servers run in this process."""
    from gate.keys.config import SigningSetup
    from gate.ledger import Ledger
    from tests.workbench.app.conftest import build_small_ledger
    from workbench.app.passwords import hash_password
    from workbench.app.store import WorkbenchStore

    home = tmp_path_factory.mktemp("sessions-limits")
    build_small_ledger(home)
    store = WorkbenchStore(Ledger(f"sqlite:///{home / 'gate.db'}"),
                           SigningSetup.load(home / "signing-keys.json", None, "hmac"), home / "dataset")
    store.refresh_dataset()
    users, grants = home / "users.json", home / "grants.json"
    users.write_text(json.dumps({"ana": hash_password(PASSWORD)}))
    grants.write_text(json.dumps({"users": {"ana": {"acme": ["viewer"]}}}))
    yield store, users, grants
    store.ledger.dispose()


def _open_signed_in(page, url: str) -> None:
    page.goto(f"{url}/workbench")
    submit(page, "ana", PASSWORD)
    page.locator("select").first.select_option("acme")
    page.get_by_text("roles here: viewer").wait_for()
    page.locator("text=decisions considered >> visible=true").first.wait_for()  # the Overview drawn: settled


OTHER_TAB = {"Overview": "Decisions", "Decisions": "Overview"}  # the tab on show -> another one
_SHOWN = "name => new URLSearchParams(location.search).get('page') === name"  # the server's answer to a switch


@pytest.mark.parametrize("limit", ["idle", "lifetime"])
def test_an_open_page_past_its_limit_closes_on_its_next_action(page, store, limit):
    """Issue 63, defect 3: before, a page idle past the limit still switched tabs and read
    decisions, and one kept busy past the session's lifetime still acted, although an HTTP request
    with the same cookie got the sign-in page. Now every message of the page asks the session
    book first: past either limit the page shows that the session ended, and nothing acts.

    Time is the book's clock, moved by the test (idle limit 10 s, lifetime 30 s): a loaded host
    opening the page slowly no longer ends the session before the test begins. The next action is
    a switch to a tab *not* on show: a click on the tab on show sends the server nothing (Bokeh's
    tabs send only a change), so nothing asks the book. This test once clicked "Decisions"
    whatever was on show, and when its busy loop had made an odd number of switches (how many
    depended on how fast the host was) that click sent nothing and the page stayed open: the
    "busy page past its lifetime stays open" of issue 63, which was never the server's."""
    from tests.workbench.app.test_sessions import SessionClock, running
    from workbench.app.access import access_for

    workbench_store, users, grants = store
    clock = SessionClock()
    with running(workbench_store, access_for("127.0.0.1", users, grants), idle_seconds=10.0,
                 lifetime_seconds=30.0, clock=clock) as port:
        url = f"http://127.0.0.1:{port}"
        _open_signed_in(page, url)  # the session opened at the clock's start: it has not moved
        opened, shown = clock.now, "Overview"
        if limit == "idle":
            clock.advance(11.0)
        else:  # busy: a tab switch every 4 s (inside the idle limit), each one acting, until past the lifetime
            while clock.now - opened < 30.0:
                shown = OTHER_TAB[shown]
                page.locator(".bk-tab", has_text=shown).click()
                page.wait_for_function(_SHOWN, arg=shown.lower())  # the server acted on it
                assert page.get_by_text("Your session ended").count() == 0
                clock.advance(4.0)
        assert page.get_by_text("Your session ended").count() == 0  # nothing moved the page yet
        try:  # the next message (this click, or one the page sent first) closes the page
            page.locator(".bk-tab", has_text=OTHER_TAB[shown]).click(timeout=5_000)
        except PlaywrightTimeout:
            assert page.get_by_text("Your session ended").count() == 1
        page.get_by_text("Your session ended").wait_for(timeout=15_000)
        assert page.locator("select").count() == 0
        assert page.evaluate("new URLSearchParams(location.search).get('page')") != OTHER_TAB[shown].lower()
        screenshot(page, f"sessions-ended-{limit}")
        with httpx.Client(timeout=60, cookies={c["name"]: c["value"] for c in page.context.cookies()}) as client:
            assert client.get(f"{url}/workbench").status_code == 302
