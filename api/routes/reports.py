"""Policy reports from the live ledger: one route per kind of `gate.reports.registry`.

`GET /api/decision/policies/{policy_id}/{effectiveness|confidence|anomalies|benchmarks}` load the
caller's most recent decisions of the policy (and their outcomes) from the ledger, run the same
engines as the CLI and the workbench (the analytics the app was composed with,
`gate.services.analytics`: the workbench's report service), and answer the sealed report; an app
composed without analytics answers 503 `REPORTS_UNAVAILABLE` once the key and the query check.

Scoping: a report only ever reads the caller's own scope (benchmarks add anonymized cohorts of
opted-in scopes, never their names or records). A policy id the caller has no decisions for,
whether it exists in another scope or nowhere, answers 200 with an empty sample
(`decisions_considered: 0`): the answer is the same in both cases, so it reveals nothing about
other scopes.

Each report is charged to the key's cost window before the ledger is read (`api.costs`): one
unit plus one per started 50 decisions its `limit` lets it read (default 1,000: 21 units).
"""

from __future__ import annotations

from flask import Response, request

from api import openapi_params as P
from api.costs import REPORT_ROWS_PER_UNIT, Weight, charged, units
from api.errors import json_response
from api.routing import Endpoint, Routes
from api.runtime import keyed
from gate.errors import GateError
from gate.ledger import Ledger
from gate.reports.params import PARAMS, ReportParams
from gate.reports.registry import REPORTS, ReportKind, parse_params
from gate.services.analytics import Analytics
from gate.services.decide import Caller

routes = Routes("reports", __name__)

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
    return units(_args(str(request.endpoint).rsplit(".", 1)[-1]).ledger_limit, REPORT_ROWS_PER_UNIT)


REPORT_WEIGHT = Weight(query=_report_units)


def _answer(kind: ReportKind, caller: Caller, policy_id: str, analytics: Analytics, ledger: Ledger) -> Response:
    """The sealed report of the caller's scope (`gate.services.analytics.Analytics.report`);
    a cross-scope report adds the opted-in cohorts."""
    policy_id, params = _policy_id(policy_id), _args(kind.name)
    return json_response(200, analytics.report(ledger, kind, caller.scope, policy_id, params))


def _declared(kind: ReportKind) -> Endpoint:
    """The report's route as the OpenAPI document states it: the registry entry's summary and parameters."""
    return Endpoint(
        "get", kind.path,
        kind.summary + " Computed from the live ledger by the same engines as `gate report` "
        "(docs/intelligence.md); only the caller's scope is read, so a policy without decisions in it "
        "answers an empty sample.",
        True, {200: "sealed report", 400: "bad query parameter", 401: "missing or invalid key", 403: "disabled key",
               503: "ledger unavailable, or the gate was composed without report engines"},
        errors=(kind.unauthorized, "REQUEST_INVALID", "LEDGER_UNAVAILABLE", "REPORTS_UNAVAILABLE"),
        query=tuple((name, PARAMS[name].type.__name__.replace("int", "integer").replace("float", "number")
                     .replace("str", "string"), PARAMS[name].describe(), P.report_param(name))
                    for name in kind.params),
        tags=("intelligence",), charged=True,
    )


def _route(kind: ReportKind) -> None:
    """GET /api/decision/policies/<policy_id>/<kind>: keyed, charged, then answered."""

    @keyed(kind.unauthorized)
    @charged(REPORT_WEIGHT)
    def view(caller: Caller, policy_id: str, *, analytics: Analytics, ledger: Ledger) -> Response:
        return _answer(kind, caller, policy_id, analytics, ledger)

    routes.add(view, _declared(kind), name=kind.name)


for _kind in REPORTS.values():
    _route(_kind)
