"""Policy reports from the live ledger: one route per kind of `workbench.reports.registry`.

`GET /api/decision/policies/{policy_id}/{effectiveness|confidence|anomalies|benchmarks}` load the
caller's most recent decisions of the policy (and their outcomes) from the ledger, run the same
engines as the CLI and the workbench (the report service, `workbench.services.reports`), and
answer the sealed report.

Scoping: a report only ever reads the caller's own scope (benchmarks add anonymized cohorts of
opted-in scopes, never their names or records). A policy id the caller has no decisions for,
whether it exists in another scope or nowhere, answers 200 with an empty sample
(`decisions_considered: 0`): the answer is the same in both cases, so it reveals nothing about
other scopes.

Each report is charged to the key's cost window before the ledger is read (`api.costs`): one
unit plus one per started 50 decisions its `limit` lets it read (default 1,000: 21 units).
"""

from __future__ import annotations

from flask import Blueprint, Response, request

from api.costs import REPORT_ROWS_PER_UNIT, Weight, charged, units
from api.errors import json_response
from api.runtime import keyed, runtime
from gate.errors import GateError
from gate.services.decide import Caller
from workbench.reports.params import ReportParams
from workbench.reports.registry import REPORTS, ReportKind, parse_params

bp = Blueprint("reports", __name__)

MAX_POLICY_ID = 120


def _policy_id(policy_id: str) -> str:
    if not 1 <= len(policy_id) <= MAX_POLICY_ID or not policy_id.isprintable():
        raise GateError("REQUEST_INVALID", f"policy_id must be 1 to {MAX_POLICY_ID} printable characters",
                        errors=[{"field": "policy_id", "code": "invalid_value",
                                 "message": f"1 to {MAX_POLICY_ID} printable characters"}])
    return policy_id


def _args(kind: str) -> ReportParams:
    return parse_params(kind, request.args.to_dict(flat=True))


def _report_units() -> int:
    """The report's `limit` as its route will read it (a bad policy id or query is a 400 before the charge)."""
    _policy_id((request.view_args or {}).get("policy_id", ""))
    return units(_args(str(request.endpoint).rsplit(".", 1)[-1]).limit, REPORT_ROWS_PER_UNIT)


REPORT_WEIGHT = Weight(query=_report_units)


def _answer(kind: ReportKind, caller: Caller, policy_id: str) -> Response:
    """The sealed report of the caller's scope (`workbench.services.reports.ReportService.live`);
    a cross-scope report adds the opted-in cohorts."""
    policy_id, params = _policy_id(policy_id), _args(kind.name)
    return json_response(200, runtime().reports.live(kind, caller.scope, policy_id, params))


def _route(kind: ReportKind) -> None:
    """GET /api/decision/policies/<policy_id>/<kind>: keyed, charged, then answered."""

    @keyed(kind.unauthorized)
    @charged(REPORT_WEIGHT)
    def view(caller: Caller, policy_id: str) -> Response:
        return _answer(kind, caller, policy_id)

    bp.add_url_rule(f"/api/decision/policies/<policy_id>/{kind.name}", endpoint=kind.name, view_func=view,
                    methods=["GET"])


for _kind in REPORTS.values():
    _route(_kind)
