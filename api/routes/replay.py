"""Replay, diff and counterfactuals of a stored decision (spec endpoints; docs/replay.md).

`POST /api/decision/{id}/replay`: historical by default (stored snapshot, canonical input,
pinned adapter), or `replay_mode: "current"`. `POST /api/decision/{id}/diff`: the same, forced
to current mode. `POST /api/decision/{id}/counterfactuals`: simulation-only scenarios. All three
are keyed and read-only: another scope's decision is a 404, and nothing is ever written.

Each is charged to the key's cost window before its work (`api.costs`): one unit, one per
started 8 KiB of body (a diff's `input`, the scenarios) and one per full 16 KiB of the stored
request it re-evaluates.
"""

from __future__ import annotations

from flask import Response, request

from api.costs import Weight, charged
from api.errors import json_response
from api.jsonio import read_json
from api.routing import AUTH_ERRORS, BODY_ERRORS, MEDIA, Endpoint, Routes
from api.runtime import keyed, requested_view
from gate import vocabulary as C
from gate.errors import GateError
from gate.replay.historical import REPLAY_CURRENT
from gate.replay.whatif import MAX_SCENARIOS
from gate.services.decide import Caller
from gate.services.replay import ReplayService
from gate.settings import Settings

routes = Routes("replay", __name__)

NOT_FOUND = "no decision with this id in your scope"
REPLAY_WEIGHT = Weight(body=True, stored=1)
COUNTERFACTUAL_HEADERS = ("x-decision-counterfactuals-version", "x-decision-counterfactual-hash",
                          "x-decision-counterfactual-scenarios")


def _replay_endpoint(path: str, summary: str) -> Endpoint:
    """Replay and diff: the same answers, errors and headers."""
    return Endpoint(
        "post", f"/api/decision/{{decision_id}}/{path}", summary, True,
        {200: "replay summary: replay_against, compared fields, replay_status, drift[], decision projection",
         400: "malformed body", 401: "missing or invalid key", 403: "disabled key", 404: "not in scope",
         409: "historical rulebook, evaluator or adapter lineage unavailable or mismatched",
         410: "the decision's inputs were removed (the facts' retention): `removed` says by what",
         413: "body too large", 415: MEDIA,
         422: "invalid replay mode, forbidden historical input override, unavailable replay input, or an "
              "override over the evaluation limits",
         500: "the re-run trusted adapter returned invalid output or was denied a capability",
         502: "advisory decision: the advisor failed (nothing written)",
         503: "ledger, adapter worker or (multi) advisors unavailable",
         504: "the re-run trusted adapter exceeded its 1,000 ms budget"},
        errors=AUTH_ERRORS + BODY_ERRORS + (
            "DECISION_NOT_FOUND", "DECISION_INPUTS_REMOVED", "REPLAY_MODE_INVALID", "REPLAY_INPUT_OVERRIDE_FORBIDDEN",
            "REPLAY_INPUT_UNAVAILABLE", "REPLAY_LINEAGE_UNAVAILABLE", "REPLAY_LINEAGE_MISMATCH",
            "RULEBOOK_OUTPUT_MATERIAL_FORBIDDEN", "EVALUATION_INPUT_TOO_LARGE", "EVALUATION_TOO_COSTLY",
            "TRUSTED_ADAPTER_EXECUTION_TIMEOUT", "TRUSTED_ADAPTER_OUTPUT_INVALID",
            "TRUSTED_ADAPTER_CAPABILITY_DENIED", "TRUSTED_ADAPTER_UNAVAILABLE",
            "ADVISOR_UPSTREAM_FAILED", "ADVISOR_UNAVAILABLE", "LEDGER_UNAVAILABLE"),
        request_body="DiffRequest" if path == "diff" else "ReplayRequest", response_headers=("x-decision-id",),
        request_headers=("x-api-key", "Prefer", "x-decision-response-view"), tags=("replay",), charged=True,
    )


def _header_view() -> str | None:
    """`x-decision-response-view` / `Prefer: return=` when the body names no view."""
    view, _ = requested_view(None)
    return view


def _replay(caller: Caller, decision_id: str, forced_mode: str | None, replays: ReplayService,
            settings: Settings) -> Response:
    body = read_json(request, settings.max_body_bytes, optional=True)
    summary = replays.replay(caller, decision_id, body, forced_mode=forced_mode, header_view=_header_view())
    if summary is None:
        raise GateError("DECISION_NOT_FOUND", NOT_FOUND)
    return json_response(200, {"ok": True, **summary}, {"x-decision-id": summary["decision_id"]})


@routes.route(_replay_endpoint("replay", (
    "Replay a stored decision without writing anything. Rulebook decisions replay historically by "
    "default (stored snapshot, canonical input, pinned adapter re-run with its output hash "
    "compared; never the current evaluator); `replay_mode: current` uses the scope's current "
    "rulebook for the id and accepts an `input` override. Advisory (legacy-mode) decisions "
    "replay in current mode against the advisor panel (docs/replay.md).")))
@keyed("SVC_API_UNAUTHORIZED")
@charged(REPLAY_WEIGHT)
def replay(caller: Caller, decision_id: str, *, replays: ReplayService, settings: Settings) -> Response:
    return _replay(caller, decision_id, None, replays, settings)


@routes.route(_replay_endpoint("diff", (
    "Replay forced to current mode: the stored decision against the scope's current rulebook, or "
    "against a current-mode `input` override. Same summary shape as replay.")))
@keyed("SVC_API_UNAUTHORIZED")
@charged(REPLAY_WEIGHT)
def diff(caller: Caller, decision_id: str, *, replays: ReplayService, settings: Settings) -> Response:
    return _replay(caller, decision_id, REPLAY_CURRENT, replays, settings)


@routes.route(Endpoint(
    "post", "/api/decision/{decision_id}/counterfactuals",
    f"Simulation-only what-if scenarios (at most {MAX_SCENARIOS}): each `context_patch` is merged (RFC 7396) "
    "over the stored context and facts and evaluated against the current runtime. Never authorizes a mutation.",
    True, {200: "scenarios[] with scenario_id, label, verdict, action, changed, diff, recommendation",
           400: "missing or invalid scenarios, or malformed body", 401: "missing or invalid key",
           403: "disabled key", 404: "not in scope",
           410: "the decision's inputs were removed (the facts' retention): `removed` says by what",
           413: "body too large", 415: MEDIA,
           422: "base input unavailable, or a patch over the evaluation limits", 503: "ledger unavailable"},
    errors=AUTH_ERRORS + BODY_ERRORS + (
        "DECISION_NOT_FOUND", "DECISION_INPUTS_REMOVED", "COUNTERFACTUAL_SCENARIOS_INVALID", "COUNTERFACTUAL_BASE_INPUT_UNAVAILABLE",
        "RULEBOOK_OUTPUT_MATERIAL_FORBIDDEN", "EVALUATION_INPUT_TOO_LARGE", "EVALUATION_TOO_COSTLY",
        "LEDGER_UNAVAILABLE"),
    request_body="CounterfactualsRequest", response_headers=COUNTERFACTUAL_HEADERS,
    request_headers=("x-api-key",), tags=("replay",), charged=True,
))
@keyed("SVC_API_UNAUTHORIZED")
@charged(REPLAY_WEIGHT)
def counterfactuals(caller: Caller, decision_id: str, *, replays: ReplayService, settings: Settings) -> Response:
    body = read_json(request, settings.max_body_bytes)
    result = replays.counterfactuals(caller, decision_id, body)
    if result is None:
        raise GateError("DECISION_NOT_FOUND", NOT_FOUND)
    headers = {
        "x-decision-counterfactuals-version": C.DECISION_COUNTERFACTUALS_VERSION,
        "x-decision-counterfactual-hash": result["counterfactual_hash"],
        "x-decision-counterfactual-scenarios": str(result["scenario_count"]),
    }
    return json_response(200, result, headers)
