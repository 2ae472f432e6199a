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

from flask import Blueprint, Response, request

from api.costs import Weight, charged
from api.errors import error_response, json_response
from api.jsonio import read_json
from api.runtime import keyed, requested_view, runtime
from gate import vocabulary as C
from gate.replay.historical import REPLAY_CURRENT
from gate.services.decide import Caller

bp = Blueprint("replay", __name__)

NOT_FOUND = "no decision with this id in your scope"
REPLAY_WEIGHT = Weight(body=True, stored=1)


def _header_view() -> str | None:
    """`x-decision-response-view` / `Prefer: return=` when the body names no view."""
    view, _ = requested_view(None)
    return view


def _replay(caller: Caller, decision_id: str, forced_mode: str | None) -> Response:
    rt = runtime()
    body = read_json(request, rt.settings.max_body_bytes, optional=True)
    summary = rt.replays.replay(caller, decision_id, body, forced_mode=forced_mode, header_view=_header_view())
    if summary is None:
        return error_response("DECISION_NOT_FOUND", NOT_FOUND)
    return json_response(200, {"ok": True, **summary}, {"x-decision-id": summary["decision_id"]})


@bp.post("/api/decision/<decision_id>/replay")
@keyed("SVC_API_UNAUTHORIZED")
@charged(REPLAY_WEIGHT)
def replay(caller: Caller, decision_id: str) -> Response:
    return _replay(caller, decision_id, None)


@bp.post("/api/decision/<decision_id>/diff")
@keyed("SVC_API_UNAUTHORIZED")
@charged(REPLAY_WEIGHT)
def diff(caller: Caller, decision_id: str) -> Response:
    return _replay(caller, decision_id, REPLAY_CURRENT)


@bp.post("/api/decision/<decision_id>/counterfactuals")
@keyed("SVC_API_UNAUTHORIZED")
@charged(REPLAY_WEIGHT)
def counterfactuals(caller: Caller, decision_id: str) -> Response:
    rt = runtime()
    body = read_json(request, rt.settings.max_body_bytes)
    result = rt.replays.counterfactuals(caller, decision_id, body)
    if result is None:
        return error_response("DECISION_NOT_FOUND", NOT_FOUND)
    headers = {
        "x-decision-counterfactuals-version": C.DECISION_COUNTERFACTUALS_VERSION,
        "x-decision-counterfactual-hash": result["counterfactual_hash"],
        "x-decision-counterfactual-scenarios": str(result["scenario_count"]),
    }
    return json_response(200, result, headers)
