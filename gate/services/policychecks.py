"""The four domain policy checks (refund, cancellation, return, trial), decided by Rulebook v1.

Each check is two steps with separate authority:

1. Facts: the caller's arguments are validated (`ArgumentsInvalid` names every problem) and the
   service's vendor policy table is looked up (`gate.policychecks.tables`). The lookup derives
   plain facts only: whether the vendor is in the table, whether a row covers the plan, the
   row's terms, and for window checks `days_left_in_window = window − days_since_purchase`
   (a rulebook leaf compares a field with a constant, never two fields).
2. Verdict: the service's rulebook (`gate/data/policychecks/<service>.rulebook.json`) is evaluated
   over those facts by the gate's own compiled evaluator (`gate.rulebook.get_evaluator`), the
   same engine as `/api/decide`: one engine, one meaning. The verdict, code and action are the
   rulebook's application verdict, reason code and action, unchanged.

The result is advisory (`production_verdict: false`): a check never stands in for a signed
Decision Record. SECURITY: an evaluation that does not end with status "ok" (it cannot after
argument validation) raises `CheckFailed` instead of answering, so it can never read as ALLOWED.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from gate.bodies import ErrorItem, problems
from gate.clock import Clock, SystemClock, iso_ms
from gate.errors import CodedError, RulebookInvalid, Signal
from gate.policychecks.tables import (
    ANY_PLAN,
    TABLES_DIR,
    Citation,
    VendorRow,
    VendorTable,
    load_tables,
    normalize_id,
)
from gate.protocol.canonical import sha256_hex
from gate.protocol.evaluation import EvaluationTrace
from gate.rulebook import CompiledRulebook, RulebookDocument, checked_rulebook, get_evaluator

__all__ = [
    "CHECKS",
    "DEFAULT_REGION",
    "MAX_DAYS",
    "ArgumentsInvalid",
    "CheckFailed",
    "CheckSpec",
    "PolicyCheckService",
]

DEFAULT_REGION = "US"
MAX_DAYS = 36_500  # the schema's maximum (tests/core/test_check_body_schemas.py holds them equal)


@dataclass(frozen=True, slots=True)
class CheckSpec:
    service: str
    tool: str
    title: str
    description: str
    uses_days: bool
    window_term: str | None  # the terms key holding the window in days, for window checks
    rest_path: str


CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec("refund", "refund_eligibility", "Refund eligibility",
              "Whether a purchase from a vendor can still be refunded under the vendor's published terms "
              "(ALLOWED, DENIED or UNKNOWN).", True, "refund_window_days", "/api/v1/refund/eligibility"),
    CheckSpec("cancellation", "cancellation_penalty", "Cancellation penalty",
              "Whether cancelling a vendor subscription plan is free, costs an early-termination fee or is "
              "locked for a commitment term (FREE_CANCEL, PENALTY, LOCKED or UNKNOWN).", False, None,
              "/api/v1/cancel/penalty"),
    CheckSpec("return", "return_eligibility", "Return eligibility",
              "Whether an item bought from a vendor can still be returned (RETURNABLE, EXPIRED, "
              "NON_RETURNABLE or UNKNOWN).", True, "return_window_days", "/api/v1/return/eligibility"),
    CheckSpec("trial", "trial_terms", "Trial terms",
              "Whether a vendor plan offers a free trial, and on which terms (TRIAL_AVAILABLE, NO_TRIAL or "
              "UNKNOWN).", False, None, "/api/v1/trial/terms"),
)
BY_TOOL = {spec.tool: spec for spec in CHECKS}
BY_SERVICE = {spec.service: spec for spec in CHECKS}


class CheckInputs(TypedDict):
    """A check's arguments once checked and normalized (`validate_arguments`)."""

    vendor: str
    region: str
    plan: str
    days_since_purchase: NotRequired[int | float]  # the refund and return checks


class CheckRulebookResult(TypedDict):
    """What the check's rulebook gave, as a Decision Record states an evaluation."""

    status: str
    decision: str
    application_verdict: str
    action: str
    reason_code: str
    matched_rule_id: str | None
    evaluation: EvaluationTrace


class CheckResult(TypedDict):
    """A check's answer (the MCP tool's structuredContent, the REST twin's body): advisory only."""

    tool: str
    service: str
    verdict: str
    code: str
    decision: str
    action: str
    message: str
    vendor: str
    vendor_name: str | None
    inputs: CheckInputs
    terms: dict[str, Any] | None  # the vendor's terms as its table states them
    rulebook_id: str
    rules_version: str
    rulebook_hash: str
    policy_version: str
    policy_table_hash: str
    sources: list[Citation]
    illustrative: bool
    production_verdict: bool
    evaluated_at: str
    rulebook_result: CheckRulebookResult


class ServiceSources(TypedDict):
    """One service's table and rulebook, with every row's citation."""

    tool: str
    rulebook_id: str
    rules_version: str
    rulebook_hash: str
    policy_version: str
    policy_table_hash: str
    illustrative: bool
    notice: str
    sources: list[SourceRow]


class SourceRow(Citation):
    vendor_name: str
    terms: dict[str, Any]  # the vendor's terms as its table states them


class PolicySources(TypedDict):
    """`/rules/policy-sources.json`."""

    ok: bool
    policy_sources_version: str
    services: dict[str, ServiceSources]


class ArgumentsInvalid(Signal, ValueError):
    """The arguments of a check are not usable; `errors` lists `{field, code, message}`. Each
    shell answers it in its own words (REQUEST_INVALID naming the body or the arguments; MCP's
    invalid params)."""

    def __init__(self, errors: list[ErrorItem]) -> None:
        super().__init__("; ".join(f"{e['field']}: {e['message']}" for e in errors))
        self.errors = errors


class CheckFailed(CodedError):
    """The rulebook did not produce a usable verdict (fail closed: no answer at all)."""

    CODE = "POLICY_CHECK_UNDECIDED"


@dataclass(frozen=True, slots=True)
class _Bound:
    spec: CheckSpec
    table: VendorTable
    rulebook: RulebookDocument
    rulebook_hash: str
    evaluator: CompiledRulebook
    verdicts: tuple[str, ...]


def _load_rulebook(directory: Path, service: str) -> tuple[RulebookDocument, str]:
    path = directory / f"{service}.rulebook.json"
    try:
        rulebook = checked_rulebook(json.loads(path.read_text(encoding="utf-8")))
    except RulebookInvalid as exc:
        raise ValueError(f"{path.name} is not a valid Rulebook v1: {exc.errors}") from None
    return rulebook, sha256_hex(rulebook)


def _verdicts(rulebook: RulebookDocument) -> tuple[str, ...]:
    found = [rule["outcome"]["verdict"] for rule in rulebook["rules"]] + [rulebook["default_outcome"]["verdict"]]
    return tuple(dict.fromkeys(found))


class PolicyCheckService:
    """The four checks over validated tables and rulebooks, loaded once; thread-safe (read-only)."""

    def __init__(self, directory: Path | None = None, *, clock: Clock | None = None,
                 tables: Mapping[str, VendorTable] | None = None) -> None:
        directory = Path(directory or TABLES_DIR)
        tables = tables or load_tables(directory)
        self.clock = clock or SystemClock()
        self._bound: dict[str, _Bound] = {}
        for spec in CHECKS:
            rulebook, digest = _load_rulebook(directory, spec.service)
            self._bound[spec.tool] = _Bound(spec, tables[spec.service], rulebook, digest,
                                            get_evaluator(rulebook, digest), _verdicts(rulebook))

    # ------------------------------------------------------------------ metadata

    def spec_for_service(self, service: str) -> CheckSpec:
        return BY_SERVICE[service]

    def spec_for_tool(self, tool: str) -> CheckSpec:
        return BY_TOOL[tool]

    def table(self, service: str) -> VendorTable:
        return self._bound[BY_SERVICE[service].tool].table

    def rulebook(self, service: str) -> tuple[RulebookDocument, str]:
        bound = self._bound[BY_SERVICE[service].tool]
        return bound.rulebook, bound.rulebook_hash

    def verdicts(self, tool: str) -> tuple[str, ...]:
        return self._bound[tool].verdicts

    def sources(self) -> PolicySources:
        """`/rules/policy-sources.json`: every table's rows with their citations, and the rulebooks."""
        services: dict[str, ServiceSources] = {}
        for spec in CHECKS:
            bound = self._bound[spec.tool]
            services[spec.service] = {
                "tool": spec.tool,
                "rulebook_id": bound.rulebook["rulebook_id"],
                "rules_version": bound.rulebook["version"],
                "rulebook_hash": bound.rulebook_hash,
                "policy_version": bound.table.policy_version(),
                "policy_table_hash": bound.table.table_hash,
                "illustrative": bound.table.illustrative,
                "notice": bound.table.notice,
                "sources": [{**row.source(), "vendor_name": row.vendor_name, "terms": dict(row.terms)}
                            for row in bound.table.rows],
            }
        return {"ok": True, "policy_sources_version": "policy_sources_v1", "services": services}

    # ------------------------------------------------------------------ checking

    def check(self, tool: str, arguments: Any, schema: str | None = None) -> CheckResult:
        """Validate `arguments`, look up the table, evaluate the rulebook: the structured result.
        `schema`: a body that holds the arguments and more members of its own, checked whole by
        that schema (a workflow's: `gate.services.workflows.body_schema`) instead of the check's.

        Raises `KeyError` for an unknown tool, `ArgumentsInvalid` for bad arguments and
        `CheckFailed` when the rulebook gives no usable verdict.
        """
        bound = self._bound[tool]
        spec = bound.spec
        inputs = validate_arguments(spec, arguments, schema)
        row = bound.table.lookup(inputs["vendor"], inputs["region"], inputs["plan"])
        facts = _facts(spec, bound.table, inputs, row)
        evaluation = bound.evaluator.evaluate(facts)
        if evaluation.status != "ok" or evaluation.application_verdict not in bound.verdicts:
            raise CheckFailed(f"{bound.rulebook['rulebook_id']} gave no verdict ({evaluation.status})")
        verdict, code = evaluation.application_verdict, evaluation.reason_code
        return {
            "tool": spec.tool,
            "service": spec.service,
            "verdict": verdict,
            "code": code,
            "decision": evaluation.decision,
            "action": evaluation.action,
            "message": _message(spec, code, inputs, row, facts),
            "vendor": inputs["vendor"],
            "vendor_name": row.vendor_name if row else None,
            "inputs": inputs,
            "terms": dict(row.terms) if row else None,
            "rulebook_id": bound.rulebook["rulebook_id"],
            "rules_version": bound.rulebook["version"],
            "rulebook_hash": bound.rulebook_hash,
            "policy_version": bound.table.policy_version(),
            "policy_table_hash": bound.table.table_hash,
            "sources": [row.source()] if row else [],
            "illustrative": bound.table.illustrative,
            "production_verdict": False,
            "evaluated_at": iso_ms(self.clock.now()),
            "rulebook_result": {
                "status": evaluation.status,
                "decision": evaluation.decision,
                "application_verdict": verdict,
                "action": evaluation.action,
                "reason_code": code,
                "matched_rule_id": evaluation.matched_rule_id,
                "evaluation": evaluation.trace(),
            },
        }


def validate_arguments(spec: CheckSpec, arguments: Any, schema: str | None = None) -> CheckInputs:
    """The normalized arguments `{vendor, region, plan[, days_since_purchase]}` or ArgumentsInvalid.

    The check's schema (`gate/bodies/policy-check-<service>.schema.json`, or `schema`, one that
    composes it with a caller's own members) is the one check: every
    problem it finds is listed (`gate.bodies.problems`), unknown arguments first (closed input,
    like rulebooks). A null is a wrong value like any other, never an absent member, and a number
    is finite (a caller in process may pass NaN: no JSON number, so the schema's `number` refuses
    it). Then `vendor` and `plan` are normalized ids (`"Best Buy"` → `"best-buy"`); `region` is an
    ISO 3166 alpha-2 code, upper-cased, default "US"; a missing `plan` means the vendor's
    any-plan row (`"*"`).
    """
    errors = problems(schema or f"policy-check-{spec.service}", arguments)
    if errors:
        raise ArgumentsInvalid(errors)
    inputs: CheckInputs = {"vendor": normalize_id(arguments["vendor"]),
                              "region": arguments.get("region", DEFAULT_REGION).upper(),
                              "plan": normalize_id(arguments["plan"]) if "plan" in arguments else ANY_PLAN}
    if spec.uses_days:
        inputs["days_since_purchase"] = arguments["days_since_purchase"]
    return inputs


def _facts(spec: CheckSpec, table: VendorTable, inputs: CheckInputs, row: VendorRow | None) -> dict[str, Any]:
    facts: dict[str, Any] = dict(inputs, vendor_supported=table.has_vendor(inputs["vendor"]), policy_found=row is not None)
    if row is not None:
        facts["policy"] = dict(row.terms)
        if spec.window_term is not None:
            window = row.terms.get(spec.window_term)
            if isinstance(window, int) and not isinstance(window, bool):
                facts["days_left_in_window"] = window - inputs["days_since_purchase"]
    return facts


def _message(spec: CheckSpec, code: str, inputs: CheckInputs, row: VendorRow | None, facts: dict[str, Any]) -> str:
    who = f"{row.vendor_name} ({row.region}, plan {row.plan})" if row else f"{inputs['vendor']} ({inputs['region']})"
    if code == "UNSUPPORTED_VENDOR":
        return f"{inputs['vendor']} is not in the {spec.service} policy table; check the vendor's terms manually."
    if code == "NON_US_REGION":
        return f"Only US terms are covered; region {inputs['region']} needs a manual check."
    if code == "PLAN_NOT_COVERED":
        return f"{who}: no row covers plan {inputs['plan']}; check the vendor's terms manually."
    if code == "POLICY_INCOMPLETE" or row is None:
        return f"{who}: the policy row does not settle this check; check the vendor's terms manually."
    terms = row.terms
    if spec.window_term is not None and "days_left_in_window" in facts:
        window, left = terms[spec.window_term], facts["days_left_in_window"]
        noun = "refunds" if spec.service == "refund" else "returns"
        state = f"{_days(left)} left" if left >= 0 else f"{_days(-left)} past the window"
        return (f"{who}: {noun} within {_days(window)} of purchase; "
                f"{_days(inputs['days_since_purchase'])} since purchase, {state}.")
    if code in ("NO_REFUNDS", "NO_RETURNS"):
        return f"{who}: the vendor's terms offer no {'refunds' if code == 'NO_REFUNDS' else 'returns'}."
    if spec.service == "cancellation":
        if code == "NO_PENALTY":
            return f"{who}: cancel any time without a fee."
        penalty = (terms["penalty"] or "a commitment applies").rstrip(".")
        return f"{who}: {penalty} (commitment {terms['commitment_months']} months)."
    if spec.service == "trial":
        if code == "TRIAL_OFFERED":
            card = "card required" if terms["card_required"] else "no card required"
            converts = "converts to a paid plan" if terms["auto_converts"] else "does not convert automatically"
            return f"{who}: free trial of {_days(terms['trial_days'])}, {card}, {converts}."
        return f"{who}: no free trial."
    return f"{who}: {code}."


def _days(value: float) -> str:
    number = int(value) if float(value).is_integer() else value
    return f"{number} day" if number == 1 else f"{number} days"
