"""The policy reports (effectiveness, anomalies, benchmarks) as the API and the CLI serve them.

This is the one place that binds the pure engines to the gate's meaning of outcome statuses
(`gate.receipts.values.OUTCOME_EFFECTIVENESS_CLASS`), checks the query parameters against their
documented ranges, and seals each body in its envelope (`gate.protocol.report_envelopes`). The frames come from
`workbench.dataset.load` (a Parquet dataset or the live ledger), so the same numbers come out of both.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import AbstractSet, Any

from gate.errors import GateError
from gate.protocol.report_envelopes import seal
from gate.receipts.values import OUTCOME_EFFECTIVENESS_CLASS
from workbench.engines import anomalies as anomaly_engine
from workbench.engines import benchmarks as benchmark_engine
from workbench.engines import confidence as confidence_engine
from workbench.engines import effectiveness as effectiveness_engine

CLASSES: Mapping[str, str] = OUTCOME_EFFECTIVENESS_CLASS
KINDS = ("effectiveness", "confidence", "anomalies", "benchmarks")
REPORT_KIND = {"effectiveness": "effectiveness", "anomalies": "anomaly", "benchmarks": "benchmark", "confidence": "confidence"}
VERDICTS = ("yes", "no", "review")


@dataclass(frozen=True)
class Param:
    name: str
    type: type
    default: Any
    low: float | None = None
    high: float | None = None
    doc: str = ""
    default_doc: str = ""

    def describe(self) -> str:
        bounds = f"{self.low:g} to {self.high:g}" if self.type is not str else f"{self.low:g} to {self.high:g} characters"
        default = self.default_doc or "none (every version)" if self.default is None else f"{self.default:g}" if self.type is not str else self.default
        return f"{self.doc} Range {bounds}; default {default}."


# Ranges are ours (the spec leaves them open); defaults are the reference's typical queries.
PARAMS: dict[str, Param] = {p.name: p for p in (
    Param("policy_version", str, None, 1, 80, "Only decisions made under this policy version."),
    Param("limit", int, 1000, 1, 10_000, "The most recent decisions considered."),
    Param("verdict", str, None, 2, 6, "confidence: only decisions with this verdict (yes, no or review).",
          "none (every verdict pooled)"),
    Param("action", str, None, 1, 160, "confidence: only decisions with this action.",
          "none (every action pooled)"),
    Param("min_sample", int, 10, 1, 10_000, "Fewest resolved decisions (or values) before a rate is judged."),
    Param("threshold", float, 0.35, 0, 1, "Smallest anomaly_score reported."),
    Param("max_items", int, 5, 1, 100, "Most anomalies listed (anomaly_count counts them all)."),
    # SECURITY: the anonymity floors: a caller may raise them, never lower them below 3 / 30.
    Param("min_cohort_scopes", int, 3, 3, 1000, "Fewest other opted-in scopes before percentiles are shown."),
    Param("min_cohort_decisions", int, 30, 30, 1_000_000, "Fewest cohort decisions before percentiles are shown."),
)}
KIND_PARAMS = {
    "effectiveness": ("policy_version", "limit", "min_sample"),
    "anomalies": ("policy_version", "limit", "min_sample", "threshold", "max_items"),
    "benchmarks": ("policy_version", "limit", "min_cohort_scopes", "min_cohort_decisions"),
    "confidence": ("policy_version", "verdict", "action", "limit", "min_sample"),
}


@dataclass(frozen=True)
class ReportParams:
    policy_version: str | None = None
    verdict: str | None = None
    action: str | None = None
    limit: int = 1000
    min_sample: int = 10
    threshold: float = 0.35
    max_items: int = 5
    min_cohort_scopes: int = 3
    min_cohort_decisions: int = 30

    def for_kind(self, kind: str) -> dict[str, Any]:
        values = asdict(self)
        return {name: values[name] for name in KIND_PARAMS[kind]}


_ASCII_INTEGER = re.compile(r"[0-9]{1,10}")
_ASCII_DECIMAL = re.compile(r"(?=.{1,32}\Z)-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]{1,3})?")


def _invalid(name: str, message: str) -> GateError:
    return GateError("REQUEST_INVALID", f"{name} {message}",
                     errors=[{"field": name, "code": "invalid_value", "message": message}])


def parse_params(kind: str, raw: Mapping[str, str], *, limit_high: int | None = None) -> ReportParams:
    """Query-string values → ReportParams, refusing (REQUEST_INVALID) anything out of range or
    not meant for this report kind. `limit_high` lets a local dataset read raise the limit."""
    known = set(KIND_PARAMS[kind])
    for name in raw:
        if name not in known:
            raise _invalid(name, f"is not a parameter of the {kind} report (accepted: {', '.join(KIND_PARAMS[kind])})")
    values: dict[str, Any] = {}
    for name in KIND_PARAMS[kind]:
        if name not in raw:
            continue
        p, text = PARAMS[name], raw[name]
        high = limit_high if name == "limit" and limit_high else p.high
        if p.type is str:
            if not (p.low <= len(text) <= high) or not text.isprintable():
                raise _invalid(name, f"must be {p.low:g} to {high:g} printable characters")
            values[name] = text
            continue
        # SECURITY: ASCII digits only. int() and float() also read other scripts' digits
        # ("0.35١" was 0.351, "१" was 1.0), spaces and underscores; the regexes do not.
        grammar = _ASCII_INTEGER if p.type is int else _ASCII_DECIMAL
        if not grammar.fullmatch(text):
            raise _invalid(name, f"must be {'an integer' if p.type is int else 'a number'} of ASCII digits "
                                 f"from {p.low:g} to {high:g}")
        number: float = int(text) if p.type is int else float(text)
        if not (p.low <= number <= high):
            raise _invalid(name, f"must be from {p.low:g} to {high:g}")
        values[name] = number
    if values.get("verdict") not in (None, *VERDICTS):
        raise _invalid("verdict", "must be yes, no or review")
    return ReportParams(**values)


def _envelope(kind: str, policy_id: str, params: ReportParams, body: dict, frames=None) -> dict:
    return seal(REPORT_KIND[kind], {"policy_id": policy_id, "policy_version": params.policy_version,
                                    "parameters": params.for_kind(kind), **body, **_source(frames)})


def _source(frames) -> dict:
    """A report read from a dataset names it (`source`: the dataset manifest's `dataset_hash`
    and signing key), so its hash binds to that signed manifest; a ledger report has no member."""
    source = getattr(frames, "source", None)
    return {"source": dict(source)} if source else {}


def _merged(engine, kind: str, frames, compute, own_scope: str | None = None) -> dict:
    """The engine's merged state over the frames: the dataset's rollups of the selection when it
    has current ones (`workbench.dataset.rollups`), else `compute()` over the rows. Both are merges of
    the same engine's partials, so the report is the same either way (a test holds them equal)."""
    view = frames.rollup
    if view is not None and view.usable(CLASSES):
        return engine.merge([view.partial(kind, own_scope=own_scope)])
    return engine.merge([compute()])


def effectiveness_report(frames, policy_id: str, params: ReportParams, *, anomalies: Mapping[str, Any] | None = None,
                         with_health: bool = True) -> dict:
    """The effectiveness report, with its `health` (`policy_health`) unless `with_health` is
    False (the month-by-month course needs only the scores). `anomalies`: the anomaly report of
    the same frames and parameters when the caller has it already (else it is computed)."""
    state = _merged(effectiveness_engine, "effectiveness", frames,
                    lambda: effectiveness_engine.partial(frames.decisions, frames.outcomes))
    body = effectiveness_engine.finalize(state, CLASSES, min_sample=params.min_sample)
    if with_health:
        body["health"] = policy_health(body, anomalies or _anomaly_body(frames, params), params)
    return _envelope("effectiveness", policy_id, params, body, frames)


def _anomaly_body(frames, params: ReportParams) -> dict:
    state = _merged(anomaly_engine, "anomalies", frames,
                    lambda: anomaly_engine.partial(frames.decisions, frames.outcomes, CLASSES, frames.facts))
    return anomaly_engine.finalize(state, CLASSES, min_sample=params.min_sample, threshold=params.threshold,
                                   max_items=params.max_items)


def anomaly_report(frames, policy_id: str, params: ReportParams) -> dict:
    return _envelope("anomalies", policy_id, params, _anomaly_body(frames, params), frames)


def policy_health(effectiveness: Mapping[str, Any], anomalies: Mapping[str, Any], params: ReportParams) -> dict:
    """The policy's one headline state over one named window: the outcome rates (the
    effectiveness `recommendation`) and their trend and shifts (the anomaly detectors compare
    the newest version with the one before and the newest month's facts with earlier months).
    An anomaly to investigate outranks a healthy rate, so no card says "healthy" while another
    says "investigate" (docs/intelligence.md, "Health")."""
    rate, shifts = effectiveness["recommendation"], anomalies["recommendation"]
    if rate == "insufficient_data":
        state = "insufficient_data"
    elif shifts == "investigate":
        state = "investigate"
    elif rate == "review_policy":
        state = "review_policy"
    elif "monitor" in (rate, shifts):
        state = "monitor"
    else:
        state = "healthy"
    metrics = effectiveness["metrics"]
    because = [f"{metrics['resolved_decisions']} resolved decisions, success rate "
               + ("n/a" if metrics["success_rate"] is None else f"{metrics['success_rate']:.1%}")
               + f" ({rate})"]
    if shifts in ("investigate", "monitor") and anomalies["anomalies"]:
        because.append(anomalies["anomalies"][0]["reasons"][0])
    sample = effectiveness["sample"]
    window = {"limit": params.limit, "policy_version": params.policy_version,
              "decisions": sample["decisions_considered"],
              "from": sample["first_decision_at"], "to": sample["last_decision_at"]}
    versions = f"version {params.policy_version}" if params.policy_version else "every version"
    window["text"] = (f"latest {sample['decisions_considered']} decisions "
                      f"(limit {'all' if params.limit is None else params.limit}, {versions})"
                      + (f", {window['from'][:10]} to {window['to'][:10]}" if window["from"] and window["to"] else ""))
    return {"state": state, "outcome_rates": rate, "anomalies": shifts, "window": window, "because": because}


def benchmark_report(frames, policy_id: str, params: ReportParams, *, own_scope: str,
                     opted_in: AbstractSet[str]) -> dict:
    state = _merged(benchmark_engine, "benchmarks", frames,
                    lambda: benchmark_engine.partial(frames.decisions, frames.outcomes, CLASSES, own_scope=own_scope),
                    own_scope=own_scope)
    body = benchmark_engine.finalize(state, CLASSES, own_scope=own_scope, opted_in=opted_in,
                                     min_cohort_scopes=params.min_cohort_scopes,
                                     min_cohort_decisions=params.min_cohort_decisions)
    return _envelope("benchmarks", policy_id, params, body, frames)


def confidence_report(frames, policy_id: str, params: ReportParams) -> dict:
    """Decision confidence (docs/intelligence.md). `policy_version` names the current version
    and does not filter: load the frames of every version (`from_ledger(…, policy_version=None)`)."""
    body = confidence_engine.confidence_report(
        frames.decisions, frames.outcomes, policy_id=policy_id, classes=CLASSES,
        policy_version=params.policy_version, verdict=params.verdict, action=params.action,
        min_sample=params.min_sample)
    return seal("confidence", {"policy_id": policy_id, "policy_version": body["based_on"]["policy_version"],
                               "parameters": params.for_kind("confidence"), **body, **_source(frames)})


def packet_intelligence(frames, record: Mapping[str, Any]) -> dict[str, dict]:
    """The packet's `policy_intelligence` for a record: its policy's effectiveness and anomaly
    reports with the endpoints' default parameters, and the confidence report of the record's
    verdict, action and version, all over `frames` (the scope's newest decisions of the policy,
    every version). Benchmarks are left out: a packet travels to third parties, and cohort
    figures describe other scopes."""
    policy_id = record["policy_id"]
    defaults = ReportParams()
    return {
        "effectiveness": effectiveness_report(frames, policy_id, defaults),
        "anomalies": anomaly_report(frames, policy_id, defaults),
        "confidence": confidence_report(frames, policy_id, ReportParams(
            policy_version=record.get("policy_version"), verdict=record.get("verdict"),
            action=record.get("action"))),
    }
def cohort_scopes(opted_in: AbstractSet[str], own_scope: str, max_scopes: int) -> list[str]:
    """The other opted-in scopes a benchmark cohort reads: all of them up to `max_scopes` − 1,
    else that many chosen by the sha256 of the scope name (deterministic, not biased by naming).
    The API, the CLI and the workbench all choose the cohort here."""
    # SECURITY: a scope that has not opted in never reads anyone else's data.
    if own_scope not in opted_in:
        return []
    others = sorted(set(opted_in) - {own_scope}, key=lambda s: hashlib.sha256(s.encode()).hexdigest())
    return others[:max_scopes - 1]
