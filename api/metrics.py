"""Prometheus metrics at `GET /metrics` (prometheus_client; docs/operations.md).

Series (no label carries tenant data: routes are URL *templates* such as
`/api/decision/<decision_id>`, never a path with an id; no scope, key or policy id):

* `gate_http_requests_total{method, route, status}` and
  `gate_http_request_duration_seconds{method, route}` (histogram), for every request; a path
  that matches no route is `route="unmatched"`;
* `gate_decisions_total{authority, verdict}`: records created by `POST /api/decide`
  (`authority` binding or advisory; replays are not counted again);
* `gate_ledger_wait_seconds{wait}` (histogram): how long ledger writers waited for SQLite's write
  lock (`write_queue`), PostgreSQL's chain-head row lock (`chain_head`) and, per decide, for
  their process's writer thread to commit them (`writer`; `gate.ledger.waits`);
* `gate_ledger_ready`, `gate_signing_ready`, `gate_signing_required` (1/0, computed at scrape
  time) and `gate_build_info{interface_version}`;
* `gate_worker_healthy{worker}`, `gate_worker_failures{worker}` and
  `gate_worker_last_success_timestamp_seconds{worker}`: the scraped process's background workers
  (`gate.services.periodic`), computed at scrape time (under `gate serve --no-dispatch` the
  dispatcher's run in `gate dispatch`, and are not among them);
* events out, read from the ledger at scrape time: `gate_webhook_subscriptions{status}`,
  `gate_webhook_lag_events` (summed over active subscriptions), `gate_webhook_lag_max_events` and
  `gate_webhook_lag_seconds` (the furthest-behind subscription, in events and in the age of the
  oldest event it waits for), `gate_events_outbox_rows`, `gate_events_outbox_bytes` (as of the
  last retention pass) and `gate_events_dropped_undelivered` (docs/events.md "Retention").

Several worker processes: counters and histograms live in each worker. When
`PROMETHEUS_MULTIPROC_DIR` is set, prometheus_client writes them to files there and a scrape of
any worker aggregates every worker's files (`MultiProcessCollector`); `gate serve --workers N>1`
(`api.serving`) sets it to `<GATE_HOME>/prometheus-multiproc` (emptied at start) unless the operator set it,
and marks a worker's files dead when it exits. The readiness gauges are computed by the scraped
worker itself, so they are never stale. With one process the in-memory registry is used.

Access: public unless `GATE_METRICS_TOKEN` is configured, then the same token as the proof
metrics (`x-metrics-token` or `Authorization: Bearer`), 401 `METRICS_UNAUTHORIZED` without it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from flask import Flask, Response, current_app, g, request
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric

from api.errors import error_response
from gate import vocabulary as C
from gate.ledger import waits
from gate.services.operations import token_matches

REGISTRY = CollectorRegistry(auto_describe=True)
REQUESTS = Counter("gate_http_requests", "HTTP requests by method, route template and status.",
                   ("method", "route", "status"), registry=REGISTRY)
LATENCY = Histogram("gate_http_request_duration_seconds", "Time to answer a request, by method and route template.",
                    ("method", "route"), registry=REGISTRY,
                    buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0))
DECISIONS = Counter("gate_decisions", "Decision Records created, by authority (binding, advisory) and verdict.",
                    ("authority", "verdict"), registry=REGISTRY)
LEDGER_WAITS = Histogram("gate_ledger_wait_seconds", "Time a ledger writer waited, by wait (gate.ledger.waits): "
                         "write_queue (SQLite's write lock), chain_head (PostgreSQL's chain-head row lock), "
                         "writer (a decide's write handed to its process's writer thread, until committed).",
                         ("wait",), registry=REGISTRY,
                         buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0))
GUARDRAIL_TRIPS = Counter("gate_release_guardrail_trips", "Canaries halted by a tripped guardrail, by guardrail "
                          "(failure_rate, verdict_mix).", ("guardrail",), registry=REGISTRY)
WEBHOOK_ATTEMPTS = Counter("gate_webhook_attempts", "Webhook delivery attempts, by result (ok, failed: a retry "
                           "is scheduled) and kind (ordered, replay).", ("result", "kind"), registry=REGISTRY)


# SECURITY: label values come from a closed set. The HTTP method is the client's own token
# (any `tchar` string reaches the app and is answered 405), so it is never a label verbatim:
# one request per invented method would otherwise add a series to every scrape, forever.
LABEL_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def method_label(method: str) -> str:
    return method if method in LABEL_METHODS else "other"


class ReadinessCollector:
    """Ledger and signing readiness, computed when scraped (never from worker files)."""

    def __init__(self, app: Flask) -> None:
        self.app = app

    def collect(self) -> Iterator[Metric]:
        rt = self.app.extensions["gate"]
        for name, documentation, value in (
            ("gate_ledger_ready", "1 when the ledger answers.", rt.ledger.ping()),
            ("gate_signing_ready", "1 when a receipt signing key is usable.", rt.signing.ready()),
            ("gate_signing_required", "1 when records must be signed.", rt.signing.required),
        ):
            yield GaugeMetricFamily(name, documentation, value=1.0 if value else 0.0)
        info = GaugeMetricFamily("gate_build_info", "Interface version of this gate.", labels=["interface_version"])
        info.add_metric([C.INTERFACE_VERSION], 1.0)
        yield info


def record_decision(authority: str, verdict: str) -> None:
    """Count one created record (called by the decide route)."""
    DECISIONS.labels(authority, verdict).inc()


def record_guardrail_trip(scope: str, rulebook_id: str, report: Any) -> None:
    """Count a canary halted by its guardrails (labels from the closed set of guardrail names;
    scopes and rulebook ids are never labels)."""
    for name in report.tripped:
        if name in ("failure_rate", "verdict_mix"):
            GUARDRAIL_TRIPS.labels(name).inc()


# The four children of WEBHOOK_ATTEMPTS, bound once: an attempt counts without a labels() lookup.
_WEBHOOK_ATTEMPT_CHILDREN = {(ok, replay): WEBHOOK_ATTEMPTS.labels("ok" if ok else "failed",
                                                                  "replay" if replay else "ordered")
                             for ok in (False, True) for replay in (False, True)}


def record_webhook_attempt(ok: bool, replay: bool) -> None:
    _WEBHOOK_ATTEMPT_CHILDREN[bool(ok), bool(replay)].inc()


class EventsCollector:
    """Events out, read from the ledger when scraped: subscriptions by status and the events
    active subscriptions still have to deliver (the lag), summed over scopes."""

    def __init__(self, app: Flask) -> None:
        self.app = app

    def collect(self) -> Iterator[Metric]:
        rt = self.app.extensions["gate"]
        rows = rt.events.outbox.subscriptions()
        statuses = GaugeMetricFamily("gate_webhook_subscriptions", "Webhook subscriptions by status.",
                                     labels=["status"])
        for status in ("active", "disabled"):
            statuses.add_metric([status], float(sum(1 for r in rows if r["status"] == status)))
        yield statuses
        heads = rt.events.outbox.heads(r["scope"] for r in rows)  # one read, not one per scope
        lag = sum(max(0, heads.get(r["scope"], 0) - r["cursor"]) for r in rows if r["status"] == "active")
        yield GaugeMetricFamily("gate_webhook_lag_events", "Events active subscriptions have yet to receive.",
                                value=float(lag))
        yield from outbox_metrics(rt.events.retention.store.figures(), rt.events.clock.now().timestamp())


def outbox_metrics(figures: Any, now: float) -> Iterator[Metric]:
    """The outbox's size and delivery lag (issue 68/3; docs/operating.md "Outbox size")."""
    yield GaugeMetricFamily("gate_events_outbox_rows", "Events kept in the outbox (every scope).",
                            value=float(figures["rows"]))
    yield GaugeMetricFamily("gate_events_outbox_bytes", "Stored bytes of the outbox's events, as of the last "
                            "retention pass (GATE_EVENTS_RETENTION_BYTES bounds it).", value=float(figures["bytes"]))
    yield GaugeMetricFamily("gate_events_dropped_undelivered", "Events the size bound removed before every "
                            "active subscription had them, since the ledger began.",
                            value=float(figures["dropped_undelivered"]))
    yield GaugeMetricFamily("gate_webhook_lag_max_events", "Events the furthest-behind active subscription "
                            "has yet to receive.", value=float(figures["lag_events"]))
    oldest = figures["oldest_undelivered_at"]
    age = max(0.0, now - datetime.fromisoformat(oldest.replace("Z", "+00:00")).timestamp()) if oldest else 0.0
    yield GaugeMetricFamily("gate_webhook_lag_seconds", "Age of the oldest event an active subscription has yet "
                            "to receive (0: none waits).", value=round(age, 3))


class WorkersCollector:
    """The scraped process's background workers (`gate.services.periodic`), by worker name (a
    closed set: webhooks, event-stream, scheduled-reports, hold-sweeper, release-guard)."""

    def __init__(self, app: Flask) -> None:
        self.app = app

    def collect(self) -> Iterator[Metric]:
        families = (
            GaugeMetricFamily("gate_worker_healthy", "1 while the background worker is healthy.", labels=["worker"]),
            GaugeMetricFamily("gate_worker_failures", "Failed passes of the background worker since its start.",
                              labels=["worker"]),
            GaugeMetricFamily("gate_worker_last_success_timestamp_seconds",
                              "Unix time of the background worker's last successful pass (0: none yet).",
                              labels=["worker"]),
        )
        for worker in self.app.extensions["gate"].workers():
            health = worker.health()
            families[0].add_metric([health["name"]], 1.0 if health["healthy"] else 0.0)
            families[1].add_metric([health["name"]], float(health["failures"]))
            families[2].add_metric([health["name"]], worker.last_success or 0.0)
        yield from families


def metrics_token_refusal() -> Response | None:
    """None when the request carries the configured metrics token; else the refusal to answer.
    The same token guards `/metrics`, `/api/proof-metrics` and `/api/pilot-export`."""
    token = current_app.extensions["gate"].settings.metrics_token
    if token is None:
        return error_response("METRICS_UNAVAILABLE", "no metrics token is configured (GATE_METRICS_TOKEN); "
                              "these reads are off")
    given = request.headers.get("x-metrics-token")
    if given is None:
        scheme, _, rest = (request.headers.get("Authorization") or "").partition(" ")
        given = rest.strip() if scheme.lower() == "bearer" else None
    if not token_matches(given, token):  # SECURITY: constant time over fixed-length digests
        return error_response("METRICS_UNAUTHORIZED", "a valid x-metrics-token header is required")
    return None


def _scrape_registry(app: Flask) -> CollectorRegistry:
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess  # only loaded when several workers share the files

        multiprocess.MultiProcessCollector(registry)
    else:
        registry.register(_Forward(REGISTRY))
    registry.register(ReadinessCollector(app))
    registry.register(EventsCollector(app))
    registry.register(WorkersCollector(app))
    return registry


class _Forward:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        yield from self.registry.collect()


def _observe_ledger_wait(wait: str, seconds: float) -> None:
    if wait in waits.WAITS:  # a closed set of label values
        LEDGER_WAITS.labels(wait).observe(seconds)


def init_metrics(app: Flask) -> None:
    waits.watch(_observe_ledger_wait)

    @app.before_request
    def _start_timer() -> None:
        g.metrics_started = time.perf_counter()

    @app.after_request
    def _observe(response: Response) -> Response:
        started = g.pop("metrics_started", None)
        rule = request.url_rule.rule if request.url_rule is not None else "unmatched"
        method = method_label(request.method)
        REQUESTS.labels(method, rule, str(response.status_code)).inc()
        if started is not None:
            LATENCY.labels(method, rule).observe(time.perf_counter() - started)
        return response


def metrics_response(app: Flask) -> Response:
    """`GET /metrics` (api.routes.metrics): the exposition, behind the metrics token when one is set."""
    if app.extensions["gate"].settings.metrics_token is not None:
        refusal = metrics_token_refusal()
        if refusal is not None:
            return refusal
    return Response(generate_latest(_scrape_registry(app)), mimetype=CONTENT_TYPE_LATEST.split(";")[0],
                    headers={"Content-Type": CONTENT_TYPE_LATEST, "Cache-Control": "no-store"})
