"""`GET /metrics`: the Prometheus exposition (`api.metrics` keeps the series and the token check)."""

from __future__ import annotations

from flask import Response, current_app

from api.metrics import metrics_response
from api.routing import Endpoint, Routes

routes = Routes("metrics", __name__)


@routes.route(Endpoint(
    "get", "/metrics", "Prometheus text exposition: request counts and latencies per route template and "
    "status, decisions by authority and verdict, ledger and signing readiness. No tenant labels. Public "
    "unless GATE_METRICS_TOKEN is set (then x-metrics-token or Bearer).",
    False, {200: "Prometheus text format", 401: "metrics token required and missing or wrong"},
    errors=("METRICS_UNAUTHORIZED",), request_headers=("x-metrics-token",), tags=("operations",), budget="public"))
def metrics() -> Response:
    return metrics_response(current_app)
