"""Per-decision counterfactuals: simulation-only what-if scenarios over one stored decision.

Each scenario's `context_patch` is applied as a JSON Merge Patch (RFC 7396: objects merge
member by member, `null` removes a member, anything else replaces) over the stored context
whose `inputs` are the stored facts (the request's `context.inputs`, or the schema-validated
`adapter_facts` the adapter emitted; the adapter is not re-run). The patched `context.inputs`
are the scenario's facts; the rest of the patched context gives its action binding. Facts are
evaluated by the gate's own evaluator (`gate.rulebook.get_evaluator`, the same one decide,
replay and the workbench's batch counterfactuals use) with the scope's current rulebook for
the record's rulebook id.

Nothing here authorizes anything: results are labelled `simulation_only`, carry no record
hash or signature, and are never stored. Cost is bounded: at most `MAX_SCENARIOS` scenarios,
each patch within the evaluation input limits and each evaluation within its budget
(`gate.rulebook.budget`), all checked before anything is evaluated.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from gate import vocabulary as C
from gate.errors import GateError
from gate.protocol.canonical import clone, sha256_hex
from gate.protocol.fact_limits import check_facts
from gate.protocol.records import action_binding_from_context, project_view
from gate.protocol.requests import PreparedRequest, forbidden_output_fields
from gate.protocol.types import AttestationOutcome, RecordMembers, RulebookReference
from gate.replay.historical import (
    Snapshot,
    StoredMaterial,
    rebuild_record,
    stored_request,
)
from gate.rulebook import CompiledRulebook, Evaluation, get_evaluator
from gate.rulebook.budget import check_evaluation_cost
from gate.strict_json import JsonValue

MAX_SCENARIOS = 20
MAX_LABEL = 200
SCENARIO_MEMBERS = ("scenario_id", "label", "context_patch")
REQUEST_MEMBERS = ("scenarios", "response_view")
OUTCOME_FIELDS = ("status", "verdict", "application_verdict", "action", "reason_code", "matched_rule_id")
_SCENARIO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,119}$")

# Recommendation per scenario (docs/replay.md): what the simulated result would ask of a caller.
RECOMMENDATIONS = {
    "unchanged": "the scenario gives the stored result; nothing to do",
    "would_approve": "the scenario would approve; request a new binding decision before acting",
    "would_block": "the scenario would block the action",
    "would_hold_for_review": "the scenario would hold the action for its owner",
    "collect_required_input": "the scenario lacks required input; collect it first",
}


class Scenario(TypedDict):
    """One scenario of a counterfactuals body, as `parse_counterfactual_request` accepted it."""

    scenario_id: str
    label: NotRequired[str | None]
    context_patch: dict[str, JsonValue]


class ScenarioChange(TypedDict):
    """An outcome field (or the action binding) the scenario changes: its stored and scenario value."""

    field: str
    stored: object
    scenario: object


class ScenarioResult(AttestationOutcome):
    """One scenario's entry: its outcome (the members of `AttestationOutcome`, written after
    `simulation_only`), what changed, the recommendation, and the simulated record when a view
    was asked for."""

    scenario_id: str
    label: str
    simulation_only: bool
    changed: bool
    diff: list[ScenarioChange]
    recommendation: str
    recommendation_text: str
    decision: NotRequired[dict[str, JsonValue]]


class EvaluatedAgainst(TypedDict):
    kind: str
    rulebook: RulebookReference
    evaluator_version: str


class CounterfactualsBody(TypedDict):
    """The counterfactuals response body; `counterfactual_hash` is the sha256 of the rest."""

    ok: bool
    decision_counterfactuals_version: str
    decision_id: str
    simulation_only: bool
    authorizes_mutation: bool
    evaluated_against: EvaluatedAgainst
    stored: dict[str, JsonValue]
    baseline: AttestationOutcome
    scenario_count: int
    scenarios: list[ScenarioResult]
    counterfactual_hash: NotRequired[str]


def _invalid(errors: list[dict[str, str]]) -> GateError:
    return GateError("COUNTERFACTUAL_SCENARIOS_INVALID", errors[0]["message"], errors=errors,
                     max_scenarios=MAX_SCENARIOS)


def parse_counterfactual_request(body: Any) -> tuple[list[Scenario], str | None]:
    """(scenarios, response_view) of a counterfactuals body.

    400 `COUNTERFACTUAL_SCENARIOS_INVALID` (every problem listed) for a missing, empty, too long
    or malformed `scenarios`; 400 `REQUEST_INVALID` for a non-object body, unknown members or
    an unknown `response_view`; 422 `EVALUATION_INPUT_TOO_LARGE` for an oversized patch and
    `RULEBOOK_OUTPUT_MATERIAL_FORBIDDEN` for response-only names inside a patch's inputs."""
    if not isinstance(body, dict):
        raise GateError("REQUEST_INVALID", "body must be a JSON object {response_view?, scenarios}",
                        errors=[{"field": "$", "code": "invalid_type", "message": "object expected"}])
    unknown = sorted(set(body) - set(REQUEST_MEMBERS))
    if unknown:
        raise GateError("REQUEST_INVALID", f"unknown member(s): {', '.join(unknown)}",
                        errors=[{"field": n, "code": "unknown_field", "message": "not accepted"} for n in unknown])
    view = body.get("response_view")
    if view is not None and view not in C.VIEWS:
        raise GateError("REQUEST_INVALID", f"response_view must be one of {', '.join(C.VIEWS)}",
                        errors=[{"field": "response_view", "code": "invalid_value",
                                 "message": f"one of {', '.join(C.VIEWS)}"}])
    scenarios = body.get("scenarios")
    if not isinstance(scenarios, list) or not scenarios:
        raise _invalid([{"field": "scenarios", "code": "missing_field" if scenarios is None else "invalid_value",
                         "message": "scenarios must be a non-empty array"}])
    if len(scenarios) > MAX_SCENARIOS:
        raise _invalid([{"field": "scenarios", "code": "too_many",
                         "message": f"at most {MAX_SCENARIOS} scenarios per request"}])
    errors: list[dict[str, str]] = []
    seen: set[str] = set()
    for index, scenario in enumerate(scenarios):
        errors += _scenario_errors(index, scenario, seen)
    if errors:
        raise _invalid(errors)
    for index, scenario in enumerate(scenarios):
        patch = scenario["context_patch"]
        check_facts(patch)  # SECURITY: bounded patch size before any merge or walk
        forbidden = forbidden_output_fields({"context": patch}) if isinstance(patch.get("inputs"), dict) else []
        if forbidden:
            raise GateError("RULEBOOK_OUTPUT_MATERIAL_FORBIDDEN",
                            "a scenario patch carries response-only decision material; remove it",
                            forbidden_fields=[f"scenarios[{index}].context_patch.{name[len('context.'):]}"
                                              for name in forbidden])
    return scenarios, view


def _scenario_errors(index: int, scenario: Any, seen: set[str]) -> list[dict[str, str]]:
    where = f"scenarios[{index}]"
    if not isinstance(scenario, dict):
        return [{"field": where, "code": "invalid_type", "message": f"{where} must be an object"}]
    errors = [{"field": f"{where}.{name}", "code": "unknown_field", "message": f"{where}.{name} is not accepted"}
              for name in sorted(set(scenario) - set(SCENARIO_MEMBERS))]
    scenario_id = scenario.get("scenario_id")
    if not isinstance(scenario_id, str) or not _SCENARIO_ID.fullmatch(scenario_id):
        errors.append({"field": f"{where}.scenario_id", "code": "invalid_value",
                       "message": f"{where}.scenario_id must be 1 to 120 characters [A-Za-z0-9_.:-]"})
    elif scenario_id in seen:
        errors.append({"field": f"{where}.scenario_id", "code": "duplicate_value",
                       "message": f"{where}.scenario_id {scenario_id!r} is used twice"})
    else:
        seen.add(scenario_id)
    label = scenario.get("label")
    if label is not None and (not isinstance(label, str) or not 1 <= len(label) <= MAX_LABEL):
        errors.append({"field": f"{where}.label", "code": "invalid_value",
                       "message": f"{where}.label must be a string of 1 to {MAX_LABEL} characters"})
    patch = scenario.get("context_patch")
    if not isinstance(patch, dict):
        errors.append({"field": f"{where}.context_patch", "code": "missing_field" if patch is None else "invalid_type",
                       "message": f"{where}.context_patch must be an object"})
    elif "inputs" in patch and patch["inputs"] is not None and not isinstance(patch["inputs"], dict):
        errors.append({"field": f"{where}.context_patch.inputs", "code": "invalid_type",
                       "message": f"{where}.context_patch.inputs must be an object or null"})
    return errors


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 JSON Merge Patch of `patch` over `target` (neither is modified)."""
    if not isinstance(patch, dict):
        return clone(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def base_context(material: StoredMaterial, prepared: PreparedRequest) -> dict[str, JsonValue]:
    """The stored context with `inputs` = the stored facts. 422
    `COUNTERFACTUAL_BASE_INPUT_UNAVAILABLE` when an adapter decision has no stored facts."""
    context = dict(prepared.context)
    if prepared.adapter is not None:
        facts = material.record.get("adapter_facts")
        if not isinstance(facts, dict):
            raise GateError("COUNTERFACTUAL_BASE_INPUT_UNAVAILABLE",
                            "the adapter facts of this decision are not stored; no base input to patch")
        context["inputs"] = facts
    else:
        context["inputs"] = prepared.facts or {}
    return context


def _recommendation(stored: Mapping[str, Any], outcome: AttestationOutcome) -> str:
    if outcome["status"] == C.NEEDS_INPUT_STATUS and stored.get("status") != C.NEEDS_INPUT_STATUS:
        return "collect_required_input"
    if all(stored.get(name) == outcome.get(name) for name in OUTCOME_FIELDS):
        return "unchanged"
    return {"yes": "would_approve", "no": "would_block"}.get(outcome["verdict"], "would_hold_for_review")


def _outcome(evaluation: Evaluation) -> AttestationOutcome:
    """The evaluation's outcome, member by member as an attestation states it."""
    return {"status": evaluation.status, "verdict": evaluation.decision,
            "application_verdict": evaluation.application_verdict, "action": evaluation.action,
            "reason_code": evaluation.reason_code, "matched_rule_id": evaluation.matched_rule_id}


@dataclass(frozen=True)
class _PatchedScenario:
    """A validated scenario with its patched context and the facts that context gives."""

    scenario: Scenario
    context: dict[str, JsonValue]
    facts: dict[str, JsonValue]


def _stored_base(material: StoredMaterial, current: Snapshot | None) -> tuple[PreparedRequest, Snapshot]:
    """The stored request and the current snapshot the scenarios run against. 422
    `COUNTERFACTUAL_BASE_INPUT_UNAVAILABLE` when either is missing."""
    try:
        prepared = stored_request(material)
    except GateError as exc:
        raise GateError("COUNTERFACTUAL_BASE_INPUT_UNAVAILABLE", exc.message) from exc
    if current is None:
        raise GateError("COUNTERFACTUAL_BASE_INPUT_UNAVAILABLE",
                        "the scope has no current rulebook for this decision's rulebook id")
    return prepared, current


def _patched_scenarios(base: dict[str, JsonValue], scenarios: list[Scenario],
                       current: CompiledRulebook) -> list[_PatchedScenario]:
    """Each scenario's patch over the base context, every one checked against the evaluation
    budget before any is evaluated."""
    check_evaluation_cost(current.document, current.rulebook_hash, base["inputs"])
    patched = []
    for scenario in scenarios:
        context = merge_patch(base, scenario["context_patch"])
        facts = context.get("inputs") if isinstance(context.get("inputs"), dict) else {}
        check_evaluation_cost(current.document, current.rulebook_hash, facts)
        patched.append(_PatchedScenario(scenario, context, facts))
    return patched


def _diff(record: Mapping[str, Any], stored: Mapping[str, Any], outcome: AttestationOutcome,
          binding: Mapping[str, str]) -> list[ScenarioChange]:
    """The outcome fields and the action binding that differ from the stored decision."""
    diff: list[ScenarioChange] = [{"field": name, "stored": stored[name], "scenario": outcome.get(name)}
                                  for name in OUTCOME_FIELDS if stored[name] != outcome.get(name)]
    if binding != (record.get("action_binding") or {}):
        diff.append({"field": "action_binding", "stored": record.get("action_binding") or {}, "scenario": binding})
    return diff


def _scenario_result(record: Mapping[str, Any], stored: Mapping[str, Any], patched: _PatchedScenario,
                     outcome: AttestationOutcome) -> ScenarioResult:
    """One scenario's entry (without the simulated record)."""
    diff = _diff(record, stored, outcome, action_binding_from_context(patched.context))
    recommendation = _recommendation(stored, outcome)
    return {
        "scenario_id": patched.scenario["scenario_id"],
        "label": patched.scenario.get("label") or patched.scenario["scenario_id"],
        "simulation_only": True,
        "status": outcome["status"],
        "verdict": outcome["verdict"],
        "application_verdict": outcome["application_verdict"],
        "action": outcome["action"],
        "reason_code": outcome["reason_code"],
        "matched_rule_id": outcome["matched_rule_id"],
        "changed": bool(diff),
        "diff": diff,
        "recommendation": recommendation,
        "recommendation_text": RECOMMENDATIONS[recommendation],
    }


def _evaluated_against(current: Snapshot) -> EvaluatedAgainst:
    return {"kind": "current_rulebook",
            "rulebook": {"schema_version": current["body"].get("schema_version"), "id": current["rulebook_id"],
                         "version": current["version"], "hash": current["rulebook_hash"]},
            "evaluator_version": C.EVALUATOR_VERSION}


def run_counterfactuals(material: StoredMaterial, scenarios: list[Scenario], *, current: Snapshot | None,
                        response_view: str | None, schema_url: str, schema_hash: str) -> CounterfactualsBody:
    """The response body (with `counterfactual_hash`) for validated scenarios."""
    record = material.record
    prepared, snapshot = _stored_base(material, current)
    base = base_context(material, prepared)
    evaluator = get_evaluator(snapshot["body"], snapshot["rulebook_hash"])
    patched_scenarios = _patched_scenarios(base, scenarios, evaluator)
    stored = {name: record.get(name) for name in OUTCOME_FIELDS}
    baseline = _outcome(evaluator.evaluate(base["inputs"]))
    results = []
    for patched in patched_scenarios:
        entry = _scenario_result(record, stored, patched, _outcome(evaluator.evaluate(patched.facts)))
        if response_view is not None:
            simulated = _simulated_record(record, prepared, patched, snapshot, schema_url, schema_hash)
            entry["decision"] = project_view(simulated, response_view)
        results.append(entry)
    body: CounterfactualsBody = {
        "ok": True,
        "decision_counterfactuals_version": C.DECISION_COUNTERFACTUALS_VERSION,
        "decision_id": record["decision_id"],
        "simulation_only": True,
        "authorizes_mutation": False,
        "evaluated_against": _evaluated_against(snapshot),
        "stored": stored,
        "baseline": baseline,
        "scenario_count": len(results),
        "scenarios": results,
    }
    body["counterfactual_hash"] = sha256_hex(body)
    return body


def _simulated_record(record: Mapping[str, JsonValue], prepared: PreparedRequest, patched: _PatchedScenario,
                      current: Snapshot, schema_url: str, schema_hash: str) -> RecordMembers:
    """The scenario as a (never signed, never stored) record, for the requested view."""
    context, facts = patched.context, patched.facts
    simulated = PreparedRequest(request=prepared.request, rulebook=prepared.rulebook, facts=facts, adapter=None,
                                binding_mode=C.BINDING_DIRECT, context=context, response_view=None)
    request = {k: v for k, v in prepared.request.items() if k not in ("adapter", "binding_mode")}
    request["context"] = context
    return rebuild_record(record, simulated, rulebook=current["body"], rulebook_hash=current["rulebook_hash"],
                          facts=facts, registry=current["registry"], schema_url=schema_url, schema_hash=schema_hash, engine=C.ENGINE,
                          input_hash=sha256_hex(request))
