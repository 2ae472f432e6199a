"""The policy reports (effectiveness, confidence, anomalies, benchmarks) as the API and the CLI serve them.

This is the one place that binds the pure engines to the gate's meaning of outcome statuses
(`gate.receipts.values.OUTCOME_EFFECTIVENESS_CLASS`), checks the query parameters against their
documented ranges, and seals each body in its envelope (`gate.protocol.report_envelopes`). The frames come from
`workbench.dataset.load` (a Parquet dataset or the live ledger), so the same numbers come out of both.
Each report is typed by a TypedDict of its JSON members (`EffectivenessReport`, `AnomalyReport`,
`BenchmarkReport`, `ConfidenceReport`), so readers index the members they need, not `.get()` chains.
`build_report(kind, ...)` builds any kind of the registry (`gate.reports.registry`) in the one
call shape the API, the CLI and the cluster use; a kind with its own engine names it there by
reference (`module:function`), loaded here (`body_engine`), so the catalogue imports no engine.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from functools import cache
from typing import Any, NotRequired, TypedDict, cast

import polars as pl

from gate.privacy.removal import InputsRemoved, inputs_removed
from gate.protocol.report_envelopes import seal
from gate.receipts.values import OUTCOME_EFFECTIVENESS_CLASS
from gate.reports.params import ParamValue
from gate.reports.params import ReportParams as ReportParams  # analysts import it with the reports
from gate.reports.registry import REPORTS, Cohort, ReportKind
from workbench.dataset.load import Frames
from workbench.dataset.trust import DatasetTrust
from workbench.engines import anomalies as anomaly_engine
from workbench.engines import benchmarks as benchmark_engine
from workbench.engines import confidence as confidence_engine
from workbench.engines import effectiveness as effectiveness_engine
from workbench.engines.anomalies import Anomaly as Anomaly  # the report's members, as the engine builds them
from workbench.engines.anomalies import AnomalyBody
from workbench.engines.benchmarks import BenchmarkBody
from workbench.engines.common import Sample as Sample  # every report states its sample
from workbench.engines.confidence import ConfidenceBody
from workbench.engines.effectiveness import EffectivenessBody
from workbench.engines.effectiveness import (
    EffectivenessMetrics as EffectivenessMetrics,  # the report's members
)
from workbench.reports import numbers

CLASSES: Mapping[str, str] = OUTCOME_EFFECTIVENESS_CLASS

# frames, policy id, parameters, cohort → the sealed report (a JSON object).
Engine = Callable[[Frames, str, ReportParams, Cohort], Mapping[str, Any]]
# frames, parameters, cohort → a new report's body, which `sealed_report` seals in its envelope.
BodyEngine = Callable[[Frames, ReportParams, Cohort], Mapping[str, Any]]


# ---------------------------------------------------------------- the report bodies, as served
# Each report is a plain JSON object (the API and the CLI serve it byte for byte, and its hash
# covers it), so its type is a TypedDict of its members, not a class of its own. The engines
# build the members (workbench.engines); tests/workbench/test_policy_reports.py holds every
# report's members to these types.


# `from` is a Python keyword: this one is spelled as a call.
HealthWindow = TypedDict("HealthWindow", {
    "limit": int | None, "policy_version": str | None, "decisions": int,
    "from": str | None, "to": str | None, "text": str,
})


class Health(TypedDict):
    """The policy's one headline state over one named window (`policy_health`)."""

    state: str
    outcome_rates: str
    anomalies: str
    window: HealthWindow
    because: list[str]


class EffectivenessReport(EffectivenessBody):
    decision_effectiveness_report_version: str
    policy_id: str
    policy_version: str | None
    parameters: dict[str, ParamValue]
    health: NotRequired[Health]
    source: NotRequired[DatasetTrust]  # a report read from a dataset names it
    inputs_removed: NotRequired[InputsRemoved]  # a report over the ledger: `_removed`
    effectiveness_hash: str


class AnomalyReport(AnomalyBody):
    decision_anomaly_report_version: str
    policy_id: str
    policy_version: str | None
    parameters: dict[str, ParamValue]
    source: NotRequired[DatasetTrust]  # a report read from a dataset names it
    inputs_removed: NotRequired[InputsRemoved]  # a report over the ledger: `_removed`
    anomaly_hash: str


class BenchmarkReport(BenchmarkBody):
    decision_benchmark_version: str
    policy_id: str
    policy_version: str | None
    parameters: dict[str, ParamValue]
    source: NotRequired[DatasetTrust]  # a report read from a dataset names it
    inputs_removed: NotRequired[InputsRemoved]  # a report over the ledger: `_removed`
    benchmark_hash: str


class ConfidenceReport(ConfidenceBody):
    decision_confidence_version: str
    policy_version: str | None
    parameters: dict[str, ParamValue]
    source: NotRequired[DatasetTrust]  # a report read from a dataset names it
    inputs_removed: NotRequired[InputsRemoved]  # a report over the ledger: `_removed`
    confidence_hash: str


class PolicyReports(TypedDict):
    """Every policy report of one policy over the same frames (the workbench's Overview)."""

    effectiveness: EffectivenessReport
    confidence: ConfidenceReport
    anomalies: AnomalyReport
    benchmarks: BenchmarkReport


# The kinds of `PolicyReports`, in its order.
POLICY_REPORT_KINDS = ("effectiveness", "confidence", "anomalies", "benchmarks")


def policy_reports_of(reports: Mapping[str, Mapping[str, Any]]) -> PolicyReports:
    """The four policy reports among reports by kind (the workbench store's `reports`)."""
    return cast(PolicyReports, {name: reports[name] for name in POLICY_REPORT_KINDS})


class PacketIntelligence(TypedDict):
    """A packet's `policy_intelligence`: no benchmarks (they describe other scopes)."""

    effectiveness: EffectivenessReport
    anomalies: AnomalyReport
    confidence: ConfidenceReport


Merge = Callable[[Sequence[Mapping[str, pl.DataFrame]]], dict[str, pl.DataFrame]]


def sealed_report(kind: str, policy_id: str, params: ReportParams, body: Mapping[str, Any],
                  frames: Frames | None = None) -> dict[str, Any]:
    """A report kind's body in its envelope: the policy, the parameters it was asked with, the
    body, and the dataset it was read from (if any), sealed by its hash member."""
    entry = REPORTS[kind]
    return seal(entry.envelope_spec, {"policy_id": policy_id, "policy_version": params.policy_version,
                                      "parameters": entry.parameters(params), **body, **_source(frames),
                                      **_removed(frames)})


def _source(frames: Frames | None) -> dict[str, DatasetTrust]:
    """A report read from a dataset names it (`source`: the dataset manifest's `dataset_hash`
    and signing key), so its hash binds to that signed manifest; a ledger report has no member."""
    source = None if frames is None else frames.source
    return {"source": source.copy()} if source else {}


def _removed(frames: Frames | None) -> dict[str, InputsRemoved]:
    """A report over the ledger states how many decisions of its scope in its window had their
    inputs removed, per cause (`inputs_removed`, sealed with it; `{"count": 0, "by": {}}` when none).
    They keep their verdict and outcomes, so every figure counts them as any decision; only the
    facts are gone, so the anomaly report's fact shifts read none of theirs (this count is how many
    rows lacked them). A dataset's rows carry no cause: its reports have no member (docs/privacy.md, §5)."""
    removed = None if frames is None else frames.removed
    return {"inputs_removed": inputs_removed(removed)} if removed is not None else {}


def _merged(merge: Merge, kind: str, frames: Frames, compute: Callable[[], Mapping[str, pl.DataFrame]],
            own_scope: str | None = None) -> dict[str, pl.DataFrame]:
    """The engine's merged state over the frames: the dataset's rollups of the selection when it
    has current ones (`workbench.dataset.rollups`), else `compute()` over the rows. Both are merges of
    the same engine's partials, so the report is the same either way (a test holds them equal)."""
    if _rolled_up(frames):
        return merge([frames.rollup.partial(kind, own_scope=own_scope)])
    return merge([compute()])


def effectiveness_report(frames: Frames, policy_id: str, params: ReportParams, *,
                         anomalies: AnomalyBody | None = None, with_health: bool = True) -> EffectivenessReport:
    """The effectiveness report, with its `health` (`policy_health`) unless `with_health` is
    False (the month-by-month course needs only the scores). `anomalies`: the anomaly report of
    the same frames and parameters when the caller has it already (else it is computed)."""
    shared = None
    if with_health and anomalies is None and not _rolled_up(frames):
        # From rows, the anomaly state's sample is the effectiveness state (the same decisions
        # joined to the same outcomes): one join serves both reports. The health reads the
        # findings' recommendation and first reason, never their decision ids: no evidence.
        shared = _anomaly_state(frames, evidence=False)
    state = _merged(effectiveness_engine.merge, "effectiveness", frames,
                    lambda: {"sample": shared["sample"]} if shared is not None
                    else effectiveness_engine.partial(frames.decisions, frames.outcomes))
    # The engines build the members their types name; a test holds every report to its type.
    body = effectiveness_engine.finalize(state, CLASSES, min_sample=params.min_sample)
    health = policy_health(body, anomalies or _anomaly_body(frames, params, shared), params) if with_health else None
    return cast(EffectivenessReport, sealed_report("effectiveness", policy_id, params,
                                                   {**body, "health": health} if health is not None else body, frames))


def _rolled_up(frames: Frames) -> bool:
    """Do the policy reports of these frames merge the dataset's rollups (`_merged`)?"""
    return frames.rollup is not None and bool(frames.rollup.usable(CLASSES))


def _anomaly_state(frames: Frames, *, evidence: bool = True) -> dict[str, pl.DataFrame]:
    """`evidence` False: from rows, without the states of decision ids (`anomaly_engine.partial`);
    from rollups, which hold them already, the same state either way."""
    return _merged(anomaly_engine.merge, "anomalies", frames,
                   lambda: anomaly_engine.partial(frames.decisions, frames.outcomes, CLASSES, frames.facts,
                                                  evidence=evidence))


def _anomaly_body(frames: Frames, params: ReportParams,
                  state: Mapping[str, pl.DataFrame] | None = None) -> AnomalyBody:
    """`state`: the merged anomaly state of these frames when the caller has it already."""
    state = _anomaly_state(frames) if state is None else state
    return anomaly_engine.finalize(state, CLASSES, min_sample=params.min_sample, threshold=params.threshold,
                                   max_items=params.max_items)


def anomaly_report(frames: Frames, policy_id: str, params: ReportParams) -> AnomalyReport:
    body = _anomaly_body(frames, params)
    return cast(AnomalyReport, sealed_report("anomalies", policy_id, params, body, frames))


def _health_state(rate: str, shifts: str) -> str:
    """The outcome rates' recommendation and the anomalies' into one state: too little data
    first, then an anomaly to investigate, then a rate to review, then anything to monitor."""
    if rate == "insufficient_data":
        return "insufficient_data"
    if shifts == "investigate":
        return "investigate"
    if rate == "review_policy":
        return "review_policy"
    if "monitor" in (rate, shifts):
        return "monitor"
    return "healthy"


def _health_window(sample: Sample, params: ReportParams) -> HealthWindow:
    """The window the health speaks for, named in words (`text`) as well as in members."""
    first, last = sample["first_decision_at"], sample["last_decision_at"]
    versions = f"version {params.policy_version}" if params.policy_version else "every version"
    text = (f"latest {sample['decisions_considered']} decisions "
            f"(limit {'all' if params.limit is None else params.limit}, {versions})"
            + (f", {first[:10]} to {last[:10]}" if first and last else ""))
    return {"limit": params.limit, "policy_version": params.policy_version,
            "decisions": sample["decisions_considered"], "from": first, "to": last, "text": text}


def policy_health(effectiveness: EffectivenessBody, anomalies: AnomalyBody, params: ReportParams) -> Health:
    """The policy's one headline state over one named window: the outcome rates (the
    effectiveness `recommendation`) and their trend and shifts (the anomaly detectors compare
    the newest version with the one before and the newest month's facts with earlier months).
    An anomaly to investigate outranks a healthy rate, so no card says "healthy" while another
    says "investigate" (docs/intelligence.md, "Health")."""
    rate, shifts = effectiveness["recommendation"], anomalies["recommendation"]
    metrics = effectiveness["metrics"]
    success_rate = metrics["success_rate"]
    # The state's words only where they are the state: the rate's own recommendation is `outcome_rates`.
    because = [f"{metrics['resolved_decisions']} resolved decisions, success rate {numbers.rate(success_rate)}"]
    if shifts in ("investigate", "monitor") and anomalies["anomalies"]:
        because.append(anomalies["anomalies"][0]["reasons"][0])
    return {"state": _health_state(rate, shifts), "outcome_rates": rate, "anomalies": shifts,
            "window": _health_window(effectiveness["sample"], params), "because": because}


def benchmark_report(frames: Frames, policy_id: str, params: ReportParams, *, own_scope: str,
                     opted_in: AbstractSet[str]) -> BenchmarkReport:
    state = _merged(benchmark_engine.merge, "benchmarks", frames,
                    lambda: benchmark_engine.partial(frames.decisions, frames.outcomes, CLASSES, own_scope=own_scope),
                    own_scope=own_scope)
    body = benchmark_engine.finalize(state, CLASSES, own_scope=own_scope, opted_in=opted_in,
                                     min_cohort_scopes=params.min_cohort_scopes,
                                     min_cohort_decisions=params.min_cohort_decisions)
    return cast(BenchmarkReport, sealed_report("benchmarks", policy_id, params, body, frames))


def confidence_report(frames: Frames, policy_id: str, params: ReportParams) -> ConfidenceReport:
    """Decision confidence (docs/intelligence.md). `policy_version` names the current version
    and does not filter: load the frames of every version (`from_ledger(…, policy_version=None)`)."""
    view = frames.rollup
    if hasattr(view, "confidence"):  # a cluster's view (workbench.cluster.reports): partials from its workers
        body = confidence_engine.finalize(
            view.confidence(verdict=params.verdict, action=params.action), policy_id=policy_id, classes=CLASSES,
            policy_version=params.policy_version, verdict=params.verdict, action=params.action,
            min_sample=params.min_sample)
    else:
        body = confidence_engine.confidence_report(
            frames.decisions, frames.outcomes, policy_id=policy_id, classes=CLASSES,
            policy_version=params.policy_version, verdict=params.verdict, action=params.action,
            min_sample=params.min_sample)
    return cast(ConfidenceReport, seal("confidence", {
        "policy_id": policy_id, "policy_version": body["based_on"]["policy_version"],
        "parameters": REPORTS["confidence"].parameters(params), **body, **_source(frames),
        **_removed(frames)}))


def packet_intelligence(frames: Frames, record: Mapping[str, Any]) -> PacketIntelligence:
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


# Each built-in kind's function, in the one call shape of `build_report`.
_BUILT_IN: dict[str, Engine] = {
    "effectiveness": lambda frames, policy_id, params, _: effectiveness_report(frames, policy_id, params),
    "confidence": lambda frames, policy_id, params, _: confidence_report(frames, policy_id, params),
    "anomalies": lambda frames, policy_id, params, _: anomaly_report(frames, policy_id, params),
    "benchmarks": lambda frames, policy_id, params, cohort: benchmark_report(
        frames, policy_id, params, own_scope=cohort.own_scope, opted_in=cohort.opted_in),
}


def build_report(kind: ReportKind, frames: Frames, policy_id: str, params: ReportParams,
                 cohort: Cohort, *, anomalies: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    """The sealed `kind` report over `frames`: a kind with its own `engine` has that body sealed in
    its envelope (`sealed_report`); a built-in kind is its function above. `anomalies`: the anomaly
    report of the same frames and parameters when the caller has it (the effectiveness report's
    health reads it instead of computing it again; the report is the same)."""
    if anomalies is not None and kind.name == "effectiveness":
        return effectiveness_report(frames, policy_id, params, anomalies=cast(AnomalyBody, anomalies))
    if kind.engine is not None:
        return sealed_report(kind.name, policy_id, params, body_engine(kind.engine)(frames, params, cohort), frames)
    return _BUILT_IN[kind.name](frames, policy_id, params, cohort)


@cache
def body_engine(reference: str) -> BodyEngine:
    """A kind's own engine, named in the registry as `module:function` (imported once)."""
    module, _, name = reference.partition(":")
    engine = getattr(importlib.import_module(module), name, None) if name else None
    if not callable(engine):
        raise LookupError(f"report engine {reference!r} is not a function named module:function")
    return cast(BodyEngine, engine)
