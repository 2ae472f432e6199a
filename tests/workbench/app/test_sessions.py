"""Workbench sessions an attacker cannot borrow (issue 57), over real HTTP against the real server
(`make_server`, in this process) signing people in against a password file of scrypt hashes:

- a sign-in returns only to a path on this workbench, whatever `next` (or a forged `next_url`
  cookie) says (1);
- the page and its Bokeh session token carry no cookie; `autoload.js` is not served (2);
- the session lives on the server: a cookie kept from before logout, a grants-file change, an
  administrator's revocation and an idle timeout each end it at once, websocket included (3);
- every cookie carries `SameSite=Lax`, and `Secure` when the workbench serves a non-loopback
  address (5).

The provider's logout and the log of a failed callback (4, 7) are in test_oidc.py; the browser's
view (Chromium following a redirect, a page script) in tests/browser/test_workbench_sessions.py."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from contextlib import contextmanager

import httpx
import pytest

from tests.own_loop import run_on_own_loop
from tests.server.support import free_port
from tests.workbench.signin_support import TOKEN, form_token
from workbench.app.access import access_for
from workbench.app.passwords import hash_password

PASSWORD = "correct horse battery staple"
# Every `next` a browser reads as another host (or that decodes to one), and a forged cookie.
FOREIGN = ["///evil.example/phish", "////evil.example/", "//evil.example/", "/\\evil.example/", "\\/evil.example/",
           "/%2F/evil.example/", "/%5Cevil.example/", "%2F%2Fevil.example/", "/%252F/evil.example/",
           "/\t/evil.example/", "/\n/evil.example/", " //evil.example/", "https://evil.example/",
           "http:evil.example", "javascript:alert(1)", "evil.example/phish"]


@contextmanager
def running(store, access, address: str = "127.0.0.1", **options):
    """The real workbench server, started in a thread of this process; its port."""
    port = free_port()
    with served(store, access, address, port, **options):
        yield port


@contextmanager
def served(store, access, address: str, port: int, **options):
    """`make_server` on `port`, started in a thread of this process and stopped after; the server."""
    from workbench.app.server import make_server

    started, holder = threading.Event(), {}

    def run() -> None:
        asyncio.set_event_loop(asyncio.new_event_loop())
        holder["server"] = server = make_server(store, access, address, port, **options)
        server.start()
        started.set()
        server.io_loop.start()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(60)
    try:
        yield holder["server"]
    finally:
        loop = holder["server"].io_loop
        loop.add_callback(holder["server"].stop)
        loop.add_callback(loop.stop)
        thread.join(30)


class SessionClock:
    """The session book's clock, moved by the test (`make_server(clock=...)`): the idle limit and
    the lifetime pass when the test says, however slowly a loaded host opens a page. `reads`
    counts the book's looks at it: every request and every message of a page asks it."""

    def __init__(self) -> None:
        self.now, self.reads = 1_000.0, 0

    def __call__(self) -> float:
        self.reads += 1
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def people(tmp_path):
    users, grants = tmp_path / "users.json", tmp_path / "grants.json"
    users.write_text(json.dumps({"ana": hash_password(PASSWORD), "bo": hash_password(PASSWORD)}))
    grants.write_text(json.dumps({"users": {"ana": {"acme": ["viewer"]}, "bo": {"acme": ["viewer"]}}}))
    return users, grants


@pytest.fixture
def server(workbench_home, people):
    store = workbench_home[0]
    users, grants = people
    with running(store, access_for("127.0.0.1", users, grants)) as port:
        yield f"http://127.0.0.1:{port}", grants


def sign_in(client: httpx.Client, url: str, user: str = "ana", next_url: str | None = None) -> httpx.Response:
    """The login page (with `next`), then the form: the answer to the form."""
    page = client.get(f"{url}/login", params={} if next_url is None else {"next": next_url})
    assert page.status_code == 200
    return client.post(f"{url}/login", data={"username": user, "password": PASSWORD, TOKEN: form_token(page.text)},
                       headers={"Origin": url})


def user_cookie(response: httpx.Response) -> str:
    values = [v for v in response.headers.get_list("set-cookie") if v.startswith("user=")]
    assert len(values) == 1, response.headers.get_list("set-cookie")
    return values[0].split(";", 1)[0].split("=", 1)[1]


def test_a_sign_in_returns_only_to_a_path_on_the_workbench(server):
    url, _ = server
    with httpx.Client(timeout=60) as client:
        for foreign in FOREIGN:
            answer = sign_in(client, url, next_url=foreign)
            assert answer.status_code == 302 and answer.headers["location"] == "/", foreign
        # The `next_url` cookie is whatever the browser sends back: checked again before the redirect.
        page = client.get(f"{url}/login", params={"next": "/workbench"})
        client.cookies.set("next_url", "///evil.example/phish")
        answer = client.post(f"{url}/login", data={"username": "ana", "password": PASSWORD,
                                                   TOKEN: form_token(page.text)})
        assert answer.status_code == 302 and answer.headers["location"] == "/"
    for kept in ("/workbench?scope=acme&page=releases", "/workbench?scope=acme&hold=%3Cimg%20src%3Dx%3E"):
        with httpx.Client(timeout=60) as client:  # a path on the workbench is kept, query and all
            assert sign_in(client, url, next_url=kept).headers["location"] == kept


def _token_payload(page: str) -> dict:
    """The payload of the Bokeh session token the page embeds (what any script on it reads)."""
    from bokeh.util.token import get_token_payload

    return get_token_payload(re.search(r'"token":\s*"([^"]+)"', page).group(1))


def test_no_page_token_or_autoload_answer_holds_the_session_cookie(server):
    url, _ = server
    with httpx.Client(timeout=60) as client:
        cookie = user_cookie(sign_in(client, url))
        page = client.get(f"{url}/workbench")
        assert page.status_code == 200
        payload = _token_payload(page.text)
        assert payload["cookies"] == {} and "Cookie" not in payload["headers"]
        assert cookie.strip('"') not in page.text and cookie.strip('"') not in json.dumps(payload)
        # SECURITY: autoload.js (a session token for a page on another origin) is not served.
        autoload = client.get(f"{url}/workbench/autoload.js", params={"bokeh-autoload-element": "x"},
                              headers={"Origin": "http://127.0.0.1:1"})
        assert autoload.status_code == 403
        assert cookie.strip('"') not in autoload.text and "token" not in autoload.text


async def _websocket(url: str, cookie: str, token: str) -> int:
    """The status of a websocket handshake to the workbench with `cookie` and a page's session
    token (101 when opened)."""
    from tornado.httpclient import HTTPClientError, HTTPRequest
    from tornado.websocket import websocket_connect

    ws_url = url.replace("http://", "ws://") + "/workbench/ws"
    request = HTTPRequest(ws_url, headers={"Cookie": f"user={cookie}", "Origin": url})
    try:
        connection = await websocket_connect(request, subprotocols=["bokeh", token])
    except HTTPClientError as refused:
        return refused.code
    connection.close()
    return 101


def test_logout_ends_the_session_on_the_server(server):
    url, _ = server
    with httpx.Client(timeout=60) as browser:
        kept = user_cookie(sign_in(browser, url))  # an attacker's copy, taken before logout
        page = browser.get(f"{url}/workbench")
        assert page.status_code == 200
        token = re.search(r'"token":\s*"([^"]+)"', page.text).group(1)
        assert run_on_own_loop(_websocket(url, kept, token)) == 101
        logout = browser.get(f"{url}/logout")
        assert logout.status_code == 200 and "user" not in browser.cookies
    with httpx.Client(timeout=60, cookies={"user": kept}) as thief:
        opened = thief.get(f"{url}/workbench")
        assert opened.status_code == 302 and "login?next=" in opened.headers["location"]
    assert run_on_own_loop(_websocket(url, kept, token)) == 403


def _opens(url: str, cookie: str) -> bool:
    with httpx.Client(timeout=60, cookies={"user": cookie}) as client:
        return client.get(f"{url}/workbench").status_code == 200


def test_a_grants_change_or_a_revocation_ends_sessions_at_once(server):
    url, grants = server
    with httpx.Client(timeout=60) as one, httpx.Client(timeout=60) as two, httpx.Client(timeout=60) as three:
        ana, bo = user_cookie(sign_in(one, url, "ana")), user_cookie(sign_in(two, url, "bo"))
        assert _opens(url, ana) and _opens(url, bo)
        # ana's role changes: her session ends, bo's (unchanged) does not.
        grants.write_text(json.dumps({"users": {"ana": {"acme": ["author"]}, "bo": {"acme": ["viewer"]}}}))
        assert not _opens(url, ana) and _opens(url, bo)
        # An administrator revokes bo's sessions: they end; a sign-in after the revocation works.
        time.sleep(0.01)
        now = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() + 1)) + "Z"
        grants.write_text(json.dumps({"users": {"ana": {"acme": ["author"]}, "bo": {"acme": ["viewer"]}},
                                      "revoked": {"bo": now}}))
        assert not _opens(url, bo)
        time.sleep(1.1)
        assert _opens(url, user_cookie(sign_in(three, url, "bo")))
        # A grants file that becomes unusable fails closed: every session ends.
        fresh = user_cookie(sign_in(one, url, "ana"))
        assert _opens(url, fresh)
        grants.write_text("{not json")
        assert not _opens(url, fresh)


def test_a_session_idle_too_long_ends(workbench_home, people):
    users, grants = people
    # Idle 4 s, a request every 1 s: a page that takes up to 3 s to open on a loaded host still
    # keeps the session (a fresh-clone run, with 1.5 s and 0.6 s, met a page that took longer).
    with running(workbench_home[0], access_for("127.0.0.1", users, grants), idle_seconds=4.0) as port:
        url = f"http://127.0.0.1:{port}"
        with httpx.Client(timeout=60) as client:
            cookie = user_cookie(sign_in(client, url))
            for _ in range(3):  # each request keeps it alive
                time.sleep(1.0)
                assert _opens(url, cookie)
            time.sleep(5.0)
            assert not _opens(url, cookie)


def test_an_is_guest_cookie_names_nobody(server):
    """Panel answers "guest" for any request carrying `is_guest`; the workbench asks its sessions."""
    url, _ = server
    with httpx.Client(timeout=60, cookies={"is_guest": "1"}) as client:
        assert client.get(f"{url}/workbench").status_code == 302


def test_cookies_carry_samesite_and_secure_off_loopback(workbench_home, people, server):
    url, _ = server
    with httpx.Client(timeout=60) as client:
        client.get(f"{url}/login", params={"next": "/workbench"})
        answer = sign_in(client, url)
        set_cookies = answer.headers.get_list("set-cookie") + client.get(f"{url}/logout").headers.get_list("set-cookie")
    assert set_cookies and all(_samesite(value) in value for value in set_cookies), set_cookies
    assert not any("Secure" in value for value in set_cookies)  # loopback: plain http works
    users, grants = people
    with (running(workbench_home[0], access_for("0.0.0.0", users, grants), address="0.0.0.0") as port,
          httpx.Client(timeout=60) as client):
        set_cookies = _sign_in_over_http(client, f"http://127.0.0.1:{port}")
    assert any(value.startswith("user=") for value in set_cookies)
    assert all(_samesite(value) in value and "Secure" in value for value in set_cookies), set_cookies


def _samesite(set_cookie: str) -> str:
    """The sign-in form's token is `SameSite=Strict` (issue 63); every other cookie `Lax`."""
    return "SameSite=Strict" if set_cookie.startswith(f"{TOKEN}=") else "SameSite=Lax"


def _sign_in_over_http(client: httpx.Client, url: str, headers: dict[str, str] | None = None) -> list[str]:
    """A sign-in to a workbench whose cookies are `Secure`, over plain http (a client keeping the
    token cookie as a browser behind TLS would): every `Set-Cookie` of both answers."""
    page = client.get(f"{url}/login", params={"next": "/workbench"}, headers=headers)
    token = form_token(page.text)
    answer = client.post(f"{url}/login", data={"username": "ana", "password": PASSWORD, TOKEN: token},
                         headers={"Cookie": f"{TOKEN}={token}", **(headers or {})})
    assert answer.status_code == 302, answer.text
    return page.headers.get_list("set-cookie") + answer.headers.get_list("set-cookie")


# Issue 63, defect 1: a page (Bokeh session) belongs to the sign-in session that opened it.


def _page_token(client: httpx.Client, url: str) -> str:
    page = client.get(f"{url}/workbench")
    assert page.status_code == 200
    return re.search(r'"token":\s*"([^"]+)"', page.text).group(1)


def test_a_link_cannot_choose_the_pages_session(server):
    """Before, `/workbench?bokeh-session-id=X` (kept through the sign-in redirect) opened the page
    under the session id its link chose, one another person could then attach to."""
    from bokeh.util.token import generate_session_id

    url, _ = server
    with httpx.Client(timeout=60) as ana:
        sign_in(ana, url)
        chosen = generate_session_id(signed=False)
        for params, headers in (({"bokeh-session-id": chosen}, {}), ({"bokeh-token": _page_token(ana, url)}, {}),
                                ({}, {"Bokeh-Session-Id": chosen})):
            refused = ana.get(f"{url}/workbench", params=params, headers=headers)
            assert refused.status_code == 403 and '"token"' not in refused.text, params or headers
        # The link survives the sign-in redirect: still refused after it.
        with httpx.Client(timeout=60) as bo:
            landed = sign_in(bo, url, "bo", next_url=f"/workbench?bokeh-session-id={chosen}")
            assert bo.get(url + landed.headers["location"]).status_code == 403
        # A page the server makes has a signed session id (Bokeh's `sign_sessions`).
        from bokeh.util.token import get_session_id

        assert get_session_id(_page_token(ana, url)).count(".") == 1


def _forged(token: str, signature: str | None) -> str:
    """`token`'s payload (its session id kept) unsigned, or with another signature."""
    body = token.split(".", 1)[0]
    return body if signature is None else f"{body}.{signature}"


def test_a_websocket_carrying_another_sign_ins_token_is_refused(server):
    """Before, the handshake asked only that the cookie name some live sign-in, then attached to
    whatever session the token named: ana's cookie with bo's page token acted in bo's page."""
    url, _ = server
    with httpx.Client(timeout=60) as ana, httpx.Client(timeout=60) as bo:
        ana_cookie, bo_cookie = user_cookie(sign_in(ana, url, "ana")), user_cookie(sign_in(bo, url, "bo"))
        ana_token, bo_token = _page_token(ana, url), _page_token(bo, url)
        assert run_on_own_loop(_websocket(url, ana_cookie, ana_token)) == 101
        assert run_on_own_loop(_websocket(url, bo_cookie, bo_token)) == 101
        assert run_on_own_loop(_websocket(url, ana_cookie, bo_token)) == 403  # bo's page, ana's browser
        assert run_on_own_loop(_websocket(url, bo_cookie, ana_token)) == 403
        # A hand-made token for bo's page: unsigned, or signed with anything but the server's key.
        assert run_on_own_loop(_websocket(url, ana_cookie, _forged(bo_token, None))) == 403
        assert run_on_own_loop(_websocket(url, ana_cookie, _forged(bo_token, "A" * 43))) == 403
        assert run_on_own_loop(_websocket(url, bo_cookie, "not a token")) == 403
        # bo signs out: his page's token opens nothing for anyone.
        bo.get(f"{url}/logout")
        assert run_on_own_loop(_websocket(url, bo_cookie, bo_token)) == 403


def test_signing_in_again_without_signing_out_ends_the_earlier_session(server):
    """Issue 63, defect 4: before, the earlier session stayed live beside the new one."""
    url, _ = server
    with httpx.Client(timeout=60) as browser:
        first = user_cookie(sign_in(browser, url, "ana"))
        assert _opens(url, first)
        second = user_cookie(sign_in(browser, url, "bo"))
        assert second != first and _opens(url, second)
        assert not _opens(url, first)


class _Page:
    """A page's websocket spoken by hand in Bokeh's protocol: its document pulled, a tab switch
    sent as a `PATCH-DOC`, and what the server answers read back."""

    def __init__(self, socket) -> None:
        from bokeh.client.websocket import WebSocketClientConnectionWrapper
        from bokeh.protocol import Protocol
        from bokeh.protocol.receiver import Receiver

        self.socket, self.connection = socket, WebSocketClientConnectionWrapper(socket)
        self.protocol = Protocol()
        self.receiver = Receiver(self.protocol)

    async def receive(self, seconds: float = 60):
        async def one():
            while True:
                fragment = await self.socket.read_message()
                assert fragment is not None, "the server closed the page's websocket"
                message = await self.receiver.consume(fragment)
                if message is not None:
                    return message
        return await asyncio.wait_for(one(), seconds)

    async def tabs(self):
        """The page's document, pulled and reported drawn (as BokehJS does: until then Panel
        writes the page no change): its tabs."""
        import panel  # noqa: F401  # the page's models, to read its document
        from bokeh.document import Document
        from bokeh.document.events import MessageSentEvent
        from bokeh.events import DocumentReady
        from bokeh.models import Tabs

        assert (await self.receive()).msgtype == "ACK"
        await self.protocol.create("PULL-DOC-REQ").send(self.connection)
        reply, self.document = await self.receive(), Document()
        reply.push_to_document(self.document)
        ready = self.protocol.create("PATCH-DOC", [MessageSentEvent(self.document, "bokeh_event", DocumentReady())])
        await ready.send(self.connection)
        while (await self.receive()).header.get("reqid") != ready.header["msgid"]:
            pass
        return next(model for model in self.document.models if isinstance(model, Tabs))

    async def switch(self, tabs, active: int) -> tuple[bool, bool]:
        """Show tab `active`: (whether the server handled the message, whether it drew
        "Your session ended"), once one of them is known."""
        from bokeh.document.events import ModelChangedEvent

        message = self.protocol.create("PATCH-DOC", [ModelChangedEvent(self.document, tabs, "active", active)])
        await message.send(self.connection)
        while True:
            answer = await self.receive()
            if answer.msgtype == "OK" and answer.header.get("reqid") == message.header["msgid"]:
                return True, False
            if "Your session ended" in json.dumps(answer.content):
                return False, True


async def _busy_past_its_lifetime(url: str, cookie: str, token: str, clock: SessionClock, step: float,
                                  lifetime: float) -> list[tuple[float, bool, bool]]:
    """A page switching tabs every `step` seconds of the book's clock until past `lifetime`: for
    each switch, the clock's age of the session, whether it acted and whether the page closed."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    request = HTTPRequest(url.replace("http://", "ws://") + "/workbench/ws",
                          headers={"Cookie": f"user={cookie}", "Origin": url})
    page = _Page(await websocket_connect(request, subprotocols=["bokeh", token]))
    tabs, opened, seen = await page.tabs(), clock.now, []
    try:
        while not seen or not seen[-1][2]:
            assert clock.now - opened < lifetime + 2 * step, seen  # the page closed soon after its lifetime
            seen.append((clock.now - opened, *await page.switch(tabs, len(seen) % 2 + 1)))
            clock.advance(step)
    finally:
        page.socket.close()
    return seen


def test_a_page_kept_busy_past_its_lifetime_acts_no_more(workbench_home, people):
    """Issue 63, defect 3, over a real websocket: a page kept busy (a tab switch every 4 s, idle
    limit 10 s) acts at every message while its session lives; the first message past the
    session's lifetime (30 s after the sign-in) is not read (no `OK`), the page draws "Your
    session ended", and the cookie opens nothing more. Time is the book's clock, moved here."""
    users, grants = people
    clock = SessionClock()
    with running(workbench_home[0], access_for("127.0.0.1", users, grants), idle_seconds=10.0,
                 lifetime_seconds=30.0, clock=clock) as port:
        url = f"http://127.0.0.1:{port}"
        with httpx.Client(timeout=60) as client:
            cookie = user_cookie(sign_in(client, url))
            page = client.get(f"{url}/workbench", params={"scope": "acme"})
            token = re.search(r'"token":\s*"([^"]+)"', page.text).group(1)
        seen = run_on_own_loop(_busy_past_its_lifetime(url, cookie, token, clock, step=4.0, lifetime=30.0))
        assert seen == [(age, True, False) for age in range(0, 30, 4)] + [(32.0, False, True)]
        assert not _opens(url, cookie)
