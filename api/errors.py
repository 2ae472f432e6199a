"""The one table from error code to HTTP status and body (spec "Errors"; reference facts §3, §7).

Every error body has the same shape: `{c: "unclear", v: <short word>, error: <CODE>,
message: <text>, …details}`. `c` is always "unclear" so that no client can read an error as an
approval. `tests/test_error_bodies.py` pins every entry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flask import Response, request

from api.jsonio import dumps
from gate.errors import GateError
from gate.reports.registry import REPORTS
from gate.vocabulary import COMPACT_UNCLEAR

# code → (HTTP status, v)
ERROR_TABLE: dict[str, tuple[int, str]] = {
    # Malformed input: nothing is hashed or stored.
    "JSON_INVALID": (400, "Invalid JSON body"),
    "JSON_NON_FINITE_NUMBER": (400, "Invalid JSON body"),
    "JSON_DUPLICATE_KEY": (400, "Invalid JSON body"),
    "JSON_UNSAFE_INTEGER": (400, "Invalid JSON body"),
    "JSON_TOO_DEEP": (400, "Invalid JSON body"),
    "REQUEST_INVALID": (400, "invalid_request"),
    "REQUEST_TOO_LARGE": (413, "request_too_large"),
    # Refused by the HTTP server before the application (api.serving), in the same shape.
    "REQUEST_TIMEOUT": (408, "request_timeout"),
    "REQUEST_URI_TOO_LONG": (414, "uri_too_long"),
    "REQUEST_HEADERS_TOO_LARGE": (431, "headers_too_large"),
    "EXPECTATION_FAILED": (417, "expectation_failed"),
    "TRANSFER_CODING_UNSUPPORTED": (501, "transfer_coding_unsupported"),
    "UNSUPPORTED_MEDIA_TYPE": (415, "unsupported_media_type"),
    # Auth and limits.
    "SVC_API_UNAUTHORIZED": (401, "unauthorized"),
    "SVC_API_RATE_LIMITED": (429, "rate_limited"),
    "SVC_API_MONTHLY_CAP_EXCEEDED": (429, "monthly_cap_exceeded"),
    # Rulebook mode refusals.
    "LEGACY_MODE_UNAVAILABLE": (422, "advisory_mode_unavailable"),
    # Advisory legacy modes (docs/advisory.md): no advisor answer means no record.
    "ADVISOR_UPSTREAM_FAILED": (502, "upstream_failure"),
    "ADVISOR_UNAVAILABLE": (503, "unavailable"),
    "RULEBOOK_INVALID": (422, "rulebook_invalid"),
    "RULEBOOK_BINDING_MODE_UNSUPPORTED": (422, "binding_mode_unsupported"),
    "RULEBOOK_BINDING_MODE_CONFLICT": (422, "binding_mode_conflict"),
    "RULEBOOK_OUTPUT_MATERIAL_FORBIDDEN": (422, "output_material_forbidden"),
    "RULEBOOK_VERSION_CONFLICT": (409, "rulebook_version_conflict"),
    # Bounded evaluation cost (gate/rulebook/budget.py): refused before evaluating.
    "EVALUATION_INPUT_TOO_LARGE": (422, "evaluation_limit_exceeded"),
    "EVALUATION_TOO_COSTLY": (422, "evaluation_limit_exceeded"),
    "TRUSTED_ADAPTER_INVALID": (422, "trusted_adapter_invalid"),
    "TRUSTED_ADAPTER_NOT_REGISTERED": (422, "trusted_adapter_not_registered"),
    # Trusted adapters (gate/adapters, docs/adapters.md; reference facts §3).
    "TRUSTED_ADAPTER_MANIFEST_MISMATCH": (422, "trusted_adapter_manifest_mismatch"),
    "TRUSTED_ADAPTER_INPUT_INVALID": (422, "trusted_adapter_input_invalid"),
    "TRUSTED_ADAPTER_EXECUTION_TIMEOUT": (504, "trusted_adapter_timeout"),
    "TRUSTED_ADAPTER_OUTPUT_INVALID": (500, "trusted_adapter_output_invalid"),
    "TRUSTED_ADAPTER_CAPABILITY_DENIED": (500, "trusted_adapter_capability_denied"),
    "TRUSTED_ADAPTER_UNAVAILABLE": (503, "unavailable"),
    "TRUSTED_ADAPTER_NOT_FOUND": (404, "not_found"),
    # Idempotency.
    "SVC_API_IDEMPOTENCY_CONFLICT": (409, "idempotency_conflict"),
    # Lifecycle receipts (execution, outcome, CRM sync) and the audit chain.
    "SVC_EXECUTION_UNAUTHORIZED": (401, "unauthorized"),
    "SVC_OUTCOME_UNAUTHORIZED": (401, "unauthorized"),
    "SVC_CRM_SYNC_UNAUTHORIZED": (401, "unauthorized"),
    "SVC_CHAIN_UNAUTHORIZED": (401, "unauthorized"),
    "SVC_EXECUTION_IDEMPOTENCY_CONFLICT": (409, "idempotency_conflict"),
    "SVC_OUTCOME_IDEMPOTENCY_CONFLICT": (409, "idempotency_conflict"),
    "SVC_CRM_SYNC_IDEMPOTENCY_CONFLICT": (409, "idempotency_conflict"),
    "SVC_EXECUTION_IDEMPOTENCY_IN_PROGRESS": (409, "idempotency_in_progress"),
    "SVC_OUTCOME_IDEMPOTENCY_IN_PROGRESS": (409, "idempotency_in_progress"),
    "SVC_CRM_SYNC_IDEMPOTENCY_IN_PROGRESS": (409, "idempotency_in_progress"),
    "SVC_EXECUTION_RECORD_MISMATCH": (409, "record_mismatch"),
    "SVC_OUTCOME_RECORD_MISMATCH": (409, "record_mismatch"),
    "SVC_CRM_SYNC_RECORD_MISMATCH": (409, "record_mismatch"),
    # An outcome's execution_receipt_id / execution_hash name no execution receipt of its decision.
    "SVC_OUTCOME_EXECUTION_MISMATCH": (409, "execution_mismatch"),
    "SVC_CRM_SYNC_CREDENTIALS_FORBIDDEN": (422, "credentials_forbidden"),
    "SVC_EXECUTION_UNAVAILABLE": (503, "unavailable"),
    "SVC_OUTCOME_UNAVAILABLE": (503, "unavailable"),
    "SVC_CRM_SYNC_UNAVAILABLE": (503, "unavailable"),
    "CHAIN_NOT_FOUND": (404, "not_found"),
    "PACKET_SOURCE_UNAVAILABLE": (503, "unavailable"),
    # A report, a packet's intelligence or the policy alerts' anomaly report asked of an API
    # composed without report engines (gate.services.analytics.NoAnalytics; issue 66, item 4).
    "REPORTS_UNAVAILABLE": (503, "unavailable"),
    # The stored chain contradicts itself or a witnessed checkpoint (gate/services/chains.py): named, never
    # signed, never served as proof material.
    "CHAIN_INTEGRITY_FAILED": (409, "chain_integrity_failed"),
    # Policy reports: one code per kind of gate.reports.registry (SVC_POLICY_<NAME>_UNAUTHORIZED).
    **{kind.unauthorized: (401, "unauthorized") for kind in REPORTS.values()},
    # Reads and registries.
    "DECISION_NOT_FOUND": (404, "not_found"),
    "RULEBOOK_NOT_FOUND": (404, "not_found"),
    "RULEBOOK_LOOKUP_INVALID": (400, "invalid_request"),
    "POLICY_BUNDLE_NOT_FOUND": (404, "not_found"),
    "POLICY_PATTERN_NOT_FOUND": (404, "not_found"),
    "NOT_FOUND": (404, "not_found"),
    # Replay, diff and counterfactuals (docs/replay.md): read-only, nothing is written.
    "REPLAY_MODE_INVALID": (422, "replay_mode_invalid"),
    "REPLAY_INPUT_OVERRIDE_FORBIDDEN": (422, "replay_input_override_forbidden"),
    "REPLAY_INPUT_UNAVAILABLE": (422, "replay_input_unavailable"),
    "REPLAY_LINEAGE_UNAVAILABLE": (409, "replay_lineage_unavailable"),
    "REPLAY_LINEAGE_MISMATCH": (409, "replay_lineage_mismatch"),
    "COUNTERFACTUAL_SCENARIOS_INVALID": (400, "counterfactual_scenarios_invalid"),
    "COUNTERFACTUAL_BASE_INPUT_UNAVAILABLE": (422, "counterfactual_base_input_unavailable"),
    "METHOD_NOT_ALLOWED": (405, "method_not_allowed"),
    # Unavailable: nothing was stored, nothing approved.
    "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED": (503, "unavailable"),
    "LEDGER_UNAVAILABLE": (503, "unavailable"),
    "RATE_LIMITER_UNAVAILABLE": (503, "unavailable"),
    "PUBLIC_VERIFY_BUSY": (503, "unavailable"),  # every public verification slot of the process is busy
    "INTERNAL_ERROR": (500, "internal_error"),
    # Policy checks and workflow routes (issue 11, docs/policy-checks.md): advisory, never a verdict.
    "POLICY_CHECK_UNDECIDED": (500, "policy_check_undecided"),
    "WORKFLOW_UNSUPPORTED": (400, "workflow_unsupported"),
    "WORKFLOW_UNAUTHORIZED": (401, "unauthorized"),
    "WORKFLOW_IDEMPOTENCY_CONFLICT": (409, "idempotency_conflict"),
    # Operational routes (docs/operations.md).
    "PILOT_IDEMPOTENCY_CONFLICT": (409, "idempotency_conflict"),
    "PILOT_NOT_FOUND": (404, "not_found"),
    "METRICS_UNAUTHORIZED": (401, "unauthorized"),
    "METRICS_UNAVAILABLE": (503, "unavailable"),
    # Policy releases (docs/releases.md): a refused transition changes nothing; decide fails closed.
    "RULEBOOK_REF_INVALID": (400, "invalid_request"),
    "RULEBOOK_NOT_ACTIVE": (409, "rulebook_not_active"),
    "RULEBOOK_SUPERSEDED": (409, "rulebook_superseded"),
    "RELEASE_ACTION_INVALID": (400, "invalid_request"),
    "RELEASE_TRANSITION_REFUSED": (409, "release_transition_refused"),
    "RELEASE_NOTHING_TO_HALT": (409, "release_transition_refused"),
    "RELEASE_NOTHING_TO_ROLL_BACK": (409, "release_transition_refused"),
    "RELEASE_APPROVAL_NOT_FOUND": (404, "not_found"),
    "RELEASE_APPROVAL_MISMATCH": (409, "release_transition_refused"),
    "RELEASE_SELF_APPROVAL": (403, "forbidden"),
    "RELEASE_PERMISSION_DENIED": (403, "forbidden"),
    "RELEASE_IDEMPOTENCY_CONFLICT": (409, "idempotency_conflict"),
    "RELEASE_POLICY_INVALID": (400, "invalid_request"),
    # Held actions (docs/holds.md): a refused step changes nothing; an open hold never approves.
    "HOLD_NOT_FOUND": (404, "not_found"),
    "HOLD_ALREADY_RESOLVED": (409, "hold_already_resolved"),
    "HOLD_ALREADY_VOTED": (409, "hold_already_voted"),
    "HOLD_CLAIMED": (409, "hold_claimed"),
    "HOLD_NOT_ESCALABLE": (409, "hold_not_escalable"),
    "HOLD_MOVE_LOOSENS": (409, "hold_move_loosens"),
    "HOLD_BUSY": (503, "unavailable"),
    "HOLD_PERMISSION_DENIED": (403, "forbidden"),
    "HOLD_FOUR_EYES": (403, "forbidden"),
    "HOLD_NOT_A_MEMBER": (403, "forbidden"),
    "HOLD_RESOLUTION_INVALID": (400, "invalid_request"),
    "HOLD_POLICY_INVALID": (400, "invalid_request"),
    # Reviewers' channels (docs/integrations.md): a refused Slack interaction changes nothing.
    "SLACK_NOT_CONFIGURED": (503, "unavailable"),
    "SLACK_REQUEST_STALE": (401, "unauthorized"),
    "SLACK_SIGNATURE_INVALID": (401, "unauthorized"),
    "SLACK_INTERACTION_INVALID": (400, "invalid_request"),
    "SLACK_USER_UNKNOWN": (403, "forbidden"),
    # Events out (docs/events.md): a refused subscription change changes nothing.
    "EVENT_SUBSCRIPTION_INVALID": (400, "invalid_request"),
    "EVENT_TARGET_REFUSED": (400, "invalid_request"),
    "EVENT_SETTINGS_INVALID": (400, "invalid_request"),
    "EVENT_SUBSCRIPTION_LIMIT": (409, "limit_reached"),
    "EVENT_SUBSCRIPTION_NOT_FOUND": (404, "not_found"),
    "EVENT_SUBSCRIPTION_PENDING": (409, "approval_required"),
    "EVENT_NOT_FOUND": (404, "not_found"),
    "EVENTS_PRUNED": (410, "events_pruned"),
    "DECISION_INPUTS_REMOVED": (410, "decision_inputs_removed"),
    # Issue 42: governance of the policy and guarded activation.
    "RELEASE_POLICY_CHANGED": (409, "release_transition_refused"),
    "RELEASE_VERSION_HALTED": (409, "release_transition_refused"),
    "RELEASE_DRY_RUN_REQUIRED": (409, "release_transition_refused"),
    "RELEASE_DRY_RUN_REJECTED": (422, "invalid_request"),
    # Issue 52: every safeguard setting changes through one governed path (docs/releases.md, "One
    # rule for every safeguard"); the release policy's own routes keep the RELEASE_ codes above.
    "GOVERNANCE_REQUEST_INVALID": (400, "invalid_request"),
    "GOVERNANCE_REQUEST_NOT_FOUND": (404, "not_found"),
    "GOVERNANCE_SELF_APPROVAL": (403, "forbidden"),
    "GOVERNANCE_SETTING_CHANGED": (409, "governance_refused"),
    "EVENTS_PERMISSION_DENIED": (403, "forbidden"),
    "KEYS_PERMISSION_DENIED": (403, "forbidden"),
    # Issue 67: the data map and the masking rules (docs/privacy.md).
    "PRIVACY_SETTINGS_INVALID": (400, "invalid_request"),
    "PRIVACY_PERMISSION_DENIED": (403, "forbidden"),
    "SUBJECT_EXPORT_INVALID": (400, "invalid_request"),
    "SUBJECT_KEY_UNDECLARED": (409, "subject_key_undeclared"),
    "SUBJECT_ERASURE_INVALID": (400, "invalid_request"),
    "SUBJECT_NOT_FOUND": (404, "not_found"),
}


def error_body(code: str, message: str, **details: object) -> tuple[int, dict[str, object]]:
    status, word = ERROR_TABLE[code]
    body: dict[str, object] = {"c": COMPACT_UNCLEAR, "v": word, "error": code, "message": message}
    body.update(details)
    return status, body


def gate_error_body(error: GateError) -> tuple[int, dict[str, object]]:
    return error_body(error.code, error.message, **error.details)


def refusal(error: GateError) -> Response:
    """The one translation of a refusal into its answer (the app's `GateError` handler calls it):
    the table's status and body, with the headers the request said every answer carries
    (`carry_headers`: the rate-limit window of a charged or counted request)."""
    status, body = gate_error_body(error)
    headers = {**_OWN_HEADERS.get(error.code, _no_headers)(error), **request.environ.get(_CARRIED, {})}
    return json_response(status, body, headers or None)


def _no_headers(_error: GateError) -> dict[str, str]:
    return {}


# Headers a refusal's own details imply, by code (a carried header of the same name wins).
_OWN_HEADERS: dict[str, Callable[[GateError], dict[str, str]]] = {
    "SVC_API_MONTHLY_CAP_EXCEEDED": lambda error: {
        "X-Usage-Monthly-Remaining": "0", "Retry-After": str(error.details["retry_after"])},
}


_CARRIED = "gate.carried_headers"  # in the request's environ: this request's, never another's


def carry_headers(headers: Mapping[str, str]) -> None:
    """Headers this request's answer carries even when a route raises a refusal: `refusal` puts
    them on it (later calls add to earlier ones)."""
    request.environ[_CARRIED] = {**request.environ.get(_CARRIED, {}), **headers}


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return json_text_response(status, dumps(body), headers)


def json_text_response(status: int, text: str, headers: dict[str, str] | None = None) -> Response:
    """`json_response` for a body already encoded the same way (`dumps`): a stored record's text."""
    if headers and any(name.lower() == "content-type" for name in headers):
        response = Response(text, status=status, mimetype="application/json")
        response.headers.update(headers)  # the caller's Content-Type replaces the JSON one
        return response
    # Given to the constructor, the headers are added once each (a decide sets about fifteen;
    # `update` would look for an earlier value of each first).
    return Response(text, status=status, headers=headers, mimetype="application/json")


def error_response(code: str, message: str, *, status: int | None = None,
                   headers: dict[str, str] | None = None, **details: Any) -> Response:
    table_status, body = error_body(code, message, **details)
    return json_response(status or table_status, body, headers)
