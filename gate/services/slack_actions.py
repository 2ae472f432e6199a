"""Approve and Deny from Slack (docs/integrations.md, "Reviewers' channels: e-mail and Slack").

`POST /api/integrations/slack/interactions` carries no API key: Slack signs each request (the
`v0` HMAC-SHA256 of `v0:<timestamp>:<body>` under the app's signing secret,
`GATE_SLACK_SIGNING_SECRET`), and `slack_sdk`'s `SignatureVerifier` checks it. In this order, each
refusal changing nothing:

1. no signing secret or grants file configured: `SLACK_NOT_CONFIGURED` (503);
2. a body over `MAX_BODY_BYTES`: `REQUEST_TOO_LARGE` (413), refused while it streams in, before
   any verification (the route is public: its cost is bounded before anyone is known);
3. a timestamp that is not a number or more than 5 minutes from the gate's clock:
   `SLACK_REQUEST_STALE` (401); a missing or wrong signature: `SLACK_SIGNATURE_INVALID` (401);
4. anything but a `block_actions` payload with one `hold_approve` or `hold_deny` action whose
   value is a decision id: `SLACK_INTERACTION_INVALID` (400);
5. a Slack user the grants file does not map to a person: `SLACK_USER_UNKNOWN` (403);
6. then the hold service resolves it as that person, exactly as the Inbox would: no such hold
   404 `HOLD_NOT_FOUND`; a person without the reviewer role in the hold's scope 403
   `HOLD_PERMISSION_DENIED`; four eyes, members and quorums as everywhere (a signed hold event).

A vote that leaves the hold open then updates the message (`chat.update`) to say how it stands and
by whom; a vote that closes it is told once, by the dispatcher's `notify-slack` pass from the
`hold.resolved` event, like a hold closed anywhere else. A failed update is logged and changes
nothing of the resolution. Slack shows the clicker nothing of
an answer's body, so a refusal from step 5 on is also told to the clicker alone: an ephemeral
message posted to the interaction's `response_url` (only on hooks.slack.com or the configured
API host: `responder`); the answer's status and body stay as above.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from gate.clock import Clock
from gate.errors import GateError
from gate.events.notices import APPROVE, DENY, resolved_blocks
from gate.events.outbound import Outbound
from gate.events.targets import TargetRefused
from gate.grants import AccessConfigError, Grants, load_grants
from gate.holds.events import OPEN
from gate.principals import Principal, permissions_of
from gate.services.hold_writes import HoldStep
from gate.services.holds import HoldService

log = logging.getLogger("gate.notify")

MAX_BODY_BYTES = 64 * 1024
STALE_SECONDS = 5 * 60
_TIMESTAMP = re.compile(r"^[0-9]{1,12}$")
_DECISION_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
_SLACK_ID = re.compile(r"^[A-Z0-9]{2,32}$")
SLACK_HOOKS = "hooks.slack.com"  # where Slack's response_url points
REASONS = {APPROVE: ("approve", "SLACK_APPROVE"), DENY: ("deny", "SLACK_DENY")}


def _invalid(message: str) -> GateError:
    return GateError("SLACK_INTERACTION_INVALID", message)


def _slack_clock(clock: Clock) -> Any:
    """slack_sdk's clock over the gate's clock (the tests move it)."""
    from slack_sdk.signature import Clock as SlackClock

    class GateClock(SlackClock):
        def now(self) -> float:
            return clock.now().timestamp()

    return GateClock()


def verify(secret: str, clock: Clock, body: bytes, timestamp: str | None, signature: str | None) -> None:
    """Slack's signature over the body, checked with `slack_sdk` (see the module's text; whether a
    secret is configured at all is the route's first check, made once)."""
    from slack_sdk.signature import SignatureVerifier  # the server extra carries slack_sdk

    if timestamp is None or not _TIMESTAMP.fullmatch(timestamp) \
            or abs(clock.now().timestamp() - int(timestamp)) > STALE_SECONDS:
        raise GateError("SLACK_REQUEST_STALE", "the request's X-Slack-Request-Timestamp is missing or more than "
                        "5 minutes away")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or not signature or not SignatureVerifier(secret, _slack_clock(clock)).is_valid(
            text, timestamp, signature):
        raise GateError("SLACK_SIGNATURE_INVALID", "the request's X-Slack-Signature does not verify")


def parse(body: bytes) -> dict[str, Any]:
    """The `payload` of a verified `application/x-www-form-urlencoded` body: who clicked which
    button of which message."""
    try:
        form = parse_qs(body.decode("utf-8"), strict_parsing=True, max_num_fields=5)
        payload = json.loads(form["payload"][0])
    except (UnicodeDecodeError, ValueError, KeyError, IndexError):
        raise _invalid("the body must be a form with one payload member of JSON") from None
    if not isinstance(payload, dict) or payload.get("type") != "block_actions":
        raise _invalid("only block_actions interactions are answered")
    actions, user = payload.get("actions"), payload.get("user")
    if not isinstance(actions, list) or len(actions) != 1 or not isinstance(actions[0], dict) \
            or actions[0].get("action_id") not in REASONS:
        raise _invalid("the interaction must carry one hold_approve or hold_deny action")
    decision_id = actions[0].get("value")
    if not isinstance(decision_id, str) or not _DECISION_ID.fullmatch(decision_id):
        raise _invalid("the action's value must be a decision id")
    team = (payload.get("team") or {}).get("id") if isinstance(payload.get("team"), dict) else None
    if not isinstance(user, dict):
        raise _invalid("the interaction names no user")
    team = team or user.get("team_id")
    user_id = user.get("id")
    if not isinstance(team, str) or not isinstance(user_id, str) or not _SLACK_ID.fullmatch(team) \
            or not _SLACK_ID.fullmatch(user_id):
        raise _invalid("the interaction names no Slack team and user")
    container = payload["container"] if isinstance(payload.get("container"), dict) else {}
    channel = container.get("channel_id")
    message = payload["message"] if isinstance(payload.get("message"), dict) else {}
    blocks = message.get("blocks")
    response_url = payload.get("response_url")
    return {"action": actions[0]["action_id"], "decision_id": decision_id, "team_id": team, "user_id": user_id,
            "response_url": response_url if isinstance(response_url, str) else None,
            "channel": channel if isinstance(channel, str) else None,
            "message_ts": container.get("message_ts") if isinstance(container.get("message_ts"), str) else None,
            "blocks": blocks if isinstance(blocks, list) and all(isinstance(b, dict) for b in blocks) else None}


class SlackActions:
    """The interaction's use case over the hold service (see the module's text)."""

    def __init__(self, holds: HoldService, grants_file: Path, update: Callable[..., Any] | None = None,
                 respond: Callable[[str, str], None] | None = None) -> None:
        self.holds = holds
        self.grants_file = grants_file
        self.update = update  # chat.update of the Slack client, when a bot token is configured
        self.respond = respond  # (response_url, text): the clicker's ephemeral feedback

    def person(self, team_id: str, user_id: str) -> tuple[Principal, Grants]:
        """The person the grants file maps this Slack user to, and the grants read."""
        try:
            grants = load_grants(self.grants_file)  # read each time: a revoked mapping ends at once
        except AccessConfigError as error:
            log.error("the grants file cannot be read: %s", error.message)
            raise GateError("SLACK_NOT_CONFIGURED", "the grants file cannot be read") from None
        person = grants.slack_person(team_id, user_id)
        if person is None:
            raise GateError("SLACK_USER_UNKNOWN", "this Slack user is not mapped to a person in the grants file")
        return person, grants

    def act(self, interaction: Mapping[str, Any]) -> HoldStep:
        """Resolve the hold as the mapped person; then update the Slack message. A refusal is
        told to the clicker alone (an ephemeral message through the interaction's response_url)
        and raised as it is."""
        try:
            return self._act(interaction)
        except GateError as error:
            self._refused(interaction, error)
            raise

    def _refused(self, interaction: Mapping[str, Any], error: GateError) -> None:
        url = interaction.get("response_url")
        if self.respond is None or not url:
            return
        try:
            self.respond(url, f"Your click was not recorded: {mrkdwn_escape(error.message)} ({error.code}).")
        except Exception as failure:  # noqa: BLE001 - the refusal stands; only its feedback is lost
            log.warning("the Slack feedback of a refused click was not sent (%s: %s)", type(failure).__name__,
                        str(failure)[:200])

    def _act(self, interaction: Mapping[str, Any]) -> HoldStep:
        person, grants = self.person(interaction["team_id"], interaction["user_id"])
        decision_id = interaction["decision_id"]
        scope = self.holds.holds.scope_of(decision_id)
        if scope is None:
            raise GateError("HOLD_NOT_FOUND", "no hold for this decision", decision_id=decision_id)
        permissions = permissions_of(grants.roles(_Signed(person), scope))
        vote, reason = REASONS[interaction["action"]]
        answer = self.holds.resolve(scope, person, permissions, decision_id, {"decision": vote, "reason_code": reason})
        self._tell(interaction, answer)
        return answer

    def _tell(self, interaction: Mapping[str, Any], answer: Mapping[str, Any]) -> None:
        """A vote that leaves the hold open: the message says how it stands. A vote that closes it
        is told once, by the dispatcher's `notify-slack` pass from its `hold.resolved` event (as a
        hold closed anywhere else is), never here as well (issue 65: two identical updates)."""
        state = (answer.get("hold") or {}).get("state")
        if self.update is None or not interaction["channel"] or not interaction["message_ts"] or state != OPEN:
            return
        by = answer.get("event", {}).get("actor", "?")
        try:
            self.update(channel=interaction["channel"], ts=interaction["message_ts"],
                        text=f"Decision {interaction['decision_id']}: {state}",
                        blocks=resolved_blocks(interaction["decision_id"], state, by, interaction.get("blocks")))
        except Exception as error:  # noqa: BLE001 - the resolution stands; only the message is stale
            log.warning("the Slack message of %s was not updated (%s)", interaction["decision_id"],
                        type(error).__name__)


def mrkdwn_escape(text: str) -> str:
    """Slack's escaping of `&`, `<` and `>`, so no text makes a mention or a link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def responder(api_url: str, outbound: Outbound, timeout: float = 2.0) -> Callable[[str, str], None]:
    """Posts an ephemeral message to an interaction's `response_url`. SECURITY (SSRF): the URL is
    the payload's text, so it is posted to only when its host is `hooks.slack.com` (https) or the
    host, scheme and port of the configured GATE_SLACK_API_URL, and then through the one outbound
    client (gate.events.outbound: no credentials or control characters, resolved once to public
    addresses only unless GATE_OUTBOUND_ALLOW_HOSTS names the host, connected to the address
    checked, no redirect followed); anything else raises TargetRefused, a non-200 answer OSError."""
    api = urlsplit(api_url)

    def respond(url: str, text: str) -> None:
        parts = urlsplit(url)
        if not ((parts.scheme, parts.hostname) == ("https", SLACK_HOOKS)
                or (parts.scheme, parts.hostname, parts.port) == (api.scheme, api.hostname, api.port)):
            raise TargetRefused("a response_url must be on hooks.slack.com or the GATE_SLACK_API_URL host")
        body = json.dumps({"text": text, "response_type": "ephemeral", "replace_original": False}).encode("utf-8")
        answer = outbound.request("POST", url, body, {"Content-Type": "application/json; charset=utf-8"},
                                  timeout=timeout)
        if answer.status != 200:
            raise OSError(f"Slack answered {answer.status}")

    return respond


class _Signed:
    """A person as the grants file's roles are asked for (no groups: Slack vouches for none)."""

    def __init__(self, principal: Principal) -> None:
        self.principal = principal
        self.groups: tuple[str, ...] = ()
