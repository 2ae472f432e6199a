"""Signing in to the workbench in a real browser (issue 18, item 5): the password file written by
`gate workbench-passwd`, a wrong password and a throttled one shown on the login page, the
right one opening the workbench with only the granted scope."""

from __future__ import annotations

import json
import subprocess

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
