"""The workbench's security headers over HTTP, on a real `gate workbench` (issue 18).

Every response (the app page, static files, an unknown path, the sign-in page) carries the
Content-Security-Policy, nosniff, framing and referrer headers; the app page's inline scripts all
carry that response's nonce, and each response has a fresh one. No browser needed: the browser
tests (`tests/browser/test_workbench_xss.py`) show the policy at work.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import pytest

from tests.browser.conftest import Workbench
from workbench.app.headers import STATIC_HEADERS, content_security_policy
from workbench.app.passwords import hash_password

pytestmark = pytest.mark.slow


def fetch(url: str):
    """(status, headers, body) of a GET, redirects not followed."""
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    try:
        response = urllib.request.build_opener(NoRedirect).open(url, timeout=60)
    except urllib.error.HTTPError as error:
        response = error
    return response.status, response.headers, response.read()


def nonce_of(policy: str) -> str:
    found = re.fullmatch(re.escape(content_security_policy("NONCE")).replace("NONCE", "([A-Za-z0-9_-]{24})"),
                         policy)
    assert found, policy
    return found.group(1)


def assert_secured(headers, referrer_policy: str = STATIC_HEADERS["Referrer-Policy"]) -> str:
    for name, value in (STATIC_HEADERS | {"Referrer-Policy": referrer_policy}).items():
        assert headers[name] == value
    return nonce_of(headers["Content-Security-Policy"])


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from tests.workbench.app.conftest import build_small_ledger

    home = tmp_path_factory.mktemp("headers-home")
    build_small_ledger(home)
    (home / "users.json").write_text(json.dumps({"ops": hash_password("correct horse")}))
    (home / "grants.json").write_text(json.dumps({"ops": ["*"]}))
    open_server = Workbench(home)
    signed = Workbench(home, ["--basic-auth", str(home / "users.json"), "--grants", str(home / "grants.json")])
    yield open_server, signed
    open_server.stop()
    signed.stop()


def test_the_policy_is_strict():
    policy = content_security_policy("abc")
    directives = dict(d.split(" ", 1) for d in policy.split("; "))
    assert directives["default-src"] == "'none'"
    assert directives["script-src"] == "'self' 'nonce-abc'"  # no 'unsafe-inline', no 'unsafe-eval'
    assert directives["object-src"] == directives["frame-ancestors"] == directives["base-uri"] == "'none'"
    assert "'unsafe-eval'" not in policy and "*" not in policy and "http" not in policy


def test_every_response_carries_the_headers(served):
    server, _ = served
    base = f"http://127.0.0.1:{server.port}"
    for path, status in (("/workbench", 200), ("/static/js/bokeh.min.js", 200), ("/no-such-page", 404)):
        got, headers, _ = fetch(base + path)
        assert got == status, path
        assert_secured(headers)


def test_the_page_scripts_carry_a_fresh_nonce_and_the_length_is_exact(served):
    server, _ = served
    _, headers, body = fetch(server.url)
    nonce = assert_secured(headers)
    page = body.decode()
    assert int(headers["Content-Length"]) == len(body)
    assert page.count("<script") == page.count(f'<script nonce="{nonce}"') > 0
    _, again, _ = fetch(server.url)
    assert assert_secured(again) != nonce


def test_the_sign_in_page_and_its_redirect_carry_the_headers(served):
    _, signed = served
    status, headers, _ = fetch(signed.url)
    assert status == 302 and "/login" in headers["Location"]
    assert_secured(headers)
    status, headers, body = fetch(f"http://127.0.0.1:{signed.port}/login")
    assert status == 200 and b"password" in body
    # The sign-in page alone sends `same-origin`, so that its form's Origin is sent (issue 63).
    nonce = assert_secured(headers, "same-origin")
    assert body.count(b"<script") == body.count(f'<script nonce="{nonce}"'.encode())
