"""Reviewers' channels per queue (issue 56 item 1, docs/integrations.md): `queues.<name>.notify` in
the hold policy, checked strictly and governed; e-mail through a real SMTP server on loopback
(aiosmtpd) and Slack messages to a local recorder of the Web API, both sent by the events
dispatcher's tasks (each hold at once, or a digest; high and urgent at once; retried); and Slack's
Approve/Deny through the signed interactions endpoint, as the person the grants file maps the
Slack user to."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import socket
import threading
import time
from email import message_from_bytes
from email.policy import default as email_policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode

import pytest
from aiosmtpd.controller import Controller

from gate.events.outbound import Outbound
from gate.holds.events import verify_resolution
from gate.holds.policy import HoldPolicy, disclosed, move_loosens, recipients, weakenings
from tests.holds.support import Holds, MovingClock, held_request, policy, queue
from tests.holds.test_hold_request import refund_held

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TEAM, ALICE, BOB, EVIL = "T0001TEAM", "U0001ALICE", "U0002BOB", "U0003EVIL"
ISSUER = "https://idp.example"


class _Mailbox:
    def __init__(self) -> None:
        self.messages: list = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append((envelope.rcpt_tos, message_from_bytes(envelope.content, policy=email_policy)))
        return "250 OK"


@pytest.fixture
def smtp():
    box = _Mailbox()
    with socket.socket() as probe:  # a free port (aiosmtpd's start connects to the port it was given)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    box.url = f"smtp://127.0.0.1:{port}"
    yield box
    controller.stop()


class _Recorder(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        kind = self.headers.get("content-type", "")
        data = json.loads(body) if "json" in kind else {k: v[0] for k, v in parse_qs(body.decode()).items()}
        self.server.calls.append((self.path.rsplit("/", 1)[-1], data, self.headers.get("authorization")))
        # the next answer a test queued (status, document; or a callable giving one, run while the
        # caller waits), else Slack's acceptance
        queued = self.server.answers.pop(0) if self.server.answers else None
        status, document = (queued() if callable(queued) else queued) if queued is not None else (
            200, {"ok": True, "channel": data.get("channel"), "ts": "1700000000.000100"})
        answer = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


@pytest.fixture
def slack_api():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.calls, server.answers = [], []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.url = f"http://127.0.0.1:{server.server_address[1]}/api/"
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def grants(tmp_path):
    path = tmp_path / "grants.json"
    path.write_text(json.dumps({
        "issuer": ISSUER, "users": {"alice": {"tenant_a": ["reviewer"]}, "bob": {"tenant_a": ["viewer"]}},
        "slack": {f"{TEAM}/{ALICE}": f"person:{ISSUER}#alice", f"{TEAM}/{BOB}": f"person:{ISSUER}#bob",
                  f"{TEAM}/{EVIL}": "person:https://evil.example#alice"}}))
    return path


@pytest.fixture
def clock():
    return MovingClock()


@pytest.fixture
def gate(make_app, clock, smtp, slack_api, grants):
    app = make_app({"GATE_SMTP_URL": smtp.url, "GATE_SMTP_FROM": "gate@example.org",
                    "GATE_SLACK_BOT_TOKEN": "xoxb-test", "GATE_SLACK_API_URL": slack_api.url,
                    "GATE_SLACK_SIGNING_SECRET": SECRET, "GATE_GRANTS_FILE": str(grants),
                    "GATE_WORKBENCH_URL": "https://gate.example/workbench"}, clock=clock)
    return app


def _notifier(app):
    """The Notifier behind the dispatcher's notify tasks (each a partial of its `run`)."""
    worker = next(w for w in app.extensions["gate"].dispatcher.workers if w.name == "notify-email")
    return worker.step.func.__self__


def _pass(app, kind):
    worker = next(w for w in app.extensions["gate"].dispatcher.workers if w.name == f"notify-{kind}")
    return worker.step()


@pytest.fixture
def keys(issue_key):
    return {"caller": issue_key(permissions="decide")["api_key"],
            "admin": issue_key(permissions="decide,admin")["api_key"]}


def _channels(every=0, email=("reviewers@example.org",), slack="C0123CHANNEL"):
    notify = {"every_seconds": every}
    if email:
        notify["email"] = list(email)
    if slack:
        notify["slack"] = {"channel": slack}
    return notify


def _policy(notify, routes=None, show=None):
    shows = {} if show is None else {"show": show}
    return policy({"default": {**queue(), "notify": notify, **shows}}, routes=routes)


def _held(gate, keys, **inputs):
    body = held_request()
    body["context"]["inputs"].update(inputs)
    record = Holds(gate.test_client(), keys["caller"]).decide(body).get_json()
    assert record["verdict"] == "review", record
    return record


# -- the policy ------------------------------------------------------------------------------------

_REFUSED = [
    ({"email": ["a@example.org"]}, "states every_seconds"),
    ({"every_seconds": 0}, "states every_seconds and email, slack or both"),
    ({"every_seconds": 0, "email": ["a@example.org"], "sms": "1"}, "and nothing else"),
    ({"every_seconds": 30, "email": ["a@example.org"]}, "every_seconds must be 0"),
    ({"every_seconds": 0, "email": []}, "1 to 10 distinct"),
    ({"every_seconds": 0, "email": ["Eve <e@example.org>"]}, "no display name"),
    ({"every_seconds": 0, "email": ["e@example.org\r\nBcc: x@evil.example"]}, "no display name"),
    ({"every_seconds": 0, "email": [f"r{i}@example.org" for i in range(11)]}, "1 to 10"),
    ({"every_seconds": 0, "email": ["a@example.org", "A@example.org"]}, "distinct"),
    ({"every_seconds": 0, "slack": {"channel": "#general"}}, "channel id"),
    ({"every_seconds": 0, "slack": "C0123CHANNEL"}, "channel id"),
]


def test_a_queue_s_channels_are_checked_strictly_and_a_refusal_changes_nothing(gate, keys):
    admin = Holds(gate.test_client(), keys["admin"])
    before = admin.client.get("/api/holds/policy", headers=admin.h()).get_json()["policy"]
    for notify, says in _REFUSED:
        answer = admin.put_policy(_policy(notify))
        assert answer.status_code == 400 and answer.get_json()["error"] == "HOLD_POLICY_INVALID", notify
        assert says in answer.get_json()["message"], notify
    assert admin.client.get("/api/holds/policy", headers=admin.h()).get_json()["policy"] == before


def test_channels_round_trip_and_adding_a_recipient_is_a_weakening_removing_one_is_not(gate, keys):
    admin = Holds(gate.test_client(), keys["admin"])
    answer = admin.put_policy(_policy(_channels(every=300)))
    assert answer.status_code == 200, answer.get_json()
    shown = admin.client.get("/api/holds/policy", headers=admin.h()).get_json()["policy"]
    assert shown["queues"]["default"]["notify"] == {"email": ["reviewers@example.org"],
                                                   "slack": {"channel": "C0123CHANNEL"}, "every_seconds": 300}
    without = HoldPolicy.from_json(policy())
    assert "notify" not in without.to_json()["queues"]["default"]  # a queue without channels reads as before
    one = HoldPolicy.from_json(_policy(_channels(email=("a@example.org",), slack=None)))
    more = HoldPolicy.from_json(_policy(_channels(email=("a@example.org", "b@example.org"), slack=None)))
    moved = HoldPolicy.from_json(_policy(_channels(email=("a@example.org",), slack="C0999OTHER")))
    slower = HoldPolicy.from_json(_policy(_channels(every=3600, email=("a@example.org",), slack=None)))
    assert weakenings(without, one) == ("queues.default.notify",)
    assert weakenings(one, more) == ("queues.default.notify",)
    assert weakenings(one, moved) == ("queues.default.notify",)
    assert weakenings(more, one) == () and weakenings(one, without) == () and weakenings(one, slower) == ()
    added = HoldPolicy.from_json(policy({"default": queue(), "new": {**queue(), "notify": _channels()}}))
    assert weakenings(without, added) == ("queues.new.notify",)


# -- sending ---------------------------------------------------------------------------------------

def test_a_held_action_is_e_mailed_and_posted_to_slack_escaped_bounded_and_once(gate, keys, smtp, slack_api):
    admin = Holds(gate.test_client(), keys["admin"])
    assert admin.put_policy(_policy(_channels(), show=["requested_action", "facts.account_tier"])).status_code == 200
    record = _held(gate, keys, account_tier="<script>alert(1)</script> & <@channel>")
    assert _pass(gate, "email") == 1 and _pass(gate, "slack") == 1
    assert _pass(gate, "email") == 0 and _pass(gate, "slack") == 0  # once: the cursors moved
    (recipients, message), = smtp.messages
    assert recipients == ["reviewers@example.org"] and message["From"] == "gate@example.org"
    assert "tenant_a" in message["Subject"]
    text = message.get_body(("plain",)).get_content()
    page = message.get_body(("html",)).get_content()
    link = f"https://gate.example/workbench?scope=tenant_a&page=inbox&hold={record['decision_id']}"
    assert record["decision_id"] in text and link in text and "held by rule review_thin_margin" in text
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;@channel&gt;" in page
    assert f'href="{link.replace("&", "&amp;")}"' in page and "does not approve" in page
    (method, data, auth), = slack_api.calls
    assert method == "chat.postMessage" and auth == "Bearer xoxb-test" and data["channel"] == "C0123CHANNEL"
    blocks = data["blocks"] if isinstance(data["blocks"], list) else json.loads(data["blocks"])
    buttons = {e["action_id"]: e for b in blocks if b["type"] == "actions" for e in b["elements"]}
    assert buttons["hold_approve"]["value"] == buttons["hold_deny"]["value"] == record["decision_id"]
    assert all(b["text"]["type"] == "plain_text" for b in blocks if b["type"] == "section")  # never mrkdwn


def test_a_digest_waits_every_seconds_while_high_priority_goes_at_once(gate, keys, smtp, clock):
    admin = Holds(gate.test_client(), keys["admin"])
    routes = [{"policy_id": "pricing_exception", "rule_id": "review_thin_margin", "queue": "default",
               "priority": "normal"}]
    assert admin.put_policy(_policy(_channels(every=120, slack=None), routes)).status_code == 200
    first, second = _held(gate, keys), _held(gate, keys, margin_percent=11)
    assert _pass(gate, "email") == 0 and smtp.messages == []
    clock.advance(60)
    assert _pass(gate, "email") == 0
    # An urgent route: told at once whatever the digest.
    routes[0]["priority"] = "urgent"
    assert admin.put_policy(_policy(_channels(every=120, slack=None), routes)).status_code == 200
    urgent = _held(gate, keys, margin_percent=10)
    assert _pass(gate, "email") == 1
    assert urgent["decision_id"] in smtp.messages[0][1].get_body(("plain",)).get_content()
    clock.advance(61)
    assert _pass(gate, "email") == 1
    digest = smtp.messages[1][1].get_body(("plain",)).get_content()
    assert first["decision_id"] in digest and second["decision_id"] in digest
    assert urgent["decision_id"] not in digest and "2 held actions" in smtp.messages[1][1]["Subject"]
    clock.advance(500)
    assert _pass(gate, "email") == 0 and len(smtp.messages) == 2


def test_a_failing_server_is_retried_and_a_hold_closed_meanwhile_is_not_announced(gate, keys, smtp, clock):
    admin = Holds(gate.test_client(), keys["admin"])
    assert admin.put_policy(_policy(_channels(slack=None))).status_code == 200
    notifier = _notifier(gate)
    channel = next(c for c in notifier.channels if c.name == "email")
    real, failures = channel.send, []

    def down(queue, notices):
        failures.append(notices)
        raise ConnectionRefusedError("the SMTP server is down")

    channel.send = down
    record = _held(gate, keys)
    assert _pass(gate, "email") == 0 and len(failures) == 1 and smtp.messages == []
    channel.send = real
    assert _pass(gate, "email") == 1  # the cursor stayed: the same notice goes out
    assert record["decision_id"] in smtp.messages[0][1].get_body(("plain",)).get_content()
    # Three failures in a row open the server's breaker: its notices wait in the outbox.
    channel.send = down
    for _ in range(3):
        _held(gate, keys)
        _pass(gate, "email")
    tried = len(failures)
    closed = _held(gate, keys)
    assert _pass(gate, "email") == 0 and len(failures) == tried
    reviewer = Holds(gate.test_client(), _reviewer_key(gate))
    assert reviewer.resolve(closed["decision_id"], "deny").status_code == 201
    channel.send = real
    clock.advance(400)  # past the breaker's open time
    assert _pass(gate, "email") == 3  # one message per hold still open; the denied one is not announced
    assert all(closed["decision_id"] not in m.get_body(("plain",)).get_content() for _, m in smtp.messages)


def _reviewer_key(gate):
    from gate.settings import Settings
    from gate_cli.keys_cmd import create_key

    settings = gate.extensions["gate"].settings
    return create_key(Settings.from_env({"GATE_HOME": str(settings.home),
                                         "GATE_DATABASE_URL": settings.database_url}), "tenant_a", "starter",
                      10_000, None, None, "resolve", "service:desk")["api_key"]


# -- Slack's interactions --------------------------------------------------------------------------

def _interaction(decision_id, user=ALICE, action="hold_approve", **payload):
    body = {"type": "block_actions", "team": {"id": TEAM}, "user": {"id": user, "team_id": TEAM},
            "actions": [{"action_id": action, "value": decision_id}],
            "container": {"channel_id": "C0123CHANNEL", "message_ts": "1700000000.000100"}, **payload}
    return urlencode({"payload": json.dumps(body)}).encode()


def _signed(client, body, at, secret=SECRET, stamp=None):
    stamp = str(int(at.timestamp())) if stamp is None else stamp
    signature = "v0=" + hmac.new(secret.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256).hexdigest()
    return client.post("/api/integrations/slack/interactions", data=body,
                        headers={"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": signature,
                                 "content-type": "application/x-www-form-urlencoded"})


def test_a_signed_slack_approval_resolves_as_the_mapped_person_and_wakes_the_long_poll(gate, keys, slack_api, clock):
    record = _held(gate, keys)
    caller = Holds(gate.test_client(), keys["caller"])
    woke: list = []

    def wait():
        answer = caller.resolution(record["decision_id"], wait=10)
        woke.append((time.monotonic(), answer.get_json()))

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.3)
    sent = time.monotonic()
    answer = _signed(gate.test_client(), _interaction(record["decision_id"]), clock.now())
    assert answer.status_code == 200, answer.get_json()
    event = answer.get_json()["event"]
    assert event["actor"] == f"person:{ISSUER}#alice" and event["reason_code"] == "SLACK_APPROVE"
    waiter.join(5)
    (at, resolution), = woke
    assert at - sent < 1.0 and resolution["state"] == "approved" and resolution["approved"] is True
    assert not slack_api.calls  # the closing vote's message is the dispatcher's to update, once
    # The signed resolution verifies offline with the gate's trust anchors, as the Inbox's does.
    check = verify_resolution(record, resolution["resolution"], gate.extensions["gate"].signing.trust_anchors())
    assert check.verified and check.approved


def test_a_click_that_leaves_the_hold_open_updates_its_message_at_once_with_the_bot_token(gate, keys, slack_api,
                                                                                          clock):
    """One of a quorum of two: the hold stays open and the click's own request tells the message how
    it stands, through the Slack API the settings name, with the bot token; the closing click's
    message is the dispatcher's (issue 65)."""
    admin = Holds(gate.test_client(), keys["admin"])
    assert admin.put_policy(policy({"default": queue(quorum="two")})).status_code == 200
    record = _held(gate, keys)
    answer = _signed(gate.test_client(), _interaction(record["decision_id"]), clock.now())
    assert answer.status_code == 200 and answer.get_json()["hold"]["state"] == "open", answer.get_json()
    (method, update, auth), = slack_api.calls
    assert method == "chat.update" and auth == "Bearer xoxb-test"
    assert update["channel"] == "C0123CHANNEL" and update["ts"] == "1700000000.000100"
    assert f"Decision {record['decision_id']}: open (by person:{ISSUER}#alice)." in json.dumps(update)


def test_without_a_bot_token_a_click_resolves_and_no_update_is_tried(make_app, keys, grants, clock, caplog):
    """A vote that leaves the hold open would update its message: with no bot token nothing is
    tried (nor logged as failed); the vote stands."""
    app = make_app({"GATE_SLACK_SIGNING_SECRET": SECRET, "GATE_GRANTS_FILE": str(grants)}, clock=clock)
    assert Holds(app.test_client(), keys["admin"]).put_policy(policy({"default": queue(quorum="two")})).status_code == 200
    record = _held(app, keys)
    with caplog.at_level(logging.WARNING, logger="gate.notify"):
        answer = _signed(app.test_client(), _interaction(record["decision_id"]), clock.now())
    assert answer.status_code == 200 and answer.get_json()["hold"]["state"] == "open"
    assert answer.get_json()["hold"]["approvals"], answer.get_json()
    assert [r.getMessage() for r in caplog.records if r.name == "gate.notify"] == []


def test_a_digest_s_message_keeps_the_other_holds_buttons_once_one_is_resolved(gate, keys, slack_api, clock):
    """A click that closes a hold updates its message once (issue 65: the click and the dispatcher
    both sent the same `chat.update`, 12 ms apart), from the dispatcher's pass."""
    admin = Holds(gate.test_client(), keys["admin"])
    assert admin.put_policy(_policy(_channels(every=120, email=()))).status_code == 200
    first, second = _held(gate, keys), _held(gate, keys, margin_percent=11)
    clock.advance(121)
    assert _pass(gate, "slack") == 1
    blocks = _blocks_of(slack_api.calls[0])
    answer = _signed(gate.test_client(), _interaction(first["decision_id"], action="hold_deny",
                                                      message={"blocks": blocks}), clock.now())
    assert answer.status_code == 200 and answer.get_json()["hold"]["state"] == "denied"
    assert len(slack_api.calls) == 1
    assert _pass(gate, "slack") == 1 and _pass(gate, "slack") == 0
    (_, update, _), = [c for c in slack_api.calls if c[0] == "chat.update"]
    kept = update["blocks"] if isinstance(update["blocks"], list) else json.loads(update["blocks"])
    assert len(kept) == len(blocks)
    buttons = [e["value"] for b in kept if b["type"] == "actions" for e in b["elements"] if "value" in e]
    assert buttons == [second["decision_id"]] * 2  # the denied hold's buttons are gone, the other's stay
    assert f"Decision {first['decision_id']}: denied" in json.dumps(kept)


def test_slack_interactions_refused_change_nothing(gate, keys, make_app, clock, grants):
    record = _held(gate, keys)
    client = gate.test_client()
    at = clock.now()
    body = _interaction(record["decision_id"])
    cases = [
        (_signed(client, body, at, secret="x" * 32), 401, "SLACK_SIGNATURE_INVALID"),
        (client.post("/api/integrations/slack/interactions", data=body,
                     headers={"X-Slack-Request-Timestamp": str(int(at.timestamp()))}), 401, "SLACK_SIGNATURE_INVALID"),
        (_signed(client, body, at, stamp=str(int(at.timestamp()) - 301)), 401, "SLACK_REQUEST_STALE"),
        (_signed(client, body, at, stamp="soon"), 401, "SLACK_REQUEST_STALE"),
        (_signed(client, _interaction(record["decision_id"], user="U0009NOBODY"), at), 403, "SLACK_USER_UNKNOWN"),
        (_signed(client, _interaction(record["decision_id"], user=BOB), at), 403, "HOLD_PERMISSION_DENIED"),
        (_signed(client, _interaction(record["decision_id"], action="hold_maybe"), at), 400,
         "SLACK_INTERACTION_INVALID"),
        (_signed(client, _interaction(record["decision_id"], type="view_submission"), at), 400,
         "SLACK_INTERACTION_INVALID"),
        (_signed(client, b"payload=%7Bnot+json", at), 400, "SLACK_INTERACTION_INVALID"),
        (_signed(client, _interaction("dec_nope"), at), 404, "HOLD_NOT_FOUND"),
        (_signed(client, b"payload=" + b"x" * (64 * 1024), at), 413, "REQUEST_TOO_LARGE"),
    ]
    for answer, status, code in cases:
        assert (answer.status_code, answer.get_json()["error"]) == (status, code), answer.get_json()
    unconfigured = make_app()
    answer = _signed(unconfigured.test_client(), body, at)
    assert (answer.status_code, answer.get_json()["error"]) == (503, "SLACK_NOT_CONFIGURED")
    shown = Holds(gate.test_client(), keys["caller"]).resolution(record["decision_id"]).get_json()
    assert shown["state"] == "open" and shown["hold"]["approvals"] == [] and shown["resolution"] is None


def test_a_slack_user_mapped_to_another_issuer_s_subject_holds_none_of_its_roles(gate, keys, clock, grants):
    """Issue 64: the grants file matches a person by issuer and subject. A Slack user mapped to
    `person:https://evil.example#alice` is not alice of the file's issuer: it holds none of her
    roles (403, nothing changes), so it is no second holder either; alice's own click still acts."""
    record = _held(gate, keys)
    client = gate.test_client()
    refused = _signed(client, _interaction(record["decision_id"], user=EVIL), clock.now())
    assert (refused.status_code, refused.get_json()["error"]) == (403, "HOLD_PERMISSION_DENIED"), refused.get_json()
    shown = Holds(client, keys["caller"]).resolution(record["decision_id"]).get_json()
    assert shown["state"] == "open" and shown["hold"]["approvals"] == []
    grants.write_text(json.dumps({**json.loads(grants.read_text()), "issuer": None}))  # a file stating none
    unusable = _signed(client, _interaction(record["decision_id"]), clock.now())
    assert (unusable.status_code, unusable.get_json()["error"]) == (503, "SLACK_NOT_CONFIGURED")
    grants.write_text(json.dumps({**json.loads(grants.read_text()), "issuer": ISSUER}))
    answer = _signed(client, _interaction(record["decision_id"]), clock.now())
    assert answer.status_code == 200 and answer.get_json()["event"]["actor"] == f"person:{ISSUER}#alice"


def test_the_running_dispatcher_sends_both_within_five_seconds_of_the_hold(make_app, issue_key, smtp, slack_api):
    app = make_app({"GATE_SMTP_URL": smtp.url, "GATE_SMTP_FROM": "gate@example.org",
                    "GATE_SLACK_BOT_TOKEN": "xoxb-test", "GATE_SLACK_API_URL": slack_api.url,
                    "GATE_EVENTS_INTERVAL_MS": "200"})
    admin = Holds(app.test_client(), issue_key(permissions="decide,admin")["api_key"])
    assert admin.put_policy(_policy(_channels())).status_code == 200
    dispatcher = app.extensions["gate"].dispatcher
    dispatcher.start()
    try:
        record = Holds(app.test_client(), issue_key(permissions="decide")["api_key"]).decide(held_request()).get_json()
        opened = time.monotonic()  # the hold exists once its decide has answered (a loaded host slows the decide too)
        while (not smtp.messages or not slack_api.calls) and time.monotonic() - opened < 5:
            time.sleep(0.05)
        took = time.monotonic() - opened
    finally:
        dispatcher.stop()
    assert took < 5 and record["decision_id"] in smtp.messages[0][1].get_body(("plain",)).get_content()
    assert record["decision_id"] in json.dumps(slack_api.calls[0][1])


@pytest.mark.parametrize(("env", "says"), [
    ({"GATE_SMTP_URL": "http://mail.example"}, "GATE_SMTP_URL must be"),
    ({"GATE_SMTP_URL": "smtp://mail.example:port", "GATE_SMTP_FROM": "g@example.org"}, "GATE_SMTP_URL must be"),
    ({"GATE_SMTP_URL": "smtp://mail.example"}, "needs GATE_SMTP_FROM"),
    ({"GATE_SMTP_URL": "smtps://u:p@mail.example", "GATE_SMTP_FROM": "Gate <g@example.org>"}, "GATE_SMTP_FROM must"),
    ({"GATE_SLACK_API_URL": "ftp://slack.example"}, "GATE_SLACK_API_URL must"),
])
def test_channel_settings_are_refused_before_anything_starts(env, says):
    from gate.settings import Settings, SettingsError

    with pytest.raises(SettingsError, match=says):
        Settings.from_env(env)
    settings = Settings.from_env({"GATE_SMTP_URL": "smtps://u%40x:p@mail.example:465", "GATE_SMTP_FROM": "g@example.org"})
    assert "p@mail" not in repr(settings)  # the URL's password is never shown


def test_one_dispatcher_at_a_time_holds_a_channel_s_lease(backend, make_app):
    from gate.ledger.outbox import Outbox

    outbox = Outbox(make_app().extensions["gate"].ledger)
    assert outbox.claim_stream("notify-lease.email", "s", now=100, until=160)
    assert not outbox.claim_stream("notify-lease.email", "s", now=120, until=180)  # held by the first
    assert outbox.claim_stream("notify-lease.email", "other", now=120, until=180)  # another scope's is free
    outbox.release_stream("notify-lease.email", "s", until=999)  # not its lease: nothing changes
    assert not outbox.claim_stream("notify-lease.email", "s", now=130, until=190)
    outbox.release_stream("notify-lease.email", "s", until=160)
    assert outbox.claim_stream("notify-lease.email", "s", now=130, until=190)
    assert outbox.claim_stream("notify-lease.email", "s", now=190, until=250)  # a dead holder's lease ran out
    assert outbox.stream_cursor("notify.email", "s", missing=-1) == -1


# -- a hold closed elsewhere ------------------------------------------------------------------------

def _blocks_of(call):
    blocks = call[1]["blocks"]
    return blocks if isinstance(blocks, list) else json.loads(blocks)


def test_a_hold_closed_elsewhere_updates_its_slack_message_from_the_dispatcher_not_the_request(
        gate, keys, slack_api, clock):
    admin = Holds(gate.test_client(), keys["admin"])
    assert admin.put_policy(_policy(_channels(every=120, email=()))).status_code == 200
    first, second = _held(gate, keys), _held(gate, keys, margin_percent=11)
    clock.advance(121)
    assert _pass(gate, "slack") == 1  # one digest message shows both
    (posted,) = slack_api.calls
    reviewer = Holds(gate.test_client(), _reviewer_key(gate))
    assert reviewer.resolve(first["decision_id"], "deny").status_code == 201
    assert len(slack_api.calls) == 1  # never on the resolving request's path
    assert _pass(gate, "slack") == 1
    (method, update, _) = slack_api.calls[1]
    assert method == "chat.update" and update["ts"] == "1700000000.000100" and update["channel"] == "C0123CHANNEL"
    kept = _blocks_of(slack_api.calls[1])
    assert len(kept) == len(_blocks_of(posted))
    buttons = [e["value"] for b in kept if b["type"] == "actions" for e in b["elements"] if "value" in e]
    assert buttons == [second["decision_id"]] * 2  # the other hold's buttons stay
    assert f"Decision {first['decision_id']}: denied (by " in json.dumps(kept)
    assert _pass(gate, "slack") == 0  # told once
    slack = next(c for c in _notifier(gate).channels if c.name == "slack")
    assert slack.closed("tenant_a", first["decision_id"]) is False and len(slack_api.calls) == 2  # even if asked again
    # The second one expires: the message, as last updated, loses its last buttons.
    clock.advance(7 * 24 * 3600)
    gate.extensions["gate"].holds.sweep()
    assert _pass(gate, "slack") == 1
    last = _blocks_of(slack_api.calls[2])
    assert not [b for b in last if b["type"] == "actions"]
    assert f"Decision {second['decision_id']}: expired" in json.dumps(last) and "denied" in json.dumps(last)


def test_a_refused_click_is_told_to_the_clicker_alone_through_a_slack_response_url_only(gate, keys, slack_api, clock):
    from gate.errors import GateError
    from gate.services.slack_actions import responder

    record = _held(gate, keys)
    client = gate.test_client()
    feedback = slack_api.url + "respond/T0001/B0001/xyz"
    answer = _signed(client, _interaction(record["decision_id"], user=BOB, response_url=feedback), clock.now())
    assert (answer.status_code, answer.get_json()["error"]) == (403, "HOLD_PERMISSION_DENIED")  # as documented
    (path, told, _), = slack_api.calls
    assert path == "xyz" and told["response_type"] == "ephemeral" and told["replace_original"] is False
    assert "HOLD_PERMISSION_DENIED" in told["text"] and "not recorded" in told["text"]
    answer = _signed(client, _interaction(record["decision_id"], user="U0009NOBODY", response_url=feedback),
                     clock.now())
    assert answer.status_code == 403 and "SLACK_USER_UNKNOWN" in slack_api.calls[1][1]["text"]
    # SECURITY (SSRF): a response_url elsewhere is never called; the refusal is answered as ever.
    port = slack_api.server_address[1]
    for elsewhere in (f"http://127.0.0.2:{port}/api/x", f"http://127.0.0.1:{port + 1}/x",
                      "http://169.254.169.254/latest/meta-data", f"https://127.0.0.1:{port}/api/x"):
        answer = _signed(client, _interaction(record["decision_id"], user=BOB, response_url=elsewhere), clock.now())
        assert answer.status_code == 403
    assert len(slack_api.calls) == 2
    respond = responder("https://slack.com/api/", Outbound())
    for bad in ("https://hooks.slack.com.evil.example/x", "http://hooks.slack.com/x",
                "https://u:p@hooks.slack.com/x", "https://hooks.slack.com/x\r\nHost: evil"):
        with pytest.raises(GateError) as refused:
            respond(bad, "t")
        assert refused.value.code == "EVENT_TARGET_REFUSED", bad
    shown = Holds(client, keys["caller"]).resolution(record["decision_id"]).get_json()
    assert shown["state"] == "open" and shown["hold"]["approvals"] == []


def test_a_click_is_a_vote_with_slack_s_reason_code_which_a_queue_s_list_must_name(gate, keys, slack_api, clock):
    """Issue 65: a queue's `reason_codes` hold for a Slack click too (its code is SLACK_APPROVE or
    SLACK_DENY): outside the list, the click is refused, told to the clicker, and changes nothing."""
    admin = Holds(gate.test_client(), keys["admin"])
    codes = {"approve": ["CHECKED_INVOICE"], "deny": ["NOT_IN_CONTRACT", "SLACK_DENY"]}
    assert admin.put_policy(policy({"default": {**queue(), "reason_codes": codes}})).status_code == 200
    record = _held(gate, keys)
    feedback = slack_api.url + "respond/T0001/B0001/xyz"
    answer = _signed(gate.test_client(), _interaction(record["decision_id"], response_url=feedback), clock.now())
    assert (answer.status_code, answer.get_json()["error"]) == (400, "HOLD_RESOLUTION_INVALID")
    (path, told, _), = slack_api.calls
    assert path == "xyz" and "not recorded" in told["text"] and "HOLD_RESOLUTION_INVALID" in told["text"]
    assert "SLACK_APPROVE" in told["text"] and "CHECKED_INVOICE" in told["text"]
    shown = Holds(gate.test_client(), keys["caller"]).resolution(record["decision_id"]).get_json()
    assert shown["state"] == "open" and shown["hold"]["approvals"] == []
    answer = _signed(gate.test_client(), _interaction(record["decision_id"], action="hold_deny"), clock.now())
    assert answer.status_code == 200 and answer.get_json()["hold"]["state"] == "denied"
    assert answer.get_json()["event"]["reason_code"] == "SLACK_DENY"


def test_an_escalated_hold_is_told_to_the_next_queue_s_channels_at_once(gate, keys, smtp, slack_api, clock):
    admin = Holds(gate.test_client(), keys["admin"])
    leads = {**queue(), "notify": _channels(every=600, email=("leads@example.org",), slack="C0999LEADS")}
    queues = {"default": {**queue(escalate_after=60, escalate_to="leads"),
                          "notify": _channels(email=("desk@example.org",), slack=None)},
              "leads": leads}
    assert admin.put_policy(policy(queues)).status_code == 200
    by_clock, by_hand = _held(gate, keys), _held(gate, keys, margin_percent=11)
    assert _pass(gate, "email") == 2 and _pass(gate, "slack") == 0  # the desk is told; the leads not yet
    assert [r for r, _ in smtp.messages] == [["desk@example.org"]] * 2
    reviewer = Holds(gate.test_client(), _reviewer_key(gate))
    assert reviewer.act(by_hand["decision_id"], "escalate").status_code == 201
    clock.advance(61)
    gate.extensions["gate"].holds.sweep()  # the clock escalates the other
    assert _pass(gate, "email") == 2 and _pass(gate, "slack") == 2  # at once, whatever the leads' digest
    told = [(r, m.get_body(("plain",)).get_content()) for r, m in smtp.messages[2:]]
    assert {r[0] for r, _ in told} == {"leads@example.org"}
    assert by_hand["decision_id"] in told[0][1] and "Queue leads" in told[0][1] and by_clock["decision_id"] in told[1][1]
    assert {c[1]["channel"] for c in slack_api.calls} == {"C0999LEADS"}
    assert _pass(gate, "email") == 0 and _pass(gate, "slack") == 0
    clock.advance(700)
    assert _pass(gate, "email") == 0  # nor told again by the leads' digest
    # An escalation that finds no queue left to go to (the policy changed since) tells nobody again.
    stays = _held(gate, keys, margin_percent=10)
    assert _pass(gate, "email") == 1
    queues["default"] = {**queue(), "notify": _channels(email=("desk@example.org",), slack=None)}
    assert admin.put_policy(policy(queues)).status_code == 200
    clock.advance(61)
    assert gate.extensions["gate"].holds.sweep() == 1
    moved = gate.extensions["gate"].holds.holds.events_of("tenant_a", stays["decision_id"])[-1]
    assert (moved["action"], moved["queue"], moved["note"]) == ("escalate", "default", "no queue to escalate to")
    assert _pass(gate, "email") == 0 and len(smtp.messages) == 5


def test_a_needs_input_notice_names_the_missing_fact_and_a_fact_name_stays_on_one_line(gate, keys, smtp, slack_api):
    """Issue 65: a needs-input e-mail did not name the fact the request lacked, and a fact *name*
    with CR/LF kept its line breaks in the HTML part."""
    admin = Holds(gate.test_client(), keys["admin"])
    assert admin.put_policy(_policy(_channels())).status_code == 200
    body = held_request()
    del body["context"]["inputs"]["margin_percent"]
    body["context"]["inputs"]["note\r\nBcc: x@evil.example"] = "<b>x</b>"
    record = Holds(gate.test_client(), keys["caller"]).decide(body).get_json()
    assert record["status"] == "needs_input" and record["missing_fields"] == ["margin_percent"], record
    assert _pass(gate, "email") == 1 and _pass(gate, "slack") == 1
    (_, message), = smtp.messages
    text = message.get_body(("plain",)).get_content()
    page = message.get_body(("html",)).get_content()
    assert "The request lacks facts: missing margin_percent." in text
    assert "<p><b>The request lacks facts: missing margin_percent.</b></p>" in page
    assert "note  Bcc: x@evil.example" in page and "\r\nBcc" not in page and "\nBcc" not in page
    assert "&lt;b&gt;x&lt;/b&gt;" not in page and "<b>x</b>" not in page  # its value is masked: not in `show`
    (_, data, _), = slack_api.calls
    blocks = data["blocks"] if isinstance(data["blocks"], list) else json.loads(data["blocks"])
    assert "The request lacks facts: missing margin_percent." in blocks[0]["text"]["text"]


def test_a_hold_with_every_fact_says_nothing_lacks(gate, keys, smtp):
    admin = Holds(gate.test_client(), keys["admin"])
    assert admin.put_policy(_policy(_channels(slack=None))).status_code == 200
    _held(gate, keys)
    assert _pass(gate, "email") == 1
    (_, message), = smtp.messages
    assert "lacks facts" not in message.get_body(("plain",)).get_content()


# -- the request first, and what a queue shows (issue 65) ------------------------------------------

def _refund_notices(gate, keys, smtp, slack_api):
    record = Holds(gate.test_client(), keys["caller"]).decide(refund_held()).get_json()
    assert record["verdict"] == "review", record
    assert _pass(gate, "email") == 1 and _pass(gate, "slack") == 1
    (_, message), = smtp.messages[-1:]
    (_, data, _), = slack_api.calls[-1:]
    blocks = data["blocks"] if isinstance(data["blocks"], list) else json.loads(data["blocks"])
    return (message.get_body(("plain",)).get_content(), message.get_body(("html",)).get_content(),
            blocks[0]["text"]["text"], message["Subject"])


def test_a_held_refund_states_its_signed_request_first_and_masks_what_the_queue_does_not_show(
        gate, keys, smtp, slack_api):
    admin = Holds(gate.test_client(), keys["admin"])
    assert admin.put_policy(_policy(_channels())).status_code == 200  # the default `show`
    text, page, slack, subject = _refund_notices(gate, keys, smtp, slack_api)
    assert "issue_refund ord_7731" in subject
    for told in (text, page, slack):
        assert "issue_refund" in told and "ord_7731" in told and "129" in told and "billing" in told
        assert "Refund order ord_7731 bought on 2026-05-01" in told
        assert "ticket_5521" not in told and "support_refunds" not in told  # not in the default `show`
        assert "•••" in told and "open the hold in the Inbox" in told
    # first, above the facts; the facts' values masked, their names kept
    assert text.index("issue_refund") < text.index("Facts:") and slack.index("ord_7731") < slack.index("Review needed")
    assert page.index("ord_7731") < page.index("days_since_purchase")
    assert '"days_since_purchase": •••' in text and "days_since_purchase: •••" in slack
    assert '"days_since_purchase": 40' not in text and "days_since_purchase: 40" not in slack
    assert "Source record: •••" in text and "Source record: •••" in slack
    assert "Request (as signed: the stored request bound to the record's input_hash)" in text


def test_a_queue_shows_the_facts_and_members_it_names(gate, keys, smtp, slack_api):
    admin = Holds(gate.test_client(), keys["admin"])
    show = ["requested_action", "target_object_id", "source_record_id", "facts.days_since_purchase"]
    assert admin.put_policy(_policy(_channels(), show=show)).status_code == 200
    text, page, slack, _ = _refund_notices(gate, keys, smtp, slack_api)
    for told in (text, slack):
        assert "Source record: ticket_5521" in told and "Amount: •••" in told and "Question: •••" in told
        assert "Refund order" not in told and "129" not in told
    assert '"days_since_purchase": 40' in text and "days_since_purchase: 40" in slack
    assert '"within_window": •••' in text and "within_window: •••" in slack
    assert "<td><code>40</code></td>" in page and "Refund order" not in page


_SHOW_REFUSED = [(["question", "password"], "must be distinct names"), (["facts."], "must be distinct names"),
                 (["facts.a b"], "must be distinct names"), (["question", "question"], "must be distinct names"),
                 ("question", "must be distinct names")]


def test_a_queue_s_show_is_checked_and_a_refusal_changes_nothing(gate, keys):
    admin = Holds(gate.test_client(), keys["admin"])
    before = admin.client.get("/api/holds/policy", headers=admin.h()).get_json()["policy"]
    for show, says in _SHOW_REFUSED:
        answer = admin.put_policy(_policy(_channels(), show=show))
        assert answer.status_code == 400 and answer.get_json()["error"] == "HOLD_POLICY_INVALID", show
        assert says in answer.get_json()["message"], show
    assert admin.client.get("/api/holds/policy", headers=admin.h()).get_json()["policy"] == before
    # the default is not stated back; another `show` is, as stated
    assert "show" not in HoldPolicy.from_json(_policy(_channels())).to_json()["queues"]["default"]
    stated = HoldPolicy.from_json(_policy(_channels(), show=["facts.x", "question"]))
    assert stated.to_json()["queues"]["default"]["show"] == ["facts.x", "question"]


def test_widening_what_a_queue_shows_is_a_weakening_narrowing_it_is_not():
    base = HoldPolicy.from_json(_policy(_channels()))
    wider = HoldPolicy.from_json(_policy(_channels(), show=["question", "facts.days_since_purchase"]))
    narrower = HoldPolicy.from_json(_policy(_channels(), show=["question"]))
    silent = HoldPolicy.from_json(policy({"default": {**queue(), "show": ["facts.days_since_purchase"]}}))
    assert weakenings(base, wider) == ("queues.default.show",)
    assert weakenings(base, narrower) == () and weakenings(wider, narrower) == ()
    assert weakenings(wider, base) == ("queues.default.show",)  # base names members wider masked
    assert weakenings(HoldPolicy.from_json(policy()), silent) == ()  # a queue without channels sends nothing
    assert weakenings(silent, wider) == ("queues.default.notify",)  # its channels are new recipients
    # a route to a queue whose channels show more is a weakening of that route
    routes = [{"policy_id": "refund_window_gate", "rule_id": None, "queue": "loud", "priority": "normal"}]
    quiet = policy({"default": {**queue(), "notify": _channels()},
                    "loud": {**queue(), "notify": _channels(), "show": ["question"]}})
    loud = policy({"default": {**queue(), "notify": _channels()},
                   "loud": {**queue(), "notify": _channels(), "show": ["question", "facts.within_window"]}})
    assert weakenings(HoldPolicy.from_json(quiet), HoldPolicy.from_json({**quiet, "routes": routes})) == ()
    assert weakenings(HoldPolicy.from_json({**quiet, "routes": routes}),
                      HoldPolicy.from_json({**loud, "routes": routes})) == ("queues.loud.show",)
    assert "routes[refund_window_gate/*]" in weakenings(HoldPolicy.from_json(quiet),
                                                       HoldPolicy.from_json({**loud, "routes": routes}))
    # a move to a queue whose channels show a reached recipient more is refused (`show`), one that shows less is not
    held_in = HoldPolicy.from_json(quiet).queue("loud")
    louder, quieter = HoldPolicy.from_json(loud).queue("loud"), HoldPolicy.from_json(policy(
        {"default": {**queue(), "notify": _channels(), "show": []}})).queue("default")
    assert held_in is not None and louder is not None and quieter is not None
    reached = recipients((held_in,)) | disclosed((held_in,))
    assert move_loosens(held_in.guard(), reached, louder) == ["show"]
    assert move_loosens(held_in.guard(), reached, quieter) == []
