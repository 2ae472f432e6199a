"""Slack's Approve and Deny, each guard alone (issue 63 item 8; gate/services/slack_actions.py,
api/routes/integrations.py): the staleness boundary on the gate's clock, the signature, every
check of the payload's ids, the response_url host allow-list with a recording outbound client (so
no DNS or closed port decides), Slack's non-200 answer, the message update and the one
SLACK_NOT_CONFIGURED check of the route."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from datetime import UTC, datetime
from urllib.parse import urlencode

import pytest

from gate.errors import GateError
from gate.events.notices import Notice, slack_blocks
from gate.events.outbound import Answer
from gate.events.targets import TargetRefused
from gate.services.slack_actions import (
    STALE_SECONDS,
    SlackActions,
    mrkdwn_escape,
    parse,
    responder,
    verify,
)
from tests.holds.support import MovingClock

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
AT = datetime(2026, 11, 27, 12, 0, 0, tzinfo=UTC)
TEAM, USER = "T0001TEAM", "U0001ALICE"


def _sign(body: bytes, stamp: str, secret: str = SECRET) -> str:
    return "v0=" + hmac.new(secret.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256).hexdigest()


def _code(call) -> str:
    with pytest.raises(GateError) as refused:
        call()
    return refused.value.code


def test_the_staleness_boundary_is_five_minutes_either_way_on_the_gate_s_clock():
    clock, body = MovingClock(AT), b"payload=x"
    now = int(AT.timestamp())
    for offset in (-STALE_SECONDS, 0, STALE_SECONDS):
        stamp = str(now + offset)
        verify(SECRET, clock, body, stamp, _sign(body, stamp))  # within: taken
    for offset in (-STALE_SECONDS - 1, STALE_SECONDS + 1):
        stamp = str(now + offset)
        assert _code(lambda s=stamp: verify(SECRET, clock, body, s, _sign(body, s))) == "SLACK_REQUEST_STALE"
    assert STALE_SECONDS == 300
    for stamp in (None, "", "12a", "-1", " 1", "1" * 13):
        assert _code(lambda s=stamp: verify(SECRET, clock, body, s, "v0=00")) == "SLACK_REQUEST_STALE", stamp
    clock.advance(10**11)  # a twelve-digit timestamp is read as a number
    far = str(int(clock.now().timestamp()))
    assert len(far) == 12
    verify(SECRET, clock, body, far, _sign(body, far))


def test_the_signature_is_over_the_exact_body_with_the_secret():
    clock, body, stamp = MovingClock(AT), b"payload=x", str(int(AT.timestamp()))
    good = _sign(body, stamp)
    for signature, text in ((None, body), ("", body), (_sign(body, stamp, "another-secret-" * 3), body),
                            (good, body + b"y"), (_sign(b"\xff", stamp), b"\xff"),
                            # not UTF-8: refused, even with the signature of an empty body
                            (_sign(b"", stamp), b"\xff")):
        assert _code(lambda s=signature, t=text: verify(SECRET, clock, t, stamp, s)) == "SLACK_SIGNATURE_INVALID"


def _payload(**changes):
    body = {"type": "block_actions", "team": {"id": TEAM}, "user": {"id": USER, "team_id": TEAM},
            "actions": [{"action_id": "hold_approve", "value": "dec_1"}],
            "container": {"channel_id": "C0123", "message_ts": "1700000000.000100"},
            "message": {"blocks": [{"type": "section"}]}, "response_url": "https://hooks.slack.com/a"}
    for key, value in changes.items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value
    return urlencode({"payload": json.dumps(body)}).encode()


def test_a_well_formed_interaction_is_read_member_by_member():
    assert parse(_payload()) == {"action": "hold_approve", "decision_id": "dec_1", "team_id": TEAM, "user_id": USER,
                                 "response_url": "https://hooks.slack.com/a", "channel": "C0123",
                                 "message_ts": "1700000000.000100", "blocks": [{"type": "section"}]}
    deny = parse(_payload(actions=[{"action_id": "hold_deny", "value": "a:b.c-d_" + "e" * 120}]))
    assert deny["action"] == "hold_deny" and deny["decision_id"] == "a:b.c-d_" + "e" * 120
    # The team from the user when the payload names none; what is not of its type is None.
    loose = parse(_payload(team=None, container={"channel_id": 5, "message_ts": 6}, message={"blocks": [1]},
                           response_url=7))
    assert (loose["team_id"], loose["channel"], loose["message_ts"], loose["blocks"], loose["response_url"]) == (
        TEAM, None, None, None, None)
    assert parse(_payload(team="T0001TEAM", container=None, message=None))["team_id"] == TEAM
    assert parse(_payload(container=None, message=None))["channel"] is None


@pytest.mark.parametrize("body", [
    b"\xff", b"payload=%7B", b"other=1", b"payload=1&payload=2&a=1&b=2&c=3&d=4", b"payload=",
    _payload(type="view_submission"), _payload(type=None),
    _payload(actions=[]), _payload(actions={"action_id": "hold_approve"}), _payload(actions=["x"]),
    _payload(actions=[{"action_id": "hold_open", "value": "dec_1"}]),
    _payload(actions=[{"action_id": "hold_approve", "value": "dec_1"}, {"action_id": "hold_deny", "value": "d"}]),
    _payload(actions=[{"action_id": "hold_approve", "value": 5}]),
    _payload(actions=[{"action_id": "hold_approve", "value": "e" * 129}]),
    _payload(actions=[{"action_id": "hold_approve", "value": "a b"}]),
    _payload(actions=[{"action_id": "hold_approve", "value": ""}]),
    _payload(user=None), _payload(user="U0001ALICE"),
    _payload(user={"id": "u0001alice", "team_id": TEAM}), _payload(user={"id": "U", "team_id": TEAM}),
    _payload(user={"id": "U" * 33, "team_id": TEAM}), _payload(user={"id": 5, "team_id": TEAM}),
    _payload(user={"team_id": TEAM}),
    _payload(team={"id": "t0001"}), _payload(team={"id": 7}, user={"id": USER}), _payload(team=None, user={"id": USER}),
    _payload(team={"id": "T" * 33}),
])
def test_each_id_check_refuses_alone(body):
    assert _code(lambda: parse(body)) == "SLACK_INTERACTION_INVALID"


def test_the_form_is_parsed_strictly_and_bounded_to_five_fields():
    assert parse(_payload() + b"&a=1&b=2&c=3&d=4")["decision_id"] == "dec_1"  # five fields: read
    for body in (_payload() + b"&a=1&b=2&c=3&d=4&e=5", _payload() + b"&junk", _payload() + b"&&"):
        with pytest.raises(GateError) as refused:
            parse(body)
        assert (refused.value.code, refused.value.message) == (
            "SLACK_INTERACTION_INVALID", "the body must be a form with one payload member of JSON")
    with pytest.raises(GateError) as refused:
        parse(_payload(type="view_submission"))
    assert refused.value.message == "only block_actions interactions are answered"


class Holds:
    """The hold service as SlackActions calls it, recording the calls."""

    def __init__(self, scope="tenant_a", answer=None):
        self.scope, self.calls = scope, []
        self.answer = answer or {"ok": True, "event": {"actor": "person:https://idp.example#alice"},
                                 "hold": {"state": "approved"}}
        self.holds = self

    def scope_of(self, decision_id):
        return self.scope

    def resolve(self, scope, person, permissions, decision_id, body):
        self.calls.append((scope, person.id, sorted(permissions), decision_id, body))
        return self.answer


@pytest.fixture
def grants(tmp_path):
    path = tmp_path / "grants.json"
    path.write_text(json.dumps({"issuer": "https://idp.example", "users": {"alice": {"tenant_a": ["reviewer"]}},
                                "slack": {f"{TEAM}/{USER}": "person:https://idp.example#alice"}}))
    return path


def _interaction(**changes):
    return {**parse(_payload()), **changes}


def test_the_vote_is_the_mapped_person_s_and_the_message_is_updated(grants):
    holds, updates = Holds(), []
    actions = SlackActions(holds, grants, lambda **kw: updates.append(kw))
    assert actions.act(_interaction()) == holds.answer
    (scope, person, permissions, decision_id, body), = holds.calls
    assert (scope, person, decision_id) == ("tenant_a", "https://idp.example#alice", "dec_1")
    assert "resolve" in permissions and body == {"decision": "approve", "reason_code": "SLACK_APPROVE"}
    assert updates == []  # a vote that closes the hold: the dispatcher updates its message, once (issue 65)
    actions.act(_interaction(action="hold_deny"))
    assert holds.calls[1][4] == {"decision": "deny", "reason_code": "SLACK_DENY"} and updates == []
    # A vote that leaves the hold open: the message says how it stands and who voted.
    holds.answer = {"ok": True, "event": {"actor": "person:https://idp.example#alice"}, "hold": {"state": "open"}}
    actions.act(_interaction())
    (update,) = updates
    assert (update["channel"], update["ts"], update["text"]) == ("C0123", "1700000000.000100", "Decision dec_1: open")
    assert "Decision dec_1: open (by person:https://idp.example#alice)." in json.dumps(update["blocks"])
    holds.answer = {"ok": True, "hold": {"state": "open"}}  # an answer without its event
    actions.act(_interaction())
    assert "(by ?)" in json.dumps(updates[-1]["blocks"])
    holds.answer = {"ok": True}  # an answer that says nothing of the hold: nothing is claimed
    actions.act(_interaction())
    assert len(updates) == 2


def test_an_open_hold_s_update_keeps_the_other_holds_of_its_message(grants):
    """A digest's message: the vote's hold says how it stands, the other hold keeps its buttons."""
    holds, updates = Holds(answer={"ok": True, "event": {"actor": "person:https://idp.example#alice"},
                                   "hold": {"state": "open"}}), []
    notices = [Notice("tenant_a", d, "default", "normal", "2030-01-01T00:00:00Z", "p", None, None, {}, None)
               for d in ("dec_1", "dec_2")]
    blocks = slack_blocks(notices)
    SlackActions(holds, grants, lambda **kw: updates.append(kw)).act(_interaction(blocks=blocks))
    (update,) = updates
    assert len(update["blocks"]) == len(blocks)
    buttons = [e["value"] for b in update["blocks"] if b["type"] == "actions" for e in b["elements"] if "value" in e]
    assert buttons == ["dec_2", "dec_2"]


def test_the_message_is_updated_only_when_it_can_be_and_a_failed_update_changes_nothing(grants, caplog):
    holds, updates = Holds(answer={"ok": True, "event": {"actor": "person:https://idp.example#alice"},
                                   "hold": {"state": "open"}}), []
    for interaction in (_interaction(channel=None), _interaction(message_ts=None)):
        SlackActions(holds, grants, lambda **kw: updates.append(kw)).act(interaction)
    assert updates == [] and len(holds.calls) == 2
    assert SlackActions(holds, grants, None).act(_interaction()) == holds.answer

    def failing(**kw):
        raise OSError("Slack is down")

    with caplog.at_level(logging.WARNING, logger="gate.notify"):
        assert SlackActions(holds, grants, failing).act(_interaction()) == holds.answer
    assert [r.getMessage() for r in caplog.records] == ["the Slack message of dec_1 was not updated (OSError)"]


def test_who_and_where_is_refused_and_told_to_the_clicker(grants, tmp_path, caplog):
    told = []
    actions = SlackActions(Holds(), grants, None, lambda url, text: told.append((url, text)))
    assert _code(lambda: actions.act(_interaction(user_id="U0009NOBODY"))) == "SLACK_USER_UNKNOWN"
    assert _code(lambda: actions.act(_interaction(team_id="T0009OTHER"))) == "SLACK_USER_UNKNOWN"
    with pytest.raises(GateError) as missing:
        SlackActions(Holds(scope=None), grants, None).act(_interaction())
    assert (missing.value.code, missing.value.details) == ("HOLD_NOT_FOUND", {"decision_id": "dec_1"})
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with caplog.at_level(logging.ERROR, logger="gate.notify"):
        assert _code(lambda: SlackActions(Holds(), broken, None).act(_interaction())) == "SLACK_NOT_CONFIGURED"
    (logged,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert logged.startswith("the grants file cannot be read: ") and len(logged) > len("the grants file cannot be read: None")
    assert [url for url, _ in told] == ["https://hooks.slack.com/a"] * 2
    assert told[0][1] == ("Your click was not recorded: this Slack user is not mapped to a person in the grants "
                          "file (SLACK_USER_UNKNOWN).")
    # No response_url, no responder, a responder that fails: the refusal stands as it is.
    quiet = SlackActions(Holds(), grants, None, lambda url, text: told.append((url, text)))
    assert _code(lambda: quiet.act(_interaction(user_id="U0009NOBODY", response_url=None))) == "SLACK_USER_UNKNOWN"
    assert _code(lambda: quiet.act(_interaction(user_id="U0009NOBODY", response_url=""))) == "SLACK_USER_UNKNOWN"
    assert len(told) == 2
    assert _code(lambda: SlackActions(Holds(), grants, None).act(_interaction(user_id="U0009NOBODY"))) == \
        "SLACK_USER_UNKNOWN"

    def failing(url, text):
        raise OSError("no route " + "x" * 300)

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="gate.notify"):
        assert _code(lambda: SlackActions(Holds(), grants, None, failing).act(
            _interaction(user_id="U0009NOBODY"))) == "SLACK_USER_UNKNOWN"
    (logged,) = [r.getMessage() for r in caplog.records]
    assert logged == f"the Slack feedback of a refused click was not sent (OSError: {('no route ' + 'x' * 300)[:200]})"


def test_mrkdwn_is_escaped():
    assert mrkdwn_escape("a & <b> <!here> &amp;") == "a &amp; &lt;b&gt; &lt;!here&gt; &amp;amp;"


class Recording:
    """An outbound client that records each request and answers `status` (no DNS, no socket)."""

    def __init__(self, status=200):
        self.status, self.calls = status, []

    def request(self, method, url, body=None, headers=None, **options):
        self.calls.append((method, url, json.loads(body), headers, options))
        return Answer(self.status, {}, b"ok")


@pytest.mark.parametrize("url", [
    "https://hooks.slack.com/actions/T1/B1/x", "https://hooks.slack.com:443/x",
    "http://slack.internal:8080/respond", "HTTP://Slack.Internal:8080/x",
])
def test_a_response_url_on_slack_or_the_api_host_is_posted_once_without_redirects(url):
    outbound = Recording()
    responder("http://slack.internal:8080/api/", outbound, timeout=1.5)(url, "the text")
    (method, posted, body, headers, options), = outbound.calls
    assert (method, posted, body) == ("POST", url, {"text": "the text", "response_type": "ephemeral",
                                                    "replace_original": False})
    assert headers == {"Content-Type": "application/json; charset=utf-8"} and options == {"timeout": 1.5}


@pytest.mark.parametrize("url", [
    "http://hooks.slack.com/x", "https://hooks.slack.com.evil.example/x", "https://evil.example/hooks.slack.com",
    "https://slack.internal:8080/x", "http://slack.internal/x", "http://slack.internal:8081/x",
    "http://other.internal:8080/x", "https://slack.com/api/x",
])
def test_a_response_url_elsewhere_is_never_posted(url):
    outbound = Recording()
    with pytest.raises(TargetRefused):
        responder("http://slack.internal:8080/api/", outbound)(url, "t")
    assert outbound.calls == []


def test_the_clicker_is_told_within_two_seconds_unless_told_otherwise():
    outbound = Recording()
    responder("https://slack.com/api/", outbound)("https://hooks.slack.com/x", "t")
    assert outbound.calls[0][4] == {"timeout": 2.0}


def test_a_non_200_answer_from_slack_is_a_failure():
    for status in (201, 204, 302, 404, 500):
        with pytest.raises(OSError, match=str(status)):
            responder("https://slack.com/api/", Recording(status))("https://hooks.slack.com/x", "t")
    responder("https://slack.com/api/", Recording(200))("https://hooks.slack.com/x", "t")


@pytest.mark.parametrize("env", [{"GATE_SLACK_SIGNING_SECRET": SECRET}, {"GATE_GRANTS_FILE": "GRANTS"}, {}])
def test_slack_not_configured_is_one_check_of_both_before_the_body_is_read(make_app, grants, env):
    env = {k: (str(grants) if v == "GRANTS" else v) for k, v in env.items()}
    client = make_app(env).test_client()
    stamp = str(int(datetime.now(UTC).timestamp()))
    for body in (b"payload=x", b"x" * (65 * 1024)):
        answer = client.post("/api/integrations/slack/interactions", data=body,
                             headers={"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": _sign(body, stamp),
                                      "content-type": "application/x-www-form-urlencoded"})
        assert (answer.status_code, answer.get_json()["error"]) == (503, "SLACK_NOT_CONFIGURED")
    configured = make_app({"GATE_SLACK_SIGNING_SECRET": SECRET, "GATE_GRANTS_FILE": str(grants)}).test_client()
    body = _payload()
    answer = configured.post("/api/integrations/slack/interactions", data=body,
                             headers={"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": _sign(body, stamp),
                                      "content-type": "application/x-www-form-urlencoded"})
    assert (answer.status_code, answer.get_json()["error"]) == (404, "HOLD_NOT_FOUND")
