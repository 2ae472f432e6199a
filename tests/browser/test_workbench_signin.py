"""Signing in to the workbench in a real browser (issue 18, item 5): the password file written by
`gate workbench-passwd`, a wrong password and a throttled one shown on the login page, the
right one opening the workbench with only the granted scope."""

from __future__ import annotations

import html
import http.server
import json
import subprocess
import threading
from contextlib import contextmanager

import pytest

from tests.browser.conftest import GATE, Workbench, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.slow]
PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="module")
def workbench(tmp_path_factory):
    from tests.workbench.app.conftest import build_small_ledger

    home = tmp_path_factory.mktemp("signin-home")
    build_small_ledger(home)
    users, grants = home / "users.json", home / "grants.json"
    for user in ("ana", "bo"):
        subprocess.run([GATE, "workbench-passwd", str(users), user], input=PASSWORD + "\n", text=True,
                       check=True, capture_output=True, timeout=120)
    grants.write_text(json.dumps({"ana": ["acme"], "bo": ["globex"]}))
    server = Workbench(home, ["--refresh", "--basic-auth", str(users), "--grants", str(grants)])
    yield server
    server.stop()


def submit(page, user: str, password: str):
    page.locator("input[name=username]").fill(user)
    page.locator("input[name=password]").fill(password)
    with page.expect_navigation() as navigation:
        page.locator("button[type=submit]").click()
    return navigation.value


def test_sign_in_on_the_login_page(page, workbench):
    page.goto(workbench.url)
    assert "/login" in page.url
    answer = submit(page, "ana", "not the password")
    assert answer.status == 401
    assert page.locator(".errormessage").inner_text() == "Invalid username or password."
    screenshot(page, "signin-wrong-password")
    answer = submit(page, "ana", PASSWORD)
    page.locator("select").first.wait_for()
    assert page.url.rstrip("/").endswith("/workbench")
    options = page.locator("select").first.locator("option").all_inner_texts()
    assert "acme" in options and "globex" not in options  # only ana's grant
    assert page.errors == []


def test_a_throttled_user_sees_when_to_try_again(page, workbench):
    page.goto(workbench.url)
    for attempt in range(6):  # 5 free failures; the 6th blocks bo
        assert submit(page, "bo", f"guess-{attempt}").status == 401
    answer = submit(page, "bo", PASSWORD)  # even the right password waits
    assert answer.status == 429 and answer.header_value("retry-after")
    message = page.locator(".errormessage").inner_text()
    assert message.startswith("Too many failed sign-ins") and "Try again in" in message
    screenshot(page, "signin-throttled")


@contextmanager
def attacker_site(target: str, token: str = ""):
    """A page on another site (http://localhost:PORT, not the workbench's 127.0.0.1) that
    auto-submits the workbench's sign-in form with the attacker's credentials: its URL."""
    fields = {"username": "bo", "password": PASSWORD, "signin_token": token}
    inputs = "".join(f'<input type="hidden" name="{name}" value="{html.escape(value)}">'
                     for name, value in fields.items())
    body = (f'<!doctype html><form id="f" method="post" action="{html.escape(target)}">{inputs}</form>'
            '<script>document.getElementById("f").submit()</script>').encode()

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # the name http.server calls
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://localhost:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def signed_in_as(page, workbench) -> bool:
    """Whether the browser holds a session: the workbench opens instead of asking for a password."""
    answer = page.goto(workbench.url)
    return "/login" not in page.url and answer.status == 200


def test_a_cross_site_form_post_signs_no_one_in(page, workbench):
    """Issue 63, defect 2 (login CSRF): a page on another site auto-submitted the sign-in form
    with the attacker's credentials, and the victim's browser was then signed in as the attacker.
    Now the post is refused (403, the login page) whether or not the victim's browser holds a
    sign-in token, and the browser holds no session; the workbench's own form still works."""
    login, back = f"http://127.0.0.1:{workbench.port}/login", f"http://127.0.0.1:{workbench.port}/"
    for visited_first in (False, True):
        if visited_first:  # the victim opened the login page before: a token cookie is set
            page.goto(login)
            assert any(c["name"] == "signin_token" and c["sameSite"] == "Strict" for c in page.context.cookies())
        with (attacker_site(login, token="guessed") as lure,
              page.expect_navigation(url=lambda url: url.startswith(back)) as navigation):
            page.goto(lure)
        assert navigation.value.status == 403
        assert "came from another site" in page.locator(".errormessage").inner_text()
        assert not any(c["name"] == "user" for c in page.context.cookies())
        assert not signed_in_as(page, workbench)
    screenshot(page, "signin-cross-site-refused")
    # The workbench's own form, from the page the refusal showed, signs in.
    assert submit(page, "ana", PASSWORD).status == 302 or "/workbench" in page.url
    page.locator("select").first.wait_for()
    assert page.errors == []
