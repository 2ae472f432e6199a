"""Workbench sign-in through OpenID Connect (issue 42, item 2) against a real provider on loopback
(`oidc-provider` on Node, tests/oidc_support.py): the authorization-code flow with PKCE through
the real server (`make_server`), and the relying party's checks of the ID token (`iss`, `aud`,
`exp`, nonce, signature) on tokens the provider really issued."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import secrets
import threading
import urllib.parse

import httpx
import pytest
from tornado.web import decode_signed_value

from gate.principals import Principal
from tests.oidc_support import oidc_provider, password  # noqa: F401  # the session fixture
from tests.server.support import free_port
from workbench.app.access import Identity, access_for
from workbench.app.oidc import (
    OIDCClient,
    OIDCConfigError,
    SignInFailed,
    discover,
    discovery_from,
    identity_from_cookie,
)
from workbench.app.oidc_settings import OIDCSettings

SCOPES = ("openid", "profile", "groups")
SECRET = "cookie-secret-for-the-test-" + "x" * 20


def _run(coroutine):
    """`asyncio.run` in a thread of its own: in the full suite an earlier test of this worker (a
    browser test's Playwright sync API) may leave an event loop marked running on the main thread."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result(timeout=120)


def provider_sign_in(client: httpx.Client, url: str, user: str, secret: str, stop: str) -> httpx.URL:
    """Follow the provider's redirects from `url`, answering its login form as `user`, until a
    redirect leaves for `stop` (the relying party's redirect URI); that URL. Raises on a 4xx."""
    response = client.get(url)
    for _ in range(12):
        location = response.headers.get("location")
        if location is not None:
            target = response.url.join(location)
            if str(target).startswith(stop):
                return target
            response = client.get(target)
            continue
        if response.status_code >= 400:
            raise AssertionError(f"{response.status_code}: {response.text[:300]}")
        form = response.url.join(response.text.split('action="', 1)[1].split('"', 1)[0])
        response = client.post(form, data={"login": user, "password": secret})
    raise AssertionError("the provider never sent the browser back")


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


@pytest.fixture(scope="module")
def relying_party(oidc_provider):  # noqa: F811
    """A client registered for an address nothing listens on: the test reads the code off the redirect."""
    redirect = f"http://127.0.0.1:{free_port()}/login"
    client_id, client_secret = oidc_provider.register(redirect)
    settings = OIDCSettings(oidc_provider.issuer, client_id, client_secret, "groups", SCOPES)
    return settings, discover(settings), redirect


def issued(relying_party, user: str = "alice") -> tuple[OIDCClient, str, str]:
    """(a client, an ID token the provider issued to it for `user`, the nonce sent)."""
    settings, discovery, redirect = relying_party
    verifier, challenge = pkce()
    nonce = secrets.token_urlsafe(16)
    query = {"response_type": "code", "client_id": settings.client_id, "redirect_uri": redirect,
             "scope": " ".join(SCOPES), "state": "s", "nonce": nonce, "code_challenge": challenge,
             "code_challenge_method": "S256"}
    with httpx.Client(timeout=30) as browser:
        back = provider_sign_in(browser, f"{discovery.authorization_endpoint}?{urllib.parse.urlencode(query)}",
                                user, password(user), redirect)
    code = back.params["code"]
    assert back.params["iss"] == settings.issuer
    client = OIDCClient(settings, discovery, frozenset({"gate-authors", "gate-approvers"}))
    return client, _run(client.exchange(code, redirect, verifier)), nonce


def test_an_id_token_the_provider_issued_is_checked_and_names_the_person(relying_party):
    client, id_token, nonce = issued(relying_party)
    claims = _run(client.verify(id_token, nonce))
    assert claims["sub"] == "alice" and claims["groups"] == ["gate-authors"] and claims["name"] == "Alice Author"
    cookie = json.loads(client.cookie_value(claims))
    assert cookie == {"iss": relying_party[0].issuer, "sub": "alice", "name": "Alice Author", "groups": ["gate-authors"]}


def test_a_wrong_nonce_audience_issuer_expiry_or_signature_is_refused(relying_party):
    client, id_token, nonce = issued(relying_party)
    with pytest.raises(SignInFailed, match="nonce"):
        _run(client.verify(id_token, "another-nonce"))
    settings, discovery, _ = relying_party
    other_client = OIDCClient(OIDCSettings(settings.issuer, "another-client", None), discovery, frozenset())
    with pytest.raises(SignInFailed, match="aud"):
        _run(other_client.verify(id_token, nonce))
    other_issuer = OIDCClient(settings, discovery.__class__(**{**discovery.__dict__, "issuer": "http://127.0.0.1:1"}),
                              frozenset())
    with pytest.raises(SignInFailed, match="iss"):
        _run(other_issuer.verify(id_token, nonce))
    later = OIDCClient(settings, discovery, frozenset(), clock=lambda: 4_000_000_000)
    with pytest.raises(SignInFailed, match="exp"):
        _run(later.verify(id_token, nonce))
    head, body, signature = id_token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    forged = base64.urlsafe_b64encode(json.dumps({**claims, "sub": "bob"}).encode()).decode().rstrip("=")
    with pytest.raises(SignInFailed, match="signature"):
        _run(client.verify(f"{head}.{forged}.{signature}", nonce))
    unsigned = base64.urlsafe_b64encode(b'{"alg":"none"}').decode().rstrip("=")
    with pytest.raises(SignInFailed, match="signature"):
        _run(client.verify(f"{unsigned}.{body}.", nonce))


def test_discovery_must_name_the_configured_issuer_and_offer_pkce(oidc_provider):  # noqa: F811
    document = httpx.get(f"{oidc_provider.issuer}/.well-known/openid-configuration").json()
    with pytest.raises(OIDCConfigError, match="must be identical"):
        discovery_from(document, oidc_provider.issuer + "/")
    with pytest.raises(OIDCConfigError, match="PKCE"):
        discovery_from({**document, "code_challenge_methods_supported": ["plain"]}, oidc_provider.issuer)
    with pytest.raises(OIDCConfigError, match="must be https"):
        discovery_from({**document, "token_endpoint": "http://id.example/token"}, oidc_provider.issuer)
    with pytest.raises(OIDCConfigError, match="cannot read"):
        discover(OIDCSettings(f"http://127.0.0.1:{free_port()}", "c"))


@pytest.fixture
def workbench(workbench_home, oidc_provider, tmp_path):  # noqa: F811
    """The real workbench server in this process, its people signing in at the provider."""
    from workbench.app.server import make_server

    store, _, _ = workbench_home
    port = free_port()
    client_id, client_secret = oidc_provider.register(f"http://127.0.0.1:{port}/login")
    grants = tmp_path / "grants.json"
    grants.write_text(json.dumps({"groups": {"gate-authors": {"acme": ["author", "releaser"]},
                                             "gate-approvers": {"*": ["approver"]}}}))
    settings = OIDCSettings(oidc_provider.issuer, client_id, client_secret, "groups", SCOPES)
    access = access_for("0.0.0.0", None, grants, settings)
    started, holder = threading.Event(), {}

    def run() -> None:
        asyncio.set_event_loop(asyncio.new_event_loop())
        holder["server"] = server = make_server(store, access, "127.0.0.1", port, cookie_secret=SECRET)
        server.start()
        started.set()
        server.io_loop.start()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(60)
    yield f"http://127.0.0.1:{port}", access
    loop = holder["server"].io_loop
    loop.add_callback(holder["server"].stop)
    loop.add_callback(loop.stop)
    thread.join(30)


def test_signing_in_through_the_provider_opens_the_workbench_as_that_person(workbench, oidc_provider):  # noqa: F811
    url, access = workbench
    with httpx.Client(timeout=60) as browser:
        opened = browser.get(f"{url}/workbench")
        assert opened.status_code == 302 and "login?next=" in opened.headers["location"]
        authorize = browser.get(opened.url.join(opened.headers["location"]))
        assert authorize.status_code == 302
        sent = httpx.URL(authorize.headers["location"])
        assert str(sent).startswith(f"{oidc_provider.issuer}/auth")
        assert sent.params["code_challenge_method"] == "S256" and sent.params["nonce"] and sent.params["state"]
        back = provider_sign_in(browser, sent, "bob", password("bob"), f"{url}/login")
        landed = browser.get(back)
        assert landed.status_code == 302 and landed.headers["location"] == "/workbench"
        assert browser.get(f"{url}/workbench").status_code == 200
        cookie = browser.cookies["user"].strip('"')  # Tornado quotes the value; a server reads it unquoted
        identity = identity_from_cookie({"user": cookie}, SECRET, 1, oidc_provider.issuer)
        assert identity == Identity(Principal.person(oidc_provider.issuer, "bob", "Bob Approver"), ("gate-approvers",))
        assert access.permissions_in(identity, "globex") == {"read", "approve"}
        # The same code (a replayed callback) finds no state cookie any more: refused.
        assert browser.get(back).status_code == 401


def test_a_forged_state_or_a_provider_error_is_refused(workbench, oidc_provider):  # noqa: F811
    url, _ = workbench
    with httpx.Client(timeout=60) as browser:
        sent = httpx.URL(browser.get(f"{url}/login").headers["location"])
        back = provider_sign_in(browser, sent, "alice", password("alice"), f"{url}/login")
        forged = back.copy_set_param("state", sent.params["state"][:-2] + "xx")
        refused = browser.get(forged)
        assert refused.status_code == 401 and "user" not in browser.cookies
        assert "alice" not in refused.text
        error = browser.get(f"{url}/login", params={"error": "access_denied",
                                                     "error_description": "<script>alert(1)</script>"})
        assert error.status_code == 401 and "<script>alert(1)" not in error.text
        # A cookie signed with another secret, or naming another issuer, names nobody.
        assert identity_from_cookie({"user": "x"}, SECRET, 1, oidc_provider.issuer) is None
        other = json.dumps({"iss": "https://elsewhere.example", "sub": "alice", "groups": []})
        from tornado.web import create_signed_value

        signed = create_signed_value(SECRET, "user", other).decode()
        assert decode_signed_value(SECRET, "user", signed) is not None
        assert identity_from_cookie({"user": signed}, SECRET, 1, oidc_provider.issuer) is None


def test_a_wrong_password_at_the_provider_signs_nobody_in(workbench, oidc_provider):  # noqa: F811
    url, _ = workbench
    with httpx.Client(timeout=60) as browser:
        sent = httpx.URL(browser.get(f"{url}/login").headers["location"])
        with pytest.raises(AssertionError, match="401"):
            provider_sign_in(browser, sent, "alice", "not-her-password", f"{url}/login")
        assert "user" not in browser.cookies
