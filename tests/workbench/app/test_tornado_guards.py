"""Issue 63, defects 2 and 5, over real HTTP against the real server (`make_server`, in this
process, so a test can see which modules got imported and what was logged):

- the sign-in form refuses another site's post: a foreign `Origin` (scheme included), `null`, a
  foreign `Referer` without `Origin`, a missing or wrong token; nothing is signed in and no KDF runs;
- `/login?next=` with a character above U+00FF answers (it answered nothing);
- `/components/…` imports nothing and serves no module off the allow-list (404, not 500);
- an uncaught exception is logged without the request's query;
- the websocket refuses an `Origin` of the other scheme;
- `autoload.js` and its `OPTIONS` answer 403 with no CORS header;
- a trusted proxy's `X-Forwarded-Proto: https` makes cookies `Secure`; anyone else's is ignored.

The cross-site form in a real browser is tests/browser/test_workbench_signin.py."""

from __future__ import annotations

import http.client
import ipaddress
import logging
import re
import subprocess
import sys
import time
import urllib.parse
from contextlib import contextmanager

import httpx
import pytest

from tests.own_loop import run_on_own_loop
from tests.workbench.app.test_sessions import PASSWORD, people, running  # noqa: F401  # fixture
from tests.workbench.signin_support import TOKEN, form_token
from workbench.app.access import access_for
from workbench.app.passwords import ScryptHash

GATE = str(__import__("pathlib").Path(sys.executable).parent / "gate")


@pytest.fixture
def signed(workbench_home, people):  # noqa: F811  # the fixture imported above
    users, grants = people
    with running(workbench_home[0], access_for("127.0.0.1", users, grants)) as port:
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def open_loopback(workbench_home):
    """A loopback workbench without sign-in (the local operator)."""
    with running(workbench_home[0], access_for("127.0.0.1", None, None)) as port:
        yield f"http://127.0.0.1:{port}"


def _post(client: httpx.Client, url: str, token: str | None, headers: dict[str, str]) -> httpx.Response:
    data = {"username": "ana", "password": PASSWORD}
    if token is not None:
        data[TOKEN] = token
    return client.post(f"{url}/login", data=data, headers=headers)


def test_the_sign_in_form_refuses_another_sites_post(signed, monkeypatch):
    url = signed
    derive_calls = []
    original = ScryptHash.derive
    monkeypatch.setattr(ScryptHash, "derive", lambda self, password: derive_calls.append(1) or original(self, password))
    https_self = url.replace("http://", "https://")
    refused = [
        ({"Origin": "http://evil.example"}, "own"),
        ({"Origin": https_self}, "own"),  # the workbench's name under the other scheme
        ({"Origin": "null"}, "own"),  # a sandboxed frame, or a page with no-referrer
        ({"Origin": f"{url}.evil.example"}, "own"),
        ({"Referer": "http://evil.example/lure"}, "own"),  # no Origin: the Referer decides
        ({"Origin": url}, "none"),  # no token in the form
        ({"Origin": url}, "wrong"),  # a token that is not the cookie's
        ({"Origin": url}, "no-cookie"),  # the page's token, but no cookie (SameSite=Strict kept it home)
    ]
    for headers, token_kind in refused:
        with httpx.Client(timeout=60) as client:
            token = form_token(client.get(f"{url}/login").text)
            if token_kind == "no-cookie":
                client.cookies.clear()
            sent = {"own": token, "none": None, "wrong": "x" * 43, "no-cookie": token}[token_kind]
            answer = _post(client, url, sent, headers)
            assert answer.status_code == 403, (headers, token_kind)
            assert "came from another site" in answer.text and 'name="password"' in answer.text
            assert not any(v.startswith("user=") for v in answer.headers.get_list("set-cookie"))
            assert "user" not in client.cookies
    assert derive_calls == []  # refused before the throttle and the KDF
    for headers in ({"Origin": url}, {"Referer": f"{url}/login"}, {}):  # the workbench's own form
        with httpx.Client(timeout=60) as client:
            page = client.get(f"{url}/login")
            cookie = [v for v in page.headers.get_list("set-cookie") if v.startswith(f"{TOKEN}=")]
            assert len(cookie) == 1 and "SameSite=Strict" in cookie[0] and "HttpOnly" in cookie[0]
            assert page.headers["Referrer-Policy"] == "same-origin"  # so that the browser sends its Origin
            answer = _post(client, url, form_token(page.text), headers)
            assert answer.status_code == 302 and "user" in client.cookies, headers


def test_a_next_above_latin_1_gets_an_answer(signed):
    """`set_cookie` raised after the headers were written: curl got 0 bytes. The `next` is kept
    percent-encoded, still judged by `safe_next`, and still only a path on this workbench."""
    host, port = urllib.parse.urlsplit(signed).netloc.split(":")
    for raw, back in [("/%E2%88%95evil.example", "/%E2%88%95evil.example"),
                      ("/workbench?scope=%E6%97%A5%E6%9C%AC", "/workbench?scope=%E6%97%A5%E6%9C%AC"),
                      ("//%E2%88%95evil.example", "/")]:
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        connection.request("GET", f"/login?next={raw}")
        answer = connection.getresponse()
        page = answer.read().decode()
        assert answer.status == 200 and 'name="password"' in page, raw
        cookies = answer.headers.get_all("Set-Cookie") or []
        token = form_token(page)
        kept = [c.split(";", 1)[0] for c in cookies if c.startswith("next_url=")]
        body = urllib.parse.urlencode({"username": "ana", "password": PASSWORD, TOKEN: token})
        connection.request("POST", "/login", body, {
            "Content-Type": "application/x-www-form-urlencoded", "Origin": signed,
            "Cookie": "; ".join([f"{TOKEN}={token}", *kept])})
        answer = connection.getresponse()
        answer.read()
        connection.close()
        assert answer.status == 302 and answer.getheader("Location") == back, raw


def test_components_serve_no_module_off_the_allow_list(open_loopback):
    """Unauthenticated `/components/<module>/…` imported any installed module (`ftplib` here),
    and `../` was a 500."""
    assert "ftplib" not in sys.modules
    with httpx.Client(timeout=60) as client:
        for path in ["/components/ftplib/FTP/__css__/a", "/components/%2e%2e/%2e%2e/etc/passwd",
                     "/components/panel/Column/_stylesheets/x.css", "/components/../../etc/passwd",
                     "/components/panel.widgets/Tabulator/__css__/a.css"]:
            assert client.get(f"{open_loopback}{path}").status_code == 404, path
    assert "ftplib" not in sys.modules


@contextmanager
def _captured(name: str):
    """Every record of logger `name` (attached to it: a logging configuration another test made
    may have cut propagation or disabled it)."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger, keep = logging.getLogger(name), Keep(logging.DEBUG)
    saved = logger.disabled, logger.level
    logger.disabled, logger.level = False, logging.DEBUG
    logger.addHandler(keep)
    logging.getLogger().manager._clear_cache()
    try:
        yield records
    finally:
        logger.removeHandler(keep)
        logger.disabled, logger.level = saved


def test_an_uncaught_exception_is_logged_without_the_query(open_loopback, monkeypatch):
    from panel.io.server import DocHandler

    async def broken(self, *args, **kwargs):
        raise RuntimeError("a fault in the page")

    monkeypatch.setattr(DocHandler, "get", broken)
    secret = "CODE-4b1d7f0e"
    with _captured("tornado.application") as errors, _captured("tornado.access") as access:
        answer = httpx.get(f"{open_loopback}/workbench", params={"code": secret, "state": secret}, timeout=60)
        assert answer.status_code == 500
        for _ in range(100):  # the access line is written just after the answer is sent
            if access:
                break
            time.sleep(0.05)
    text = "\n".join(record.getMessage() for record in errors + access)
    assert "Uncaught exception GET /workbench (127.0.0.1)" in text and "500 GET /workbench" in text
    assert secret not in text and "code=" not in text


async def _socket(url: str, origin: str, headers: dict[str, str] | None = None) -> int:
    """The status of a websocket handshake with `Origin: origin` (101 when opened)."""
    from tornado.httpclient import HTTPClientError, HTTPRequest
    from tornado.websocket import websocket_connect

    async with httpx.AsyncClient(timeout=60) as client:
        page = (await client.get(f"{url}/workbench", headers=headers)).text
    token = re.search(r'"token":\s*"([^"]+)"', page).group(1)
    request = HTTPRequest(url.replace("http://", "ws://") + "/workbench/ws",
                          headers={"Origin": origin, **(headers or {})})
    try:
        connection = await websocket_connect(request, subprotocols=["bokeh", token])
    except HTTPClientError as refused:
        return refused.code
    connection.close()
    return 101


def test_the_websocket_checks_the_origins_scheme(open_loopback):
    url = open_loopback
    assert run_on_own_loop(_socket(url, url)) == 101
    assert run_on_own_loop(_socket(url, url.replace("http://", "https://"))) == 403  # Bokeh compared the host alone
    assert run_on_own_loop(_socket(url, "http://evil.example")) == 403
    # A client's own X-Forwarded-Proto counts for nothing: 127.0.0.1 is no trusted proxy here.
    assert run_on_own_loop(_socket(url, url.replace("http://", "https://"), {"X-Forwarded-Proto": "https"})) == 403


def test_autoload_and_its_preflight_answer_403_without_cors(open_loopback):
    foreign = {"Origin": "http://evil.example", "Cookie": "user=x"}
    with httpx.Client(timeout=60) as client:
        got = client.get(f"{open_loopback}/workbench/autoload.js", params={"bokeh-autoload-element": "x"},
                         headers=foreign)
        preflight = client.options(f"{open_loopback}/workbench/autoload.js",
                                   headers={**foreign, "Access-Control-Request-Method": "GET"})
    for answer in (got, preflight):
        assert answer.status_code == 403
        assert not [name for name in answer.headers if name.lower().startswith("access-control-")]
        assert "token" not in answer.text


def test_a_trusted_proxys_https_makes_cookies_secure(workbench_home, people):  # noqa: F811
    users, grants = people
    access = access_for("127.0.0.1", users, grants)
    https = {"X-Forwarded-Proto": "https"}
    proxies = (ipaddress.ip_network("127.0.0.0/8"),)
    with running(workbench_home[0], access, trusted_proxies=proxies) as port, httpx.Client(timeout=60) as client:
        url = f"http://127.0.0.1:{port}"
        page = client.get(f"{url}/login", headers=https)
        token = form_token(page.text)
        # The browser's origin is https (the proxy's); an http one is now the other scheme.
        assert _post(client, url, token, {**https, "Origin": url}).status_code == 403
        answer = client.post(f"{url}/login", headers={**https, "Origin": url.replace("http:", "https:"),
                                                       "Cookie": f"{TOKEN}={token}"},
                             data={"username": "ana", "password": PASSWORD, TOKEN: token})
        set_cookies = page.headers.get_list("set-cookie") + answer.headers.get_list("set-cookie")
        assert answer.status_code == 302 and any(v.startswith("user=") for v in set_cookies)
        assert all("Secure" in value for value in set_cookies), set_cookies
        assert "Secure" not in client.get(f"{url}/login").headers["set-cookie"]  # the proxy said http
        signed_in = {**https, "Cookie": f"user={client.cookies['user']}"}
        assert run_on_own_loop(_socket(url, url.replace("http:", "https:"), signed_in)) == 101
        assert run_on_own_loop(_socket(url, url, signed_in)) == 403  # the page is https: an http Origin is foreign
    # Without --trusted-proxy the same header is anyone's: ignored.
    with running(workbench_home[0], access) as port, httpx.Client(timeout=60) as client:
        page = client.get(f"http://127.0.0.1:{port}/login", headers=https)
        assert "Secure" not in page.headers["set-cookie"]


def test_a_trusted_proxy_that_is_no_address_is_refused(tmp_path):
    done = subprocess.run([GATE, "workbench", "--trusted-proxy", "10.0.0.300"], env={"GATE_HOME": str(tmp_path)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--trusted-proxy '10.0.0.300' is neither an IP address nor a network" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "gate.db").exists()
