"""The report parameters: their documented ranges, their parsing, and the cohort a benchmark reads.

Plain Python (no Polars, no dataset): the API imports this at start-up to document and check a
report's query before anything loads the analytics stack (`workbench.reports.policy`), which a
worker imports on its first report. Which parameters a report kind takes is the kind's entry
(`gate.reports.registry`, above this module: `parse_params(kind, raw)` is there).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from gate.errors import GateError
from gate.vocabulary import VERDICTS


@dataclass(frozen=True)
class Param:
    name: str
    type: type
    default: Any
    low: float
    high: float
    doc: str = ""
    default_doc: str = ""

    def describe(self) -> str:
        bounds = f"{self.low:g} to {self.high:g}" if self.type is not str else f"{self.low:g} to {self.high:g} characters"
        default = self.default_doc or "none (every version)" if self.default is None else f"{self.default:g}" if self.type is not str else self.default
        return f"{self.doc} Range {bounds}; default {default}."


# Ranges are ours (the spec leaves them open); defaults are the reference's typical queries.
PARAMS: dict[str, Param] = {p.name: p for p in (
    Param("policy_version", str, None, 1, 80, "Only decisions made under this policy version."),
    Param("limit", int, 1000, 1, 10_000, "The most recent decisions considered (holds: the most recently "
          "closed holds; every open hold counts)."),
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
    Param("outcome_window_days", int, 30, 0, 3650, "holds: an approval is judged by its decision's latest outcome "
          "once it is this many days old; younger ones are counted apart as too young."),
)}


ParamValue = str | int | float | None
"""A report parameter's value, as a sealed report's `parameters` names it (`ReportParams`' members)."""


@dataclass(frozen=True)
class ReportParams:
    policy_version: str | None = None
    verdict: str | None = None
    action: str | None = None
    limit: int | None = 1000  # None: every decision (`gate report --limit all`, a dataset only)
    min_sample: int = 10
    threshold: float = 0.35
    max_items: int = 5
    min_cohort_scopes: int = 3
    min_cohort_decisions: int = 30
    outcome_window_days: int = 30

    @property
    def ledger_limit(self) -> int:
        """`limit` for a read of the ledger, which always has one (`--limit all` reads a dataset only)."""
        if self.limit is None:
            raise ValueError("a ledger report needs a limit; only a dataset is read whole")
        return self.limit


_ASCII_INTEGER = re.compile(r"[0-9]{1,10}")
_ASCII_DECIMAL = re.compile(r"(?=.{1,32}\Z)-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]{1,3})?")


def _invalid(name: str, message: str) -> GateError:
    return GateError("REQUEST_INVALID", f"{name} {message}",
                     errors=[{"field": name, "code": "invalid_value", "message": message}])


def parse_query(kind: str, accepted: Sequence[str], raw: Mapping[str, str], *,
                limit_high: int | None = None) -> ReportParams:
    """Query-string values → ReportParams, refusing (REQUEST_INVALID) anything out of range or
    not among `accepted`, the parameters of the report `kind`. `limit_high` lets a local dataset
    read raise the limit."""
    for name in raw:
        if name not in accepted:
            raise _invalid(name, f"is not a parameter of the {kind} report (accepted: {', '.join(accepted)})")
    values: dict[str, Any] = {}
    for name in accepted:
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


def cohort_scopes(opted_in: AbstractSet[str], own_scope: str, max_scopes: int) -> list[str]:
    """The other opted-in scopes a benchmark cohort reads: all of them up to `max_scopes` − 1,
    else that many chosen by the sha256 of the scope name (deterministic, not biased by naming).
    The API, the CLI and the workbench all choose the cohort here."""
    # SECURITY: a scope that has not opted in never reads anyone else's data.
    if own_scope not in opted_in:
        return []
    others = sorted(set(opted_in) - {own_scope}, key=lambda s: hashlib.sha256(s.encode()).hexdigest())
    return others[:max_scopes - 1]
