"""Integrations over HTTP (docs/integrations.md): Slack's interactions, the Approve and Deny
buttons of the queues' Slack messages. The route carries no API key; Slack's signature is its
authentication (gate.services.slack_actions), checked after the body's size is bounded and
before anything else is read."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from flask import Response, request

from api.bodies import read_body
from api.errors import json_response
from api.routing import Endpoint, Routes
from gate.errors import GateError
from gate.events.notices import slack_client
from gate.events.outbound import for_settings
from gate.services.holds import HoldService
from gate.services.slack_actions import MAX_BODY_BYTES, SlackActions, parse, responder, verify
from gate.settings import Settings

routes = Routes("integrations", __name__)

_ERRORS = ("SLACK_NOT_CONFIGURED", "REQUEST_TOO_LARGE", "SLACK_REQUEST_STALE", "SLACK_SIGNATURE_INVALID",
           "SLACK_INTERACTION_INVALID", "SLACK_USER_UNKNOWN", "HOLD_NOT_FOUND", "HOLD_PERMISSION_DENIED",
           "HOLD_FOUR_EYES", "HOLD_NOT_A_MEMBER", "HOLD_ALREADY_RESOLVED", "HOLD_ALREADY_VOTED", "HOLD_CLAIMED",
           "HOLD_RESOLUTION_INVALID", "HOLD_BUSY", "LEDGER_UNAVAILABLE")


def _actions(settings: Settings, holds: HoldService, grants_file: Path) -> SlackActions:
    outbound = for_settings(settings)
    update = None
    if settings.slack_bot_token:
        update = slack_client(settings.slack_bot_token, settings.slack_api_url, outbound).chat_update
    return SlackActions(holds, grants_file, update, responder(settings.slack_api_url, outbound))


@routes.route(Endpoint(
    "post", "/api/integrations/slack/interactions",
    "Slack's interactions (the queues' Approve and Deny buttons): verified by Slack's `v0` signature "
    "(GATE_SLACK_SIGNING_SECRET, at most 5 minutes old), the Slack user mapped to a person by the grants "
    "file, the hold resolved as that person (a signed hold event; four eyes and quorums as everywhere).",
    False, {200: "{ok, event, hold}: the vote taken", 400: "not one hold_approve or hold_deny action",
            401: "bad signature or stale timestamp", 403: "unknown Slack user, no reviewer role, four eyes",
            404: "no such hold", 409: "already resolved or voted", 413: "body too large",
            503: "Slack or the grants file not configured"},
    errors=_ERRORS, tags=("holds",), budget="public"))
def slack_interactions(*, settings: Settings, holds: HoldService, wake_dispatcher: Callable[[], None]) -> Response:
    secret, grants_file = settings.slack_signing_secret, settings.grants_file
    if not secret or grants_file is None:  # the one check of both (step 1)
        raise GateError("SLACK_NOT_CONFIGURED", "this gate has no Slack signing secret "
                        "(GATE_SLACK_SIGNING_SECRET) or no grants file (GATE_GRANTS_FILE)")
    body = read_body(request, MAX_BODY_BYTES)  # SECURITY: bounded before anyone is known
    verify(secret, holds.clock, body,
           request.headers.get("X-Slack-Request-Timestamp"), request.headers.get("X-Slack-Signature"))
    answer = _actions(settings, holds, grants_file).act(parse(body))
    wake_dispatcher()
    return json_response(200, answer)
