"""Issue 65, "Done when", in one walk: the shipped refund request (`gate/data/requests/refund-window.json`,
asked 40 days after purchase so `review_grace_period` holds it) is decided by the gate's own
services, its queue tells reviewers by e-mail (a real SMTP server on loopback) and Slack (a
recorder of the Web API) through the dispatcher's notice passes, and a reviewer who signs in at
the tests' OpenID Connect provider finds the same request first in the Inbox row and detail.
Every place names `issue_refund`, `ord_7731` and 129; e-mail and Slack mask the facts the
queue's default `show` leaves out (the Inbox, behind sign-in and the scope's grants, shows them)."""

from __future__ import annotations

import json

import pytest

from gate.principals import Principal
from gate.services.pipeline import Caller
from tests.browser.conftest import Workbench, wait_for_rows
from tests.browser.test_inbox_page import assert_text_only, sign_in  # noqa: F401  # the fixture
from tests.conftest import gate_environment
from tests.holds.support import policy, queue
from tests.holds.test_channels import slack_api, smtp  # noqa: F401  # the receivers' fixtures
from tests.holds.test_hold_request import refund_held
from tests.oidc_support import oidc_provider, password  # noqa: F401  # the session fixture
from tests.server.support import free_port
from workbench.app.pages.links import hold_href

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SCOPE = "acme"
ADMIN = Principal.person("password-file", "ops", None)


def _decide_and_tell(home, port: int, smtp, slack_api) -> dict:  # noqa: F811
    """The held refund, decided and told through the root's services on the workbench's ledger."""
    from gate.settings import Settings
    from gate_cli.context import open_ledger
    from workbench.services.root import compose, signing_setup

    env = gate_environment(home, f"sqlite:///{home / 'gate.db'}")
    settings = Settings.from_env({**env, "GATE_SMTP_URL": smtp.url, "GATE_SMTP_FROM": "gate@example.org",
                                  "GATE_SLACK_BOT_TOKEN": "xoxb-test", "GATE_SLACK_API_URL": slack_api.url,
                                  "GATE_WORKBENCH_URL": f"http://127.0.0.1:{port}/workbench",
                                  "GATE_EVENTS_DISPATCH": "true"})
    ledger = open_ledger(settings)
    try:
        core, serving = compose(signing_setup(settings), ledger, settings=settings).served()
        channels = {"every_seconds": 0, "email": ["reviewers@example.org"], "slack": {"channel": "C0123CHANNEL"}}
        core.holds.set_policy(SCOPE, ADMIN, frozenset({"admin"}),
                              policy({"default": {**queue(deadline=86_400), "notify": channels}}))
        caller = Caller("key_refunds", SCOPE, "starter", 1000, 10_000_000, holder="refund-bot")
        record = dict(core.decisions.decide(caller, refund_held()).record)
        assert record["verdict"] == "review", record
        assert serving.dispatcher is not None  # its notice passes, run here once each
        passes = {worker.name: worker.step for worker in serving.dispatcher.workers}
        assert passes["notify-email"]() == 1 and passes["notify-slack"]() == 1
    finally:
        ledger.dispose()
    return record


def test_the_request_comes_first_in_the_inbox_the_e_mail_and_slack(tmp_path, sign_in, oidc_provider,  # noqa: F811
                                                                     smtp, slack_api):  # noqa: F811
    home, port = tmp_path / "home", free_port()
    record = _decide_and_tell(home, port, smtp, slack_api)

    # The e-mail (real SMTP) and the Slack message (the recorder): the request first, facts masked.
    (_, message), = smtp.messages
    (_, data, _), = [call for call in slack_api.calls if call[0] == "chat.postMessage"]
    blocks = data["blocks"] if isinstance(data["blocks"], list) else json.loads(data["blocks"])
    text, page, slack = (message.get_body(("plain",)).get_content(), message.get_body(("html",)).get_content(),
                         blocks[0]["text"]["text"])
    for told in (text, page, slack):
        assert "issue_refund" in told and "ord_7731" in told and "129" in told, told
        assert "•••" in told and "ticket_5521" not in told  # outside the default `show`
    assert text.index("ord_7731") < text.index("Facts:") and '"days_since_purchase": 40' not in text
    assert "days_since_purchase: •••" in slack and "days_since_purchase: 40" not in slack

    # The Inbox, after sign-in at the provider: the row and the detail name the same request.
    client_id, client_secret = oidc_provider.register(f"http://127.0.0.1:{port}/login")
    (home / "client-secret").write_text(client_secret + "\n")
    (home / "grants.json").write_text(json.dumps({"groups": {"gate-approvers": {SCOPE: ["reviewer"]}}}))
    server = Workbench(home, ["--oidc-issuer", oidc_provider.issuer, f"--oidc-client-id={client_id}",
                              "--oidc-client-secret-file", str(home / "client-secret"),
                              "--oidc-scopes", "openid profile groups", "--grants", str(home / "grants.json")],
                       port=port, ready="/logout")
    try:
        bob = sign_in(server, "bob", f"{server.url}?scope={SCOPE}&page=inbox")
        wait_for_rows(bob, ".inbox-holds")
        row = bob.locator(".inbox-holds .tabulator-row", has_text="ord_7731")
        assert row.locator(".tabulator-cell[tabulator-field='action']").inner_text() == "issue_refund"
        assert row.locator(".tabulator-cell[tabulator-field='amount']").inner_text().startswith("129")
        bob.goto(server.url + hold_href(SCOPE, record["decision_id"]))
        hold = bob.locator(".inbox-hold")
        hold.get_by_text(f"Hold {record['decision_id']} · open").wait_for()
        hold.get_by_text("Request (as signed)").wait_for()
        for shown in ("issue_refund", "ord_7731", "ticket_5521"):  # the Inbox shows every member
            hold.get_by_text(shown).first.wait_for()
        hold.get_by_text("129", exact=True).first.wait_for()
        request_box = hold.get_by_text("ord_7731").first.bounding_box()
        facts_box = hold.get_by_text("days_since_purchase").first.bounding_box()
        assert request_box is not None and facts_box is not None and request_box["y"] < facts_box["y"]
        bob.locator(".inbox-verification").get_by_text(
            "the request shown is the stored request bound to this record's input_hash").wait_for()
        assert_text_only(bob)
    finally:
        server.stop()
