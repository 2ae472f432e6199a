"""Workbench sign-in (issue 18, item 5) over HTTP against the real server (`make_server`), run
in this process so the test can count the scrypt runs and the comparisons each sign-in costs:
a throttled attempt runs no KDF, an unknown user costs the same one run as a known one, and
the derived key is compared with `hmac.compare_digest`."""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import urllib.parse

import pytest

from tests.server.support import free_port
from tests.workbench.signin_support import post_sign_in
from workbench.app import passwords
from workbench.app.access import access_for
from workbench.app.passwords import ScryptHash, hash_password

PASSWORD = "correct horse battery staple"


class Counter:
    """Counts calls of a function it wraps."""

    def __init__(self, wrapped):
        self.wrapped, self.calls = wrapped, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.wrapped(*args, **kwargs)


@pytest.fixture
def spies(monkeypatch):
    derive = Counter(ScryptHash.derive)
    compare = Counter(passwords.hmac.compare_digest)
    monkeypatch.setattr(ScryptHash, "derive", lambda self, password: derive(self, password))
    monkeypatch.setattr(passwords.hmac, "compare_digest", compare)
    return derive, compare


@pytest.fixture
def server(workbench_home, tmp_path):
    from workbench.app.server import make_server

    store, _, _ = workbench_home
    users, grants = tmp_path / "users.json", tmp_path / "grants.json"
    users.write_text(json.dumps({"ana": hash_password(PASSWORD)}))
    grants.write_text(json.dumps({"ana": ["acme"]}))
    access = access_for("127.0.0.1", users, grants)
    port, started, holder = free_port(), threading.Event(), {}

    def run() -> None:
        asyncio.set_event_loop(asyncio.new_event_loop())
        holder["server"] = server = make_server(store, access, "127.0.0.1", port)
        server.start()
        started.set()
        server.io_loop.start()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(60)
    yield port
    loop = holder["server"].io_loop
    loop.add_callback(holder["server"].stop)
    loop.add_callback(loop.stop)
    thread.join(30)


def sign_in(port: int, user: str, password: str) -> http.client.HTTPResponse:
    return post_sign_in(port, user, password)


def test_every_check_is_one_scrypt_run_compared_in_constant_time(server, spies):
    derive, compare = spies
    assert sign_in(server, "ana", PASSWORD).status == 302
    assert (derive.calls, compare.calls) == (1, 1)
    assert sign_in(server, "ana", "wrong").status == 401
    assert (derive.calls, compare.calls) == (2, 2)
    # SECURITY: an unknown user is checked against a dummy hash: the same work, the same answer.
    assert sign_in(server, "nobody", PASSWORD).status == 401
    assert (derive.calls, compare.calls) == (3, 3)


def test_a_throttled_attempt_runs_no_kdf(server, spies):
    derive, _ = spies
    for attempt in range(6):  # 5 free failures; the 6th blocks ana
        assert sign_in(server, "ana", f"guess-{attempt}").status == 401
    assert derive.calls == 6
    for _ in range(50):
        answer = sign_in(server, "ana", PASSWORD)
        assert answer.status == 429 and answer.getheader("Retry-After")
    assert derive.calls == 6  # 50 throttled attempts, not one scrypt run


def test_parallel_guesses_cannot_outrun_the_throttle(server, spies):
    from concurrent.futures import ThreadPoolExecutor

    derive, _ = spies
    with ThreadPoolExecutor(max_workers=12) as pool:
        statuses = list(pool.map(lambda n: sign_in(server, "ana", f"guess-{n}").status, range(40)))
    assert set(statuses) == {401, 429}
    # 5 free failures, the 6th blocks; at most 2 checks of one user run at once, so at most one
    # more was already running when the block began.
    assert derive.calls == statuses.count(401) <= 7


@pytest.mark.parametrize("peer, key", [
    ("203.0.113.7", "203.0.113.7"), ("::ffff:203.0.113.7", "203.0.113.7"),
    ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"), ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),
])
def test_an_ipv6_client_is_throttled_by_its_64_network(peer, key):
    from workbench.app.signin import client_key

    assert client_key(peer) == key  # one host holds a /64: a fresh address per guess buys nothing


def test_the_login_page_never_shows_a_message_from_its_link(server):
    """`/login?error=…` put any text a link chose on Panel's sign-in page (a phishing line under
    our title); the page shows only the messages the sign-in writes."""
    lure = "Your session expired. Call 555-0100 with your password"
    connection = http.client.HTTPConnection("127.0.0.1", server, timeout=60)
    connection.request("GET", "/login?" + urllib.parse.urlencode({"error": lure, "next": "/workbench"}))
    response = connection.getresponse()
    body = response.read().decode()
    connection.close()
    assert response.status == 200 and 'name="password"' in body
    assert "555-0100" not in body and "session expired" not in body
    assert "next_url=" in (response.getheader("Set-Cookie") or "")


def _sign_in_from(port: int, address: str, user: str, password: str) -> int:
    """A sign-in's status, sent from the loopback `address` (the throttle's client address)."""
    return post_sign_in(port, user, password, address, timeout=120).status


@pytest.mark.slow
def test_a_flood_from_many_addresses_never_refuses_the_owners_sign_in(server, spies):
    """Issue 52, item 11: 60 fresh loopback addresses sending wrong passwords held the global cap
    on running checks, and 2 of 8 right-password sign-ins of the owner from fresh addresses got
    429. The cap now holds back only addresses that have failed; guesses stay bounded."""
    from concurrent.futures import ThreadPoolExecutor

    derive, _ = spies
    stop, flood_statuses = threading.Event(), []

    def flood(n: int) -> None:
        failures = 0
        while not stop.is_set() and failures < 3:  # three wrong passwords from each address
            status = _sign_in_from(server, f"127.0.2.{n}", "ana", f"guess-{n}")
            flood_statuses.append(status)
            failures += status == 401
            if status == 429:
                stop.wait(0.2)  # held back: try again soon (the flood keeps the cap full)

    with ThreadPoolExecutor(max_workers=60) as pool:
        for n in range(1, 61):
            pool.submit(flood, n)
        try:
            while len(flood_statuses) < 60:  # the flood is running: every address has failed once
                threading.Event().wait(0.05)
            owner = [_sign_in_from(server, f"127.0.3.{n}", "ana", PASSWORD) for n in range(1, 9)]
        finally:
            stop.set()
    assert owner == [302] * 8
    assert set(flood_statuses) <= {401, 429} and 429 in flood_statuses
    # Every guess that ran is one scrypt run; a held-back one runs none.
    assert flood_statuses.count(401) <= 60 * 3 and derive.calls == flood_statuses.count(401) + 8
