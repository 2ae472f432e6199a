"""Explainable anomalies of one policy: deterministic statistics, no model predictions.

Three detectors (formulas in docs/intelligence.md, "Anomalies"):

* `failure_rate_shift` by matched rule, reason code and action: a segment's failure rate
  against the rest of the same policy (its own baseline), and by policy version: the newest
  version against the one before it;
* `verdict_mix_shift`: the share of each verdict (yes / no / review) in the newest policy
  version against the version before it;
* `fact_drift`: the mean of a numeric fact in the newest month of the sample against all
  earlier months.

Each finding has `anomaly_score` = effect × evidence in [0, 1] (effect = 1 − 1/odds ratio for
rates and shares, 1 − e^−|d| for a mean moved by d baseline standard deviations; evidence =
min(1, |z| / 3)), a `severity`, human-readable `reasons` (the first a plain sentence, e.g. "failures
rose from 1.7% to 12.5% after version 2026-08-01"; the statistics after it) and the decision ids
that drive it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

import polars as pl

from gate.vocabulary import VERDICTS
from workbench.engines import fact_moments as factlib
from workbench.engines.common import (
    DEFAULT_RULE,
    EVIDENCE_IDS,
    FAILURE,
    SUCCESS,
    Sample,
    class_counts,
    class_expr,
    evidence,
    latest_rows,
    merge_frames,
    merge_sample,
    merge_top,
    odds_shift,
    r4,
    sample_block,
    severity,
    top_per_group,
)

SEGMENT_DIMENSIONS = ("matched_rule_id", "reason_code", "action")
NONE_VALUE = "(none)"
# An engine state: its frames by name (`segments`, `versions`, `failed`, …).
State = Mapping[str, pl.DataFrame]


class FailureBaseline(TypedDict):
    """A failure-rate shift's comparison group (`_failure_shift`)."""

    failure_rate: float | None
    resolved: int
    failures: int


class FailureObserved(FailureBaseline):
    odds_ratio: float | None
    z: float | None


class MixBaseline(TypedDict):
    """A verdict-mix shift's previous version (`_verdict_mix_shift`)."""

    policy_version: str
    decisions: int
    verdict_shares: dict[str, float | None]


class MixObserved(MixBaseline):
    odds_ratio: float | None
    z: float | None


class FactBaseline(TypedDict):
    """A fact drift's months before the recent one (`_fact_findings`)."""

    months: str
    values: int
    mean: float | None
    stddev: float | None


class FactObserved(TypedDict):
    month: str
    values: int
    mean: float | None
    stddev: float | None
    shift_stddevs: float | None


class Anomaly(TypedDict):
    """One finding (`_finding`): its kind's comparison in `baseline` and what was seen in `observed`."""

    anomaly_id: str
    kind: str
    dimension: str
    value: str
    anomaly_score: float
    severity: str
    reasons: list[str]
    decision_ids: list[str]
    baseline: FailureBaseline | MixBaseline | FactBaseline
    observed: FailureObserved | MixObserved | FactObserved


class VersionsChecked(TypedDict):
    current: str | None
    previous: str | None


class FactsChecked(TypedDict):
    recent_month: str | None
    numeric_facts: int


class AnomalyChecks(TypedDict):
    """What was checked: segments per dimension, the versions compared, the numeric facts."""

    segments: dict[str, int]
    policy_versions: VersionsChecked
    facts: FactsChecked


class AnomalyBody(TypedDict):
    """The anomaly engine's members (`finalize`)."""

    anomaly_count: int
    recommendation: str
    anomalies: list[Anomaly]
    checks: AnomalyChecks
    sample: Sample
SEGMENT_HOW = {"decisions": "sum", "success": "sum", "failure": "sum"}
VERSION_HOW = {"decisions": "sum", "first_at": "min"}


COLUMNS = ("decision_id", "created_at", "month", "policy_version", "verdict", *SEGMENT_DIMENSIONS)


def partial(decisions: pl.LazyFrame, outcomes: pl.LazyFrame, classes: Mapping[str, str],
            facts: pl.LazyFrame | None = None, by: Sequence[str] = (), *,
            evidence: bool = True) -> dict[str, pl.DataFrame]:
    """The additive state of one partition (of each partition of the `by` key columns, keys
    first, when given): `outcome_partial` and the facts' moments. `facts`: the typed facts
    table of exactly these decisions when the source has one (`fact_moments.facts_partial`;
    with `by`, its rows carry the key columns). `evidence` False: the states of decision ids
    (`failed`, `by_verdict`, `fact_high`, `fact_low`) are left empty, so the findings, their
    scores, order and reasons are the same and only their `decision_ids` are empty (what the
    effectiveness report's `health` reads)."""
    state = outcome_partial(decisions, outcomes, classes, by, evidence=evidence)
    # The facts need no outcome: read straight from the decisions, so the join does not carry
    # every decision's facts text through it.
    state.update(factlib.facts_partial(decisions, facts, by, extreme_ids=evidence))
    return state


FINE = (*SEGMENT_DIMENSIONS, "policy_version", "verdict", "month", "status")


def outcome_partial(decisions: pl.LazyFrame, outcomes: pl.LazyFrame, classes: Mapping[str, str],
                    by: Sequence[str] = (), *, evidence: bool = True) -> dict[str, pl.DataFrame]:
    """Every state of `partial` but the facts' (`sample`, `segments`, `failed`, `versions`,
    `by_verdict`, `months`). The decision–outcome join runs once (`latest_rows`); one
    group-by of its rows by every column a state is keyed by (`FINE`, a few hundred groups)
    gives every count, and the newest-decision evidence reads only the rows recent enough to be
    any group's evidence (`_evidence_floor`); `evidence` False: `failed` and `by_verdict` empty."""
    by = list(by)
    joined = latest_rows(decisions.select(*COLUMNS, *by).collect(), outcomes)
    # The fine groups are per day too (`_day`; every state sums it away): their first times
    # then bound each group's newest decisions to about a day (`_evidence_floors`).
    fine = joined.lazy().group_by(*by, *FINE, pl.col("created_at").dt.epoch("d").alias("_day")).agg(
        pl.len().cast(pl.Int64).alias("decisions"), pl.col("outcome_records").sum().cast(pl.Int64),
        pl.col("created_at").min().alias("first_at"), pl.col("created_at").max().alias("last_at"),
        pl.col("created_at").count().cast(pl.Int64).alias("timed"),
    ).collect().with_columns(class_expr(classes))
    versioned = pl.col("policy_version").fill_null(NONE_VALUE)
    segments = [fine.select(*by, pl.lit(dim).alias("dimension"),
                            pl.col(dim).fill_null(DEFAULT_RULE if dim == "matched_rule_id" else NONE_VALUE).alias("value"),
                            "decisions", _count_of(SUCCESS, "success"), _count_of(FAILURE, "failure"))
                for dim in (*SEGMENT_DIMENSIONS, "policy_version")]
    found = _evidence(joined, fine, classes, by) if evidence else [pl.DataFrame(), pl.DataFrame()]
    return {
        "sample": fine.group_by(*by, "status").agg(
            pl.col("decisions").sum(), pl.col("outcome_records").sum(), pl.col("first_at").min(),
            pl.col("last_at").max()).sort([*by, "status"], nulls_last=True),
        "segments": merge_frames(segments, [*by, "dimension", "value"], SEGMENT_HOW),
        "failed": found[0],
        "versions": merge_frames([fine.select(*by, versioned, "verdict", "decisions", "first_at")],
                                 [*by, "policy_version", "verdict"], VERSION_HOW),
        "by_verdict": found[1],
        "months": merge_frames([fine.select(*by, "month", "decisions")], [*by, "month"], {"decisions": "sum"}),
    }


def _count_of(effect: str, name: str) -> pl.Expr:
    return pl.when(pl.col("effect") == effect).then(pl.col("decisions")).otherwise(0).alias(name)


def _evidence(joined: pl.DataFrame, fine: pl.DataFrame, classes: Mapping[str, str],
              by: list[str]) -> list[pl.DataFrame]:
    """`failed` (the newest failed decisions per segment) and `by_verdict` (the newest per
    version and verdict; no outcome needed), each from the rows recent enough to be some
    group's evidence (`_recent`) only, taken from the joined rows already in memory (each
    with its latest status: no second read of the decisions, no second join)."""
    failing = fine.filter(pl.col("effect") == FAILURE)
    dims = (*SEGMENT_DIMENSIONS, "policy_version")
    keys = [*by, "policy_version", "verdict"]
    recent_failed, floor_failed = _recent(failing.with_columns(*[_filled(dim) for dim in dims]),
                                          [[*by, dim] for dim in dims])
    recent_verdict, floor_verdict = _recent(fine.with_columns(_filled("policy_version")), [keys])
    wanted = recent_failed | recent_verdict
    rows = joined.lazy()
    floors = [f for f in (floor_failed, floor_verdict) if f is not None]
    if len(floors) == 2:
        # The earliest floor first, alone: one comparison per row leaves the few rows the
        # per-group predicate then reads.
        rows = rows.filter(pl.col("created_at") >= min(floors))
    recent = rows.with_columns(*[_filled(dim) for dim in dims]).filter(wanted).collect()
    frame = recent.lazy().filter(recent_failed).with_columns(class_expr(classes)).filter(pl.col("effect") == FAILURE)
    failed = [top_per_group(frame.select(*by, pl.lit(dim).alias("dimension"), pl.col(dim).alias("value"),
                                         "created_at", "decision_id"), [*by, "dimension", "value"])
              for dim in dims]
    by_verdict = top_per_group(recent.lazy().filter(recent_verdict).select(*keys, "created_at", "decision_id"), keys)
    return pl.collect_all([pl.concat(failed), by_verdict])


def _filled(dim: str) -> pl.Expr:
    return pl.col(dim).fill_null(DEFAULT_RULE if dim == "matched_rule_id" else NONE_VALUE)


MAX_FLOORS = 64  # groups per predicate; beyond, one floor for all


def _recent(fine: pl.DataFrame, groupings: list[list[str]]) -> tuple[pl.Expr, Any]:
    """Rows that can be evidence of a group of some grouping: at or after their group's floor
    (`_evidence_floor`), as one predicate (every row when some group has no floor), and the
    earliest floor (None when the predicate has no lower bound on `created_at`)."""
    parts: list[pl.Expr] = []
    earliest: list[Any] = []  # each grouping's earliest floor (a datetime)
    for keys in groupings:
        floors = _evidence_floors(fine, keys)
        if floors is None:
            return pl.lit(True), None
        earliest.append(floors["floor"].min())
        if floors.height > MAX_FLOORS:
            parts.append(pl.col("created_at") >= floors["floor"].min())
            continue
        parts.extend(pl.all_horizontal(*[pl.col(k).eq_missing(pl.lit(v, dtype=fine.schema[k]))
                                         for k, v in zip(keys, row[:-1], strict=True)],
                                       pl.col("created_at") >= pl.lit(row[-1]))
                     for row in floors.iter_rows())
    if not parts:
        return pl.lit(False), None
    return pl.any_horizontal(*parts), min(earliest)


def _evidence_floors(fine: pl.DataFrame, keys: list[str]) -> pl.DataFrame | None:
    """Per group of `keys`, a time at or before its EVIDENCE_IDS-th newest decision (`floor`;
    None when some group has no such bound), from the fine groups: fine groups taken newest
    `first_at` first hold, once their timed rows add up to k, k rows at or after the last
    one's `first_at` (a group with fewer rows has no bound: all of them are evidence)."""
    order = pl.col("first_at").sort(descending=True)
    enough = pl.col("timed").sort_by("first_at", descending=True).cum_sum() >= EVIDENCE_IDS
    floors = fine.group_by(keys).agg(order.filter(enough).first().alias("floor"))
    return None if floors["floor"].null_count() else floors.select(*keys, "floor")


def merge(partials: Sequence[Mapping[str, pl.DataFrame]]) -> dict[str, pl.DataFrame]:
    return {
        "sample": merge_sample([p["sample"] for p in partials]),
        "segments": merge_frames([p["segments"] for p in partials], ["dimension", "value"], SEGMENT_HOW),
        "failed": merge_top([p["failed"] for p in partials], ["dimension", "value"]),
        "versions": merge_frames([p["versions"] for p in partials], ["policy_version", "verdict"], VERSION_HOW),
        "by_verdict": merge_top([p["by_verdict"] for p in partials], ["policy_version", "verdict"]),
        "months": merge_frames([p["months"] for p in partials], ["month"], {"decisions": "sum"}),
        **factlib.merge_facts([{k: p[k] for k in ("facts", "fact_high", "fact_low")} for p in partials]),
    }


def _ids(frame: pl.DataFrame, **keys: str) -> list[str]:
    if not frame.height:
        return []
    for name, value in keys.items():
        frame = frame.filter(pl.col(name) == value)
    return frame["decision_id"].to_list()


def _finding(kind: str, dimension: str, value: str, score: float, reasons: list[str], ids: list[str],
             baseline: FailureBaseline | MixBaseline | FactBaseline,
             observed: FailureObserved | MixObserved | FactObserved) -> Anomaly:
    return {
        "anomaly_id": f"{kind}:{dimension}:{value}",
        "kind": kind,
        "dimension": dimension,
        "value": value,
        "anomaly_score": r4(score),
        "severity": severity(round(score, 4)),
        "reasons": reasons,
        "decision_ids": ids,
        "baseline": baseline,
        "observed": observed,
    }


DIMENSION_WORDS = {"matched_rule_id": "rule", "reason_code": "reason code", "action": "action",
                   "policy_version": "version"}


def _failure_sentence(dimension: str, value: str, p1: float, p0: float, against: str) -> str:
    """The finding in one plain sentence, before its statistics: what rose, from what to what."""
    if dimension == "policy_version":
        return f"failures rose from {p0:.1%} to {p1:.1%} after version {value}"
    return (f"failures are {p1:.1%} under {DIMENSION_WORDS.get(dimension, dimension)} {value}, "
            f"against {p0:.1%} for {against}")


def _failure_shift(dimension: str, value: str, f1: int, n1: int, f0: int, n0: int, against: str,
                   ids: list[str]) -> Anomaly | None:
    odds, z = odds_shift(f1, n1, f0, n0)
    if odds <= 1 or z <= 0:
        return None
    score = (1 - 1 / odds) * evidence(z)
    p1, p0 = f1 / n1, f0 / n0
    reasons = [
        _failure_sentence(dimension, value, p1, p0, against),
        (f"failure rate {p1:.1%} ({f1} of {n1} resolved decisions) under {dimension} '{value}' "
         f"against {p0:.1%} ({f0} of {n0}) for {against}"),
        f"odds of failure x{odds:.2f}, z = {z:.2f}",
    ]
    return _finding("failure_rate_shift", dimension, value, score, reasons, ids,
                    {"failure_rate": r4(p0), "resolved": n0, "failures": f0},
                    {"failure_rate": r4(p1), "resolved": n1, "failures": f1, "odds_ratio": r4(odds), "z": r4(z)})


def _segment_findings(state: State, min_sample: int, s_tot: int, f_tot: int) -> list[Anomaly]:
    out = []
    for row in state["segments"].filter(pl.col("dimension") != "policy_version").iter_rows(named=True):
        s1, f1 = row["success"], row["failure"]
        s0, f0 = s_tot - s1, f_tot - f1
        if s1 + f1 < min_sample or s0 + f0 < min_sample:
            continue
        ids = _ids(state["failed"], dimension=row["dimension"], value=row["value"])
        found = _failure_shift(row["dimension"], row["value"], f1, s1 + f1, f0, s0 + f0,
                               "the rest of the policy", ids)
        if found:
            out.append(found)
    return out


def _versions(state: State) -> list[tuple[str, Any]]:
    """Versions by the time they were first seen (ties by version text), oldest first."""
    v = state["versions"]
    if not v.height:
        return []
    firsts = v.group_by("policy_version").agg(pl.col("first_at").min()).sort(["first_at", "policy_version"])
    return list(firsts.iter_rows())


def _version_findings(state: State, min_sample: int) -> tuple[list[Anomaly], VersionsChecked]:
    """The findings of the current version against the previous one: a shift of the failure
    rate, a shift of the verdict mix; and which versions those are."""
    order = _versions(state)
    info: VersionsChecked = {"current": order[-1][0] if order else None, "previous": order[-2][0] if len(order) > 1 else None}
    if len(order) < 2:
        return [], info
    current, previous = order[-1][0], order[-2][0]
    out = [found for found in (_version_failure_shift(state, current, previous, min_sample),
                               _verdict_mix_shift(state, current, previous, min_sample)) if found]
    return out, info


def _version_failure_shift(state: State, current: str, previous: str,
                           min_sample: int) -> Anomaly | None:
    """A failure rate of the current version apart from the previous version's, if any."""
    rows = {r["value"]: r for r in state["segments"].filter(pl.col("dimension") == "policy_version")
            .iter_rows(named=True)}
    cur, prev = rows.get(current), rows.get(previous)
    if not (cur and prev):
        return None
    if min(cur["success"] + cur["failure"], prev["success"] + prev["failure"]) < min_sample:
        return None
    ids = _ids(state["failed"], dimension="policy_version", value=current)
    return _failure_shift("policy_version", current, cur["failure"], cur["success"] + cur["failure"],
                          prev["failure"], prev["success"] + prev["failure"],
                          f"the previous version '{previous}'", ids)


def _verdict_mix_shift(state: State, current: str, previous: str, min_sample: int) -> Anomaly | None:
    """The verdict whose share moved most (by odds and evidence) from the previous version to
    the current one, when both have `min_sample` decisions."""
    mix = {(r["policy_version"], r["verdict"]): r["decisions"] for r in state["versions"].iter_rows(named=True)}
    n1 = sum(c for (v, _), c in mix.items() if v == current)
    n0 = sum(c for (v, _), c in mix.items() if v == previous)
    if n1 < min_sample or n0 < min_sample:
        return None
    # The verdict with the best score (first of equals) and the one whose share rose most.
    candidates = []
    for verdict in VERDICTS:
        h1, h0 = mix.get((current, verdict), 0), mix.get((previous, verdict), 0)
        odds, z = odds_shift(h1, n1, h0, n0)
        candidates.append(((1 - 1 / max(odds, 1 / odds)) * evidence(z), verdict, h1, h0, odds, z))
    score, verdict, h1, h0, odds, z = max(candidates, key=lambda c: c[0])
    rose = max(VERDICTS, key=lambda v: mix.get((current, v), 0) / n1 - mix.get((previous, v), 0) / n0)
    shares = ", ".join(
        f"{v} {mix.get((previous, v), 0) / n0:.1%} -> {mix.get((current, v), 0) / n1:.1%}" for v in VERDICTS)
    reasons = [
        (f"'{verdict}' verdicts {'rose' if h1 / n1 > h0 / n0 else 'fell'} from {h0 / n0:.1%} "
         f"to {h1 / n1:.1%} after version {current}"),
        (f"share of verdict '{verdict}' moved from {h0 / n0:.1%} ({h0} of {n0}) under version '{previous}' "
         f"to {h1 / n1:.1%} ({h1} of {n1}) under version '{current}'"),
        f"verdict mix {shares}; odds ratio {odds:.2f}, z = {z:.2f}",
    ]
    ids = _ids(state["by_verdict"], policy_version=current, verdict=rose)
    return _finding(
        "verdict_mix_shift", "policy_version", current, score, reasons, ids,
        {"policy_version": previous, "decisions": n0,
         "verdict_shares": {v: r4(mix.get((previous, v), 0) / n0) for v in VERDICTS}},
        {"policy_version": current, "decisions": n1,
         "verdict_shares": {v: r4(mix.get((current, v), 0) / n1) for v in VERDICTS},
         "odds_ratio": r4(odds), "z": r4(z)},
    )


def _moments(rows: list[dict[str, Any]]) -> tuple[float, float, float]:
    n = sum(r["n"] for r in rows)
    total = sum(r["total"] for r in rows)
    total_sq = sum(r["total_sq"] for r in rows)
    if n == 0:
        return 0.0, 0.0, 0.0
    mean = total / n
    var = max(0.0, (total_sq - n * mean * mean) / (n - 1)) if n > 1 else 0.0
    return n, mean, var


def _fact_findings(state: State, min_sample: int) -> tuple[list[Anomaly], FactsChecked]:
    months = state["months"]
    recent = max(months["month"].to_list()) if months.height else None
    facts = state["facts"]
    info: FactsChecked = {"recent_month": recent, "numeric_facts": 0}
    if recent is None or not facts.height:
        return [], info
    excluded = set(facts.group_by("fact").agg(pl.col("non_numeric").sum())
                   .filter(pl.col("non_numeric") > 0)["fact"].to_list())
    out = []
    for fact in sorted(set(facts["fact"].to_list()) - excluded):
        info["numeric_facts"] += 1
        rows = facts.filter(pl.col("fact") == fact)
        nb, mb, vb = _moments(rows.filter(pl.col("month") != recent).to_dicts())
        nr, mr, vr = _moments(rows.filter(pl.col("month") == recent).to_dicts())
        if nb < min_sample or nr < min_sample or mb == mr:
            continue
        sd = math.sqrt(vb) or math.sqrt((vb * (nb - 1) + vr * (nr - 1)) / max(1, nb + nr - 2))
        d = (mr - mb) / sd if sd else math.copysign(math.inf, mr - mb)
        se = math.sqrt(vb / nb + vr / nr)
        z = (mr - mb) / se if se else math.copysign(math.inf, mr - mb)
        score = (1 - math.exp(-abs(d))) * evidence(z)
        side = "fact_high" if mr > mb else "fact_low"
        ids = _ids(state[side], fact=fact, month=recent)
        shown_d = f"{d:+.2f}" if math.isfinite(d) else "more than any"
        reasons = [
            f"fact {fact} {'rose' if mr > mb else 'fell'} from {mb:.4g} to {mr:.4g} on average in {recent}",
            (f"mean of fact '{fact}' moved from {mb:.4g} (baseline: {int(nb)} values before {recent}) "
             f"to {mr:.4g} ({int(nr)} values in {recent})"),
            f"shift of {shown_d} baseline standard deviations, z = {z:.2f}" if math.isfinite(z)
            else "the baseline and recent values do not vary, so any change is a full shift",
        ]
        out.append(_finding("fact_drift", "fact", fact, score, reasons, ids,
                            {"months": "before " + recent, "values": int(nb), "mean": r4(mb), "stddev": r4(math.sqrt(vb))},
                            {"month": recent, "values": int(nr), "mean": r4(mr), "stddev": r4(math.sqrt(vr)),
                             "shift_stddevs": r4(d) if math.isfinite(d) else None}))
    return out, info


def finalize(state: Mapping[str, pl.DataFrame], classes: Mapping[str, str], *, min_sample: int,
             threshold: float, max_items: int) -> AnomalyBody:
    block = sample_block(state["sample"], classes)
    counts = class_counts(state["sample"], classes)
    found = _segment_findings(state, min_sample, counts[SUCCESS], counts[FAILURE])
    version_found, versions = _version_findings(state, min_sample)
    fact_found, facts_info = _fact_findings(state, min_sample)
    every = [a for a in (*found, *version_found, *fact_found) if a["anomaly_score"] >= threshold]
    every.sort(key=lambda a: (-a["anomaly_score"], a["anomaly_id"]))
    if block["decisions_considered"] < min_sample:
        recommendation = "insufficient_data"
    elif not every:
        recommendation = "stable"
    elif any(a["severity"] == "high" for a in every):
        recommendation = "investigate"
    else:
        recommendation = "monitor"
    return {
        "anomaly_count": len(every),
        "recommendation": recommendation,
        "anomalies": every[:max_items],
        "checks": {
            "segments": {dim: int((state["segments"]["dimension"] == dim).sum()) if state["segments"].height else 0
                         for dim in SEGMENT_DIMENSIONS},
            "policy_versions": versions,
            "facts": facts_info,
        },
        "sample": block,
    }


def anomalies(decisions: pl.LazyFrame, outcomes: pl.LazyFrame, classes: Mapping[str, str], *,
              min_sample: int, threshold: float, max_items: int, facts: pl.LazyFrame | None = None) -> AnomalyBody:
    return finalize(merge([partial(decisions, outcomes, classes, facts)]), classes,
                    min_sample=min_sample, threshold=threshold, max_items=max_items)
