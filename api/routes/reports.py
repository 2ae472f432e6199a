"""Policy reports from the live ledger: effectiveness, anomalies and benchmarks.

`GET /api/decision/policies/{policy_id}/{effectiveness|anomalies|benchmarks}` load the caller's
most recent decisions of the policy (and their outcomes) from the ledger, run the same engines
as the CLI and the workbench (`workbench.reports.policy`), and answer the sealed report.

Scoping: a report only ever reads the caller's own scope (benchmarks add anonymized cohorts of
opted-in scopes, never their names or records). A policy id the caller has no decisions for,
whether it exists in another scope or nowhere, answers 200 with an empty sample
(`decisions_considered: 0`): the answer is the same in both cases, so it reveals nothing about
other scopes.

Each report is charged to the key's cost window before the ledger is read (`api.costs`): one
unit plus one per started 50 decisions its `limit` lets it read (default 1,000: 21 units).
"""

from __future__ import annotations

from flask import Blueprint, request

from api.costs import REPORT_ROWS_PER_UNIT, Weight, charged, units
from api.errors import json_response
from api.runtime import keyed, runtime
from gate.errors import GateError
from gate.ledger.reports import MAX_SCOPES, benchmark_opt_ins
from gate.services.decide import Caller
from workbench.dataset.load import from_ledger
from workbench.reports.policy import (
    anomaly_report,
    benchmark_report,
    cohort_scopes,
    confidence_report,
    effectiveness_report,
    parse_params,
)

bp = Blueprint("reports", __name__)

UNAUTHORIZED = {
    "effectiveness": "SVC_POLICY_EFFECTIVENESS_UNAUTHORIZED",
    "confidence": "SVC_POLICY_CONFIDENCE_UNAUTHORIZED",
    "anomalies": "SVC_POLICY_ANOMALIES_UNAUTHORIZED",
    "benchmarks": "SVC_POLICY_BENCHMARKS_UNAUTHORIZED",
}
MAX_POLICY_ID = 120


def _policy_id(policy_id: str) -> str:
    if not 1 <= len(policy_id) <= MAX_POLICY_ID or not policy_id.isprintable():
        raise GateError("REQUEST_INVALID", f"policy_id must be 1 to {MAX_POLICY_ID} printable characters",
                        errors=[{"field": "policy_id", "code": "invalid_value",
                                 "message": f"1 to {MAX_POLICY_ID} printable characters"}])
    return policy_id


def _args(kind: str):
    return parse_params(kind, request.args.to_dict(flat=True))


def _report_units() -> int:
    """The report's `limit` as its route will read it (a bad policy id or query is a 400 before the charge)."""
    _policy_id((request.view_args or {}).get("policy_id", ""))
    return units(_args(str(request.endpoint).rsplit(".", 1)[-1]).limit, REPORT_ROWS_PER_UNIT)


REPORT_WEIGHT = Weight(query=_report_units)


@bp.get("/api/decision/policies/<policy_id>/effectiveness")
@keyed(UNAUTHORIZED["effectiveness"])
@charged(REPORT_WEIGHT)
def effectiveness(caller: Caller, policy_id: str):
    policy_id, params = _policy_id(policy_id), _args("effectiveness")
    frames = from_ledger(runtime().ledger, caller.scope, policy_id, policy_version=params.policy_version,
                         limit=params.limit)
    return json_response(200, effectiveness_report(frames, policy_id, params))


@bp.get("/api/decision/policies/<policy_id>/confidence")
@keyed(UNAUTHORIZED["confidence"])
@charged(REPORT_WEIGHT)
def confidence(caller: Caller, policy_id: str):
    policy_id, params = _policy_id(policy_id), _args("confidence")
    # policy_version names the current version; evidence from every version counts.
    frames = from_ledger(runtime().ledger, caller.scope, policy_id, policy_version=None, limit=params.limit)
    return json_response(200, confidence_report(frames, policy_id, params))


@bp.get("/api/decision/policies/<policy_id>/anomalies")
@keyed(UNAUTHORIZED["anomalies"])
@charged(REPORT_WEIGHT)
def anomalies(caller: Caller, policy_id: str):
    policy_id, params = _policy_id(policy_id), _args("anomalies")
    frames = from_ledger(runtime().ledger, caller.scope, policy_id, policy_version=params.policy_version,
                         limit=params.limit)
    return json_response(200, anomaly_report(frames, policy_id, params))


@bp.get("/api/decision/policies/<policy_id>/benchmarks")
@keyed(UNAUTHORIZED["benchmarks"])
@charged(REPORT_WEIGHT)
def benchmarks(caller: Caller, policy_id: str):
    policy_id, params = _policy_id(policy_id), _args("benchmarks")
    ledger = runtime().ledger
    opted_in = benchmark_opt_ins(ledger)
    frames = from_ledger(ledger, caller.scope, policy_id, policy_version=params.policy_version,
                         limit=params.limit, cohort_scopes=cohort_scopes(opted_in, caller.scope, MAX_SCOPES))
    return json_response(200, benchmark_report(frames, policy_id, params, own_scope=caller.scope,
                                               opted_in=opted_in))
