"""Decision Request preparation: shape checks and the fail-closed refusals of rulebook mode.

Everything here runs before any hash is computed or anything is stored. Order of checks (the
first failing one answers):
1. the body is a JSON object and `mode`, `response_view`, `context` are well-formed (400);
2. legacy or missing `mode`: `gate.services.decide` hands those to `gate.advisory` before this runs; here
   they answer 422 `LEGACY_MODE_UNAVAILABLE` (advisory modes switched off, `GATE_ADVISORY_MODES`);
3. `context.inputs` within the evaluation size limits (422 `EVALUATION_INPUT_TOO_LARGE`,
   `gate.protocol.fact_limits`), then response-only material in the request (422
   `RULEBOOK_OUTPUT_MATERIAL_FORBIDDEN`);
4. `binding_mode` outside the supported pair (422 `RULEBOOK_BINDING_MODE_UNSUPPORTED`);
5. facts from both or neither source, or a binding mode that contradicts the facts source
   (422 `RULEBOOK_BINDING_MODE_CONFLICT`);
6. `rulebook` missing or not an object (422 `RULEBOOK_INVALID`); full validation follows in
   `gate.rulebook`.

The body is declared once as JSON Schema in `gate/bodies/decide.schema.json` (the OpenAPI
document's `DecisionRequest`); these checks stay hand-written for speed and for the spec's codes,
and tests/core/test_decide_schema.py holds the two to accept the same bodies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gate import vocabulary as C
from gate.errors import GateError
from gate.protocol.fact_limits import check_facts
from gate.strict_json import JsonValue


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    """A rulebook-mode request that passed the pre-evaluation checks."""

    request: dict[str, JsonValue]  # the body without `response_view`: what `input_hash` covers
    rulebook: dict[str, JsonValue]
    facts: dict[str, JsonValue] | None
    adapter: dict[str, JsonValue] | None
    binding_mode: str
    context: dict[str, JsonValue]
    response_view: str | None


def _invalid(field: str, code: str, message: str) -> GateError:
    return GateError(
        "REQUEST_INVALID",
        message,
        errors=[{"field": field, "code": code, "message": message}],
    )


def forbidden_output_fields(body: Mapping[str, JsonValue]) -> list[str]:
    """Response-only names present in the request (reference facts §3 ordering)."""
    found = [name for name in C.RESPONSE_ONLY_FIELDS if name in body]
    context = body.get("context")
    inputs = context.get("inputs") if isinstance(context, dict) else None
    if isinstance(inputs, dict):
        nested: list[str] = []
        _collect_forbidden(inputs, "context.inputs", nested)
        found.extend(sorted(nested))
    return found


def _collect_forbidden(value: Any, path: str, out: list[str]) -> None:
    if isinstance(value, dict):
        for key, child in value.items():
            child_path = f"{path}.{key}"
            if key in C.RESPONSE_ONLY_FIELDS:
                out.append(child_path)
            _collect_forbidden(child, child_path, out)
    elif isinstance(value, list):
        for index, child in enumerate(value):
            _collect_forbidden(child, f"{path}[{index}]", out)


def prepare_decision_request(body: Any) -> PreparedRequest:
    """Validate the request envelope; raise GateError for every refusal (see module doc).

    The checks run in the module doc's order, one named step each."""
    view, mode, context = _checked_envelope(body)
    _refuse_advisory_mode(mode)
    inputs = context.get("inputs")
    _refuse_oversized_or_preloaded(body, inputs)
    binding_mode = body.get("binding_mode")
    _refuse_unsupported_binding(binding_mode)
    source = _facts_source(body, context, binding_mode)
    rulebook = _required_rulebook(body)
    request = {key: value for key, value in body.items() if key != "response_view"}
    return PreparedRequest(
        request=request,
        rulebook=rulebook,
        facts=source.facts,
        adapter=source.adapter,
        binding_mode=source.binding_mode,
        context=context,
        response_view=view,
    )


def _checked_envelope(body: Any) -> tuple[str | None, str | None, dict[str, JsonValue]]:
    """Step 1 (400): a JSON object with a known `response_view`, a string `mode` we know, and
    an object `context` (null or absent is {}). Returns (view, mode, context)."""
    if not isinstance(body, dict):
        raise _invalid("$", "invalid_type", "request body must be a JSON object")
    view = body.get("response_view")
    if view is not None and view not in C.VIEWS:
        raise _invalid(
            "response_view", "invalid_value", f"response_view must be one of {', '.join(C.VIEWS)}"
        )
    mode = body.get("mode")
    if mode is not None and not isinstance(mode, str):
        raise _invalid("mode", "invalid_type", "mode must be a string")
    if mode is not None and mode != C.MODE_RULEBOOK and mode not in C.LEGACY_MODES:
        raise _invalid(
            "mode", "invalid_value",
            f"mode must be one of {', '.join((C.MODE_RULEBOOK,) + C.LEGACY_MODES)}",
        )
    context = body.get("context", {})
    if context is None:
        context = {}
    if not isinstance(context, dict):
        raise _invalid("context", "invalid_type", "context must be an object")
    return view, mode, context


def _refuse_advisory_mode(mode: str | None) -> None:
    """Step 2: anything but rulebook mode answers 422 `LEGACY_MODE_UNAVAILABLE` here."""
    if mode != C.MODE_RULEBOOK:
        # SECURITY: advisory modes never authorize a production mutation; where they are
        # switched off they answer with an error that cannot be mistaken for a verdict.
        raise GateError(
            "LEGACY_MODE_UNAVAILABLE",
            f"mode {mode or 'single (default)'!r} is advisory and switched off on this gate; "
            "send mode 'rulebook' with a Rulebook v1 for a binding verdict",
            mode=mode or "single",
            supported_modes=[C.MODE_RULEBOOK],
        )


def _refuse_oversized_or_preloaded(body: dict[str, JsonValue], inputs: object) -> None:
    """Step 3: facts within the evaluation size limits, then no response-only material."""
    # SECURITY: bounded facts (422 EVALUATION_INPUT_TOO_LARGE) before any walk over them.
    check_facts(inputs if isinstance(inputs, dict) else {})
    forbidden = forbidden_output_fields(body)
    if forbidden:
        # SECURITY: spec, Decision Request rule 2 — callers may not preload response material.
        raise GateError(
            "RULEBOOK_OUTPUT_MATERIAL_FORBIDDEN",
            "the request carries response-only decision material; remove it",
            forbidden_fields=forbidden,
        )


def _refuse_unsupported_binding(binding_mode: Any) -> None:
    """Step 4: a stated `binding_mode` is one of the supported pair."""
    if binding_mode is not None and binding_mode not in C.SUPPORTED_BINDING_MODES:
        # SECURITY: customer-executable rulebooks are never run.
        raise GateError(
            "RULEBOOK_BINDING_MODE_UNSUPPORTED",
            "binding_mode is not supported; the rulebook is evaluated declaratively only",
            binding_mode=binding_mode,
            supported_binding_modes=list(C.SUPPORTED_BINDING_MODES),
        )


@dataclass(frozen=True, slots=True)
class _FactsSource:
    """Where the facts come from: `context.inputs` (direct) or one trusted adapter."""

    binding_mode: str
    facts: dict[str, JsonValue] | None
    adapter: dict[str, JsonValue] | None


def _facts_source(body: dict[str, JsonValue], context: dict[str, JsonValue], binding_mode: object) -> _FactsSource:
    """Step 5: facts from exactly one source, the stated binding mode matching it, and each
    source the right shape."""
    inputs = context.get("inputs")
    adapter = body.get("adapter")
    has_adapter = "adapter" in body and adapter is not None
    has_inputs = "inputs" in context and inputs is not None
    inferred = C.BINDING_ADAPTER if has_adapter else C.BINDING_DIRECT
    if has_adapter and has_inputs:
        raise GateError(
            "RULEBOOK_BINDING_MODE_CONFLICT",
            "facts come from context.inputs or from one trusted adapter, never both",
            binding_mode=binding_mode or inferred,
            inferred_binding_mode=inferred,
        )
    if binding_mode is not None and binding_mode != inferred:
        raise GateError(
            "RULEBOOK_BINDING_MODE_CONFLICT",
            f"binding_mode {binding_mode!r} does not match the facts source of the request",
            binding_mode=binding_mode,
            inferred_binding_mode=inferred,
        )
    if has_inputs and not isinstance(inputs, dict):
        raise _invalid("context.inputs", "invalid_type", "context.inputs must be an object")
    if has_adapter and not isinstance(adapter, dict):
        raise GateError(
            "TRUSTED_ADAPTER_INVALID",
            "adapter must be an object with adapter_id, version, manifest_hash and input",
            errors=[{"field": "adapter", "code": "invalid_type", "message": "adapter must be an object"}],
        )
    # Past the checks above, a source that is there is an object and one that is not is None.
    return _FactsSource(inferred, inputs if isinstance(inputs, dict) else None,
                        adapter if isinstance(adapter, dict) else None)


def _required_rulebook(body: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """Step 6: a `rulebook` object (validated in full by `gate.rulebook`)."""
    rulebook = body.get("rulebook")
    if not isinstance(rulebook, dict):
        code = "missing_field" if rulebook is None else "invalid_type"
        message = "rulebook is required in rulebook mode" if rulebook is None else "rulebook must be an object"
        raise GateError(
            "RULEBOOK_INVALID",
            f"Rulebook v1 validation failed: {message}",
            errors=[{"field": "rulebook", "code": code, "message": message}],
        )
    return rulebook
