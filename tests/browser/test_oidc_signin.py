"""Issue 42 in a real browser: people sign in to `gate workbench` through a real OpenID Connect
provider (oidc-provider on Node, tests/oidc_support.py) and act as themselves with the roles the
grants file gives their groups. Alice (an author and releaser in acme) drafts, dry-runs and
requests activation; Bob (an approver), in another browser, approves it and the version becomes
active; the signed history names both people. Carol (a viewer) forces the hidden Activate button
through the page's Bokeh model: refused, and nothing is recorded."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import time

import pytest

from gate.principals import Principal
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, GATE, Workbench, screenshot
from tests.browser.test_workbench_pages import draft_from_current, tab
from tests.demo_support import gate_env
from tests.oidc_support import oidc_provider, password  # noqa: F401  # the session fixture
from tests.server.support import free_port
from tests.workbench.ledger_support import REQUEST

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SCOPE, RULEBOOK_ID, VERSION = "acme", "pricing_exception", "2027-03-01"


def release_service(home):
    from gate.keys.config import SigningSetup
    from gate.ledger import Ledger
    from gate.services.root import decision_services

    ledger = Ledger(f"sqlite:///{home / 'gate.db'}")
    return ledger, decision_services(ledger, SigningSetup.load(home / "signing-keys.json", None, "hmac")).release_service()


@pytest.fixture(scope="module")
def governed(tmp_path_factory, oidc_provider):  # noqa: F811
    """A workbench whose people sign in at the provider; approvals required in acme."""
    from tests.workbench.app.conftest import build_small_ledger

    home = tmp_path_factory.mktemp("oidc-home")
    build_small_ledger(home)
    ledger, releases = release_service(home)
    releases.set_policy(SCOPE, Principal.operator("test-admin"), frozenset({"admin"}), {"require_approval": True},
                        partial=True)
    ledger.dispose()
    port = free_port()
    client_id, client_secret = oidc_provider.register(f"http://127.0.0.1:{port}/login")
    (home / "client-secret").write_text(client_secret + "\n")
    (home / "grants.json").write_text(json.dumps({"groups": {
        "gate-authors": {SCOPE: ["author", "releaser"]}, "gate-approvers": {SCOPE: ["approver"]},
        "gate-viewers": {SCOPE: ["viewer"]}}}))
    server = Workbench(home, ["--refresh", "--oidc-issuer", oidc_provider.issuer, f"--oidc-client-id={client_id}",
                              "--oidc-client-secret-file", str(home / "client-secret"),
                              "--oidc-scopes", "openid profile groups", "--grants", str(home / "grants.json")],
                       port=port, ready="/logout")
    yield server, oidc_provider.issuer
    server.stop()


def sign_in(browser, server, name: str):
    """A fresh browser (its own cookies) signed in as `name` at the provider, scope acme open."""
    context = browser.new_context(viewport={"width": 1500, "height": 1100})
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.goto(server.url)
    page.locator("input[name=login]").fill(name)
    page.locator("input[name=password]").fill(password(name))
    page.locator("button[type=submit]").click()
    page.locator("select").first.wait_for()
    page.locator("select").first.select_option(SCOPE)
    return context, page


def test_an_author_requests_and_another_person_approves(browser, governed):
    server, issuer = governed
    alice_context, alice = sign_in(browser, server, "alice")
    bob_context = None
    try:
        alice.get_by_text("signed in as Alice Author · roles here: author, releaser").wait_for()
        draft = copy.deepcopy(REQUEST["rulebook"]) | {"version": VERSION}
        draft["rules"][0]["condition"]["value"] = 15
        draft_from_current(alice, RULEBOOK_ID, json.dumps(draft, indent=2))
        tab(alice, "Migration")
        alice.get_by_role("button", name="Dry-run draft over full history").click()
        alice.get_by_text("change verdict (").first.wait_for()
        alice.get_by_role("button", name="Request activation").click()
        confirmation = alice.locator(".migration-confirmation")
        confirmation.get_by_text(f"Publish and activate {RULEBOOK_ID} version {VERSION} in scope {SCOPE}?").wait_for()
        confirmation.get_by_text("Arm shares: active 2027-03-01: 100% of decides").wait_for()
        confirmation.get_by_text("decisions change verdict; failures caught").wait_for()
        screenshot(alice, "oidc-1-alice-confirms")
        alice.get_by_role("button", name="Confirm").click()
        alice.get_by_text(f"activation of {RULEBOOK_ID} version {VERSION} requested").wait_for()
        tab(alice, "Releases")
        alice.locator(".pending-request").first.wait_for()
        assert alice.locator(".release-approve").first.is_hidden()  # an author is no approver

        bob_context, bob = sign_in(browser, server, "bob")
        bob.get_by_text("signed in as Bob Approver · roles here: approver").wait_for()
        tab(bob, "Releases")
        bob.locator(".pending-request").first.wait_for()
        assert bob.locator(".release-activate").is_hidden()  # an approver does not activate
        bob.get_by_role("button", name="Approve request").first.click()
        bob.locator(".release-confirmation").get_by_text("Approve request").wait_for()  # it asks first
        bob.get_by_role("button", name="Confirm").click()
        bob.get_by_text(f"active: {VERSION}").wait_for()
        bob.locator(".tabulator-cell[tabulator-field='by']").filter(has_text="#bob").first.wait_for()
        screenshot(bob, "oidc-2-bob-approved")
        assert alice.errors == [] and bob.errors == []
    finally:
        alice_context.close()
        if bob_context is not None:
            bob_context.close()

    ledger, releases = release_service(server.home)
    try:
        history = releases.history(SCOPE, RULEBOOK_ID)
    finally:
        ledger.dispose()
    request, approval = history[-2], history[-1]
    assert (request["action"], request["actor"]) == ("activate", f"person:{issuer}#alice")
    assert (approval["action"], approval["actor"]) == ("approve", f"person:{issuer}#bob")
    assert approval["request_seq"] == request["seq"] and approval["state"]["active"]["version"] == VERSION
    # The signed principal members name both people: issuer, subject and display name.
    assert request["principal"] == {"kind": "person", "id": f"{issuer}#alice", "issuer": issuer, "subject": "alice",
                                    "display_name": "Alice Author"}
    assert approval["principal"] == {"kind": "person", "id": f"{issuer}#bob", "issuer": issuer, "subject": "bob",
                                     "display_name": "Bob Approver"}
    # Offline: `gate verify` checks the exported history whose signed events name both people, and
    # lists the policy change that required the approval.
    env = gate_env(server.home)
    exported = subprocess.run([GATE, "release", "history", "--scope", SCOPE, "--rulebook-id", RULEBOOK_ID],
                              env=env, check=True, capture_output=True, text=True, timeout=120).stdout
    (server.home / "history.json").write_text(exported)
    verified = json.loads(subprocess.run([GATE, "verify", "--json", str(server.home / "history.json")], env=env,
                                         capture_output=True, text=True, timeout=120).stdout)
    assert verified["integrity_valid"] and verified["problems"] == []
    assert [change["policy_after"]["require_approval"] for change in verified["policy_changes"]] == [True]
    people = {e["principal"]["display_name"] for e in json.loads(exported)["events"]
              if (e.get("principal") or {}).get("kind") == "person"}
    assert people == {"Alice Author", "Bob Approver"}


# Show the hidden Activate button of the page's Bokeh document (what a hand-made client can do).
_FORCE_ACTIVATE = """() => {
  let shown = 0;
  for (const doc of Bokeh.documents) {
    for (const model of doc.all_models) {
      if ((model.css_classes || []).includes('release-activate')) { model.visible = true; shown += 1; }
    }
  }
  return shown;
}"""


def test_a_viewer_forcing_the_hidden_activate_is_refused_and_nothing_is_recorded(browser, governed):
    server, _ = governed
    ledger, releases = release_service(server.home)
    try:
        before = releases.history(SCOPE, RULEBOOK_ID)
    finally:
        ledger.dispose()
    context, carol = sign_in(browser, server, "carol")
    try:
        carol.get_by_text("roles here: viewer").wait_for()
        tab(carol, "Releases")
        carol.get_by_text("Pending requests", exact=True).wait_for()
        activate = carol.locator(".release-activate")
        assert activate.is_hidden()
        assert carol.evaluate(_FORCE_ACTIVATE) >= 1
        activate.locator("button").click()
        carol.get_by_text("activate refused (RELEASE_PERMISSION_DENIED)").wait_for()
        assert carol.locator(".release-confirmation").count() == 0
        screenshot(carol, "oidc-3-viewer-refused")
    finally:
        context.close()
    ledger, releases = release_service(server.home)
    try:
        after = releases.history(SCOPE, RULEBOOK_ID)
    finally:
        ledger.dispose()
    assert after == before
    assert not any("#carol" in event["actor"] for event in after)


# Show the hidden Refresh button of the page's Bokeh document.
_FORCE_REFRESH = _FORCE_ACTIVATE.replace("release-activate", "refresh-dataset")


def _manifest(home):
    [manifest] = home.rglob("dataset/manifest.json")
    return manifest.read_bytes()


def test_a_viewers_forced_refresh_is_refused_and_sign_out_ends_the_providers_session(browser, governed):
    """Issue 57 (defects 6 and 4), issue 52 (defect 5): Carol, a viewer, forces the hidden
    **Refresh dataset from ledger** through the page's Bokeh model: refused on the server, the
    signed manifest unchanged. Then the header's **Sign out** ends her session at the provider too:
    opening the workbench again, the provider asks for a password."""
    server, _ = governed
    before = _manifest(server.home)
    context, carol = sign_in(browser, server, "carol")
    try:
        carol.get_by_text("roles here: viewer").wait_for()
        refresh = carol.locator(".refresh-dataset")
        assert refresh.is_hidden()
        assert carol.evaluate(_FORCE_REFRESH) >= 1
        refresh.locator("button").click()
        carol.get_by_text("refresh refused: it needs the export permission in every scope").wait_for()
        assert _manifest(server.home) == before
        screenshot(carol, "oidc-4-viewer-refresh-refused")
        carol.get_by_text("Sign out", exact=True).click()
        carol.get_by_role("button", name="Yes, sign me out").click()  # the provider's confirmation
        carol.wait_for_url(f"{server.url.rsplit('/', 1)[0]}/logout?state=out")
        carol.goto(server.url)
        carol.locator("input[name=password]").wait_for()  # the provider asks again
        assert "Test provider sign-in" in carol.title()
        assert carol.errors == []
    finally:
        context.close()


# Issue 63, defect 1: what binds a click to a person. Alice (an author) tries to act with Bob's
# roles (an approver) by attaching her browser to a page the server built for Bob.

def _request_as_alice(home, issuer: str, version: str) -> int:
    """Alice asks for the activation of a new version (through the release service, as her page
    would): the pending request's seq."""
    from gate.keys.config import SigningSetup
    from gate.ledger import Ledger
    from gate.principals import permissions_of
    from gate.services.root import decision_services

    ledger = Ledger(f"sqlite:///{home / 'gate.db'}")
    try:
        services = decision_services(ledger, SigningSetup.load(home / "signing-keys.json", None, "hmac"))
        draft = copy.deepcopy(REQUEST["rulebook"]) | {"version": version}
        draft["rules"][0]["condition"]["value"] = 17
        services.decisions.register_rulebook(SCOPE, draft)
        event, _ = services.release_service().act(
            SCOPE, Principal.person(issuer, "alice", "Alice Author"), permissions_of(frozenset({"author", "releaser"})),
            RULEBOOK_ID, {"action": "activate", "version": version})
    finally:
        ledger.dispose()
    return int(event["seq"])


_TOKEN = re.compile(r'"token":\s*"([^"]+)"')


def _page_for(context, url: str, token: str | None = None) -> dict:
    """The page the server answers `context`'s browser at `url` (status, headers, HTML), its Bokeh
    token replaced by `token` when given (a hand-made one)."""
    response = context.request.get(url, max_redirects=0)
    body = response.text()
    if token is not None:
        body = _TOKEN.sub(f'"token": "{token}"', body)
    headers = {name: value for name, value in response.headers.items()
               if name.lower() not in ("content-length", "content-encoding", "transfer-encoding")}
    return {"status": response.status, "headers": headers, "body": body}


def _attached_to(page, url: str, served: dict) -> bool:
    """Open `url` in `page` (its own browser, its own cookie) answered with `served`, another
    browser's page (what a hand-made client does over the websocket: another page's token): whether
    Bob's page was then drawn (a page for Alice herself is no attack: a token naming no live page
    makes a new one for the websocket's own sign-in session).

    A served page (200) must open its websocket (else nothing was tried, and this fails); a refused
    one (the link's 403) has no script to open one. It ends when Bob's name shows (drawn) or when
    the server has closed that websocket and a further second draws nothing (refused): a refused
    handshake closes it at once, where waiting for a name that never came cost 20 s each."""
    def swap(route) -> None:
        route.fulfill(**served)

    bob = page.locator(".signed-in").get_by_text("Bob Approver")
    page.route(url, swap)
    try:
        if served["status"] != 200:
            page.goto(url)
            return bob.count() > 0
        with page.expect_websocket(timeout=20_000) as opened:
            page.goto(url)
        socket, deadline = opened.value, time.monotonic() + 20
        while time.monotonic() < deadline:
            if bob.count():
                return True
            if socket.is_closed():
                page.wait_for_timeout(1_000)  # anything the socket delivered before closing is drawn
                return bob.count() > 0
            page.wait_for_timeout(100)
        return bob.count() > 0
    finally:
        page.unroute(url, swap)


def test_no_one_acts_with_another_persons_page(browser, governed):
    """Before: Bob opened `/workbench?bokeh-session-id=X` (a link Alice sent); Alice connected a
    websocket with her own cookie and a hand-made token for X, pressed "Approve request" and
    "Confirm", and the history showed `approve` by Bob. Now the link is refused (403), and a
    websocket whose sign-in session is not the page's (a hand-made token for X, or a real page
    token of Bob's) opens nothing: Alice's browser draws no page, no event is appended."""
    from bokeh.util.token import generate_jwt_token

    server, issuer = governed
    seq = _request_as_alice(server.home, issuer, "2027-05-01")
    ledger, releases = release_service(server.home)
    try:
        before = releases.history(SCOPE, RULEBOOK_ID)
    finally:
        ledger.dispose()
    # Alice's browser takes pages from the test (`route`): Chromium's local-network checks would
    # refuse such a page's websocket to 127.0.0.1, as they do not refuse the attacker's own client.
    attacker = browser.browser_type.launch(executable_path=CHROMIUM,
                                           args=[*CHROMIUM_ARGS, "--disable-features=LocalNetworkAccessChecks"])
    bob_context, _bob = sign_in(browser, server, "bob")
    alice_context, alice = sign_in(attacker, server, "alice")
    try:
        chosen = f"chosen-by-alice-{seq}"
        hand_made = generate_jwt_token(chosen, secret_key=None, signed=False,
                                       extra_payload={"headers": {}, "cookies": {}, "arguments": {}})
        by_link = _page_for(bob_context, f"{server.url}?bokeh-session-id={chosen}", hand_made)
        # Before, Alice's browser drew Bob's page ("signed in as Bob Approver") and its Approve
        # button acted as Bob; now the link is refused, and so is a websocket with the hand-made
        # token or with the token of Bob's own page. Bob's page is fetched just before each
        # (the server drops a page no websocket joined within 15 s).
        drawn = [_attached_to(alice, server.url, by_link),
                 _attached_to(alice, server.url, _page_for(bob_context, server.url, hand_made)),
                 _attached_to(alice, server.url, _page_for(bob_context, server.url))]
        screenshot(alice, "oidc-5-alice-attached-to-nothing")
    finally:
        alice_context.close()
        bob_context.close()
        attacker.close()
    ledger, releases = release_service(server.home)
    try:
        after = releases.history(SCOPE, RULEBOOK_ID)
    finally:
        ledger.dispose()
    assert drawn == [False, False, False], \
        f"Bob's page drawn in Alice's browser (link, hand-made token, his page's token): {drawn}"
    assert by_link["status"] == 403
    assert after == before, [event["action"] + " by " + event["actor"] for event in after[len(before):]]
    assert seq >= 1  # Alice's request stays pending, approved by no one
