"""Issue 42 in a real browser: people sign in to `gate workbench` through a real OpenID Connect
provider (oidc-provider on Node, tests/oidc_support.py) and act as themselves with the roles the
grants file gives their groups. Alice (an author and releaser in acme) drafts, dry-runs and
requests activation; Bob (an approver), in another browser, approves it and the version becomes
active; the signed history names both people. Carol (a viewer) forces the hidden Activate button
through the page's Bokeh model: refused, and nothing is recorded."""

from __future__ import annotations

import copy
import json
import subprocess

import pytest

from gate.principals import Principal
from tests.browser.conftest import GATE, Workbench, screenshot
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
    server = Workbench(home, ["--refresh", "--oidc-issuer", oidc_provider.issuer, "--oidc-client-id", client_id,
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
