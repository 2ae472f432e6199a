"""`/openapi.json` (OpenAPI 3.1) and `/docs.json`, generated from one endpoint table.

Adding a route means adding one `Endpoint` here; `tests/test_openapi.py` fails when a
registered route, an error code of `api.errors.ERROR_TABLE` or a spec header is missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from api import costs as K
from api import openapi_params as P
from api.errors import ERROR_TABLE
from api.mcp import input_schema
from api.openapi_receipts import RECEIPT_REQUEST_SCHEMAS
from api.public_limits import HEAVY_KINDS, PUBLIC_PATHS
from gate import vocabulary as C
from gate.protocol import fact_limits as F
from gate.protocol.canonical import MAX_DOCUMENT_DEPTH, MAX_JSON_DEPTH
from gate.replay.historical import REPLAY_MODES
from gate.replay.whatif import MAX_SCENARIOS
from gate.rulebook import budget as B
from gate.services.policychecks import CHECKS as POLICY_CHECKS
from gate.settings import COST_UNITS_PER_DECIDE, DEFAULT_PLANS
from workbench.reports.params import PARAMS as REPORT_PARAMS
from workbench.reports.registry import REPORTS

RATE_HEADERS = ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset")
DECIDE_HEADERS = (
    "x-decision-id",
    "x-decision-record-hash",
    "x-decision-receipt-hash",
    "x-decision-confidence-score",
    "x-decision-confidence-level",
    "x-decision-confidence-hash",
    "x-idempotency-status",
    "x-decision-verify-url",
    "x-decision-receipt-signature",
    "X-Usage-Monthly-Remaining",
    "Preference-Applied",
    *RATE_HEADERS,
)
REQUEST_HEADERS = {
    "x-api-key": "API key (server-side only). `Authorization: Bearer <key>` is accepted too.",
    "x-idempotency-key": "Retry handle, 1–300 visible ASCII characters.",
    "x-request-id": "Optional caller trace id (1–160 of A–Z a–z 0–9 . _ : -); becomes the record's request_id.",
    "Prefer": "`return=minimal|standard|full` chooses the response view.",
    "x-decision-response-view": "`minimal`, `standard` or `full` (400 when anything else).",
}
WORKFLOW_REQUEST_HEADERS = {
    "Idempotency-Key": "Workflow routes: overrides the default per-ticket key (1–300 visible ASCII characters).",
    "x-idempotency-key": "Workflow routes: same as Idempotency-Key (both may be sent only with one value).",
    "Authorization": "Workflow routes: `Bearer <GATE_WORKFLOW_TOKEN>` when that setting is configured.",
}
OPERATIONS_REQUEST_HEADERS = {
    "x-metrics-token": "Proof metrics, pilot export and (when GATE_METRICS_TOKEN is set) /metrics: the metrics "
                       "token (`Authorization: Bearer <token>` is accepted too), compared in constant time.",
}


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    summary: str
    auth: bool
    responses: dict[int, str]
    errors: tuple[str, ...] = ()
    # (name, type, description[, schema]): the schema states the route's own check (api.openapi_params)
    query: tuple[tuple[str, str, str] | tuple[str, str, str, dict[str, Any]], ...] = ()
    request_body: str | None = None
    response_headers: tuple[str, ...] = ()
    request_headers: tuple[str, ...] = ()
    tags: tuple[str, ...] = field(default_factory=tuple)
    error_schema: str = "ErrorBody"  # JsonRpcError on the MCP endpoints


AUTH_ERRORS = ("SVC_API_UNAUTHORIZED",)
BODY_ERRORS = (
    "JSON_INVALID", "JSON_NON_FINITE_NUMBER", "JSON_DUPLICATE_KEY", "JSON_UNSAFE_INTEGER",
    "JSON_TOO_DEEP", "REQUEST_INVALID", "REQUEST_TOO_LARGE", "UNSUPPORTED_MEDIA_TYPE",
)
# Refused by the HTTP server itself (api.serving) on any route, in the same JSON error shape.
SERVER_RESPONSES = {408: "request (head or body) not received within GATE_REQUEST_READ_TIMEOUT",
                    414: "request line too long", 431: "request headers too large or too many"}
SERVER_ERRORS = ("REQUEST_TIMEOUT", "REQUEST_URI_TOO_LONG", "REQUEST_HEADERS_TOO_LARGE",
                 "EXPECTATION_FAILED", "TRANSFER_CODING_UNSUPPORTED")
MEDIA = "body not sent as application/json (or +json) in UTF-8"
COUNTERFACTUAL_HEADERS = ("x-decision-counterfactuals-version", "x-decision-counterfactual-hash",
                          "x-decision-counterfactual-scenarios")

# Issue 11: policy checks (MCP JSON-RPC, REST twins, sources) and workflow routes (docs/policy-checks.md).
_MCP_PATHS = ("/api/mcp", "/refund/api/mcp", "/cancel/api/mcp", "/return/api/mcp", "/trial/api/mcp")
_CHECK_TWINS = (("/api/v1/refund/eligibility", "refund_eligibility"), ("/api/v1/cancel/penalty", "cancellation_penalty"),
                ("/api/v1/return/eligibility", "return_eligibility"), ("/api/v1/trial/terms", "trial_terms"))
_CHECK_ERRORS = BODY_ERRORS + ("SVC_API_RATE_LIMITED", "RATE_LIMITER_UNAVAILABLE", "POLICY_CHECK_UNDECIDED")
POLICYCHECK_ENDPOINTS: tuple[Endpoint, ...] = (
    *[Endpoint(
        "post", path,
        ("MCP JSON-RPC 2.0 (protocol 2025-11-25 or 2024-11-05): initialize, ping, notifications (202), tools/list, "
         "tools/call → {content, structuredContent, isError}. " + ("All four policy-check tools." if path == "/api/mcp"
         else "One service's tool ({…_url}/api/mcp).") + " JSON-RPC errors −32700/−32600 (HTTP 400), −32601, −32602, "
         "−32603 (HTTP 200), −32000 rate limited (HTTP 429). Batches are refused (−32600). Advisory only."),
        False, {200: "JSON-RPC response", 202: "notification or response accepted (no body)",
                400: "parse error or invalid request (JSON-RPC error body)", 413: "body over 64 KiB",
                415: MEDIA, 429: "rate limited (−32000)", 503: "rate limiter unavailable (−32603)"},
        request_body="JsonRpcMessage", response_headers=RATE_HEADERS, tags=("policy-checks",),
        error_schema="JsonRpcError")
      for path in _MCP_PATHS],
    *[Endpoint(method, path, "Not served: answers 405 with `Allow: POST` and a JSON-RPC error (−32000).", False,
               {405: "method not allowed (JSON-RPC error body)"}, tags=("policy-checks",), error_schema="JsonRpcError")
      for path in _MCP_PATHS for method in ("get", "put", "patch", "delete")],
    *[Endpoint(
        "post", path, f"REST twin of the `{tool}` MCP tool: the body is its arguments, the answer its "
        "structuredContent (same engine, same result). Advisory only (production_verdict false).",
        False, {200: "check result", 400: "bad arguments or body", 413: "body over 64 KiB", 415: MEDIA,
                429: "rate limited per client", 500: "the rulebook reached no verdict", 503: "rate limiter unavailable"},
        errors=_CHECK_ERRORS, request_body=f"PolicyCheckArguments_{tool}", response_headers=RATE_HEADERS,
        tags=("policy-checks",))
      for path, tool in _CHECK_TWINS],
    Endpoint("get", "/rules/policy-sources.json", "Vendor policy table sources: every row's source URL, notes, "
             "last-verified date and source hash, with table and rulebook versions.", False, {200: "policy sources"},
             tags=("policy-checks",)),
    Endpoint(
        "post", "/api/v1/workflows/{ticketing_system}/{workflow}",
        "Helpdesk workflow (`workflow` = refund|cancel|return|trial): runs the policy check and answers request_id, "
        "action, policy_class and ticket_annotations. Advisory only. Idempotent per ticket (default key "
        "`<workflow>:<ticket_id>` within the ticketing system; `Idempotency-Key` overrides); a replay answers the "
        "same bytes with `x-idempotency-status: replayed`. Bearer token only when GATE_WORKFLOW_TOKEN is set.",
        False, {200: "workflow result (created or replayed)", 400: "missing or bad field, unsupported ticketing "
                "system or workflow", 401: "bearer token required", 409: "idempotency key holds another request",
                413: "body over 64 KiB", 415: MEDIA, 429: "rate limited per client",
                500: "the rulebook reached no verdict", 503: "ledger or rate limiter unavailable"},
        errors=_CHECK_ERRORS + ("WORKFLOW_UNSUPPORTED", "WORKFLOW_UNAUTHORIZED", "WORKFLOW_IDEMPOTENCY_CONFLICT",
                                "LEDGER_UNAVAILABLE"),
        request_body="WorkflowRequest", response_headers=RATE_HEADERS + ("x-idempotency-status", "x-request-id"),
        request_headers=tuple(WORKFLOW_REQUEST_HEADERS), tags=("workflows",)),
)

# Issue 20: policy releases (docs/releases.md).
_RELEASE_ERRORS = BODY_ERRORS + AUTH_ERRORS + ("RULEBOOK_NOT_FOUND", "RELEASE_PERMISSION_DENIED",
                                               "LEDGER_UNAVAILABLE", "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED")
RELEASE_ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("post", "/api/decision/rulebooks", "Publish a Rulebook v1 (body) as an immutable version of the "
             "caller's scope; needs the `publish` permission.", True,
             {200: "{ok, created: false, rulebook} the same content again", 201: "{ok, created: true, rulebook}",
              400: "malformed JSON body", 401: "missing or invalid key", 403: "key lacks publish",
              409: "other content under a published version", 413: "body too large", 415: MEDIA,
              422: "invalid rulebook"},
             errors=_RELEASE_ERRORS + ("RULEBOOK_VERSION_CONFLICT", "RULEBOOK_INVALID"),
             request_body="RulebookPublishRequest", tags=("releases",)),
    Endpoint("get", "/api/decision/rulebooks/{rulebook_id}/release", "A rulebook's release: state (active, "
             "previous, shadow, canary, pending approvals), the scope's release policy, the live shadow and canary "
             "comparison with intervals and guardrails, and the signed event history.", True,
             {200: "{ok, rulebook_id, state, policy, comparison, history}", 401: "missing or invalid key",
              404: "not published in this scope"},
             errors=AUTH_ERRORS + ("RULEBOOK_NOT_FOUND",), tags=("releases",)),
    Endpoint("get", "/api/decision/rulebooks/{rulebook_id}/release/history", "The portable release history "
             "(`release_history_v1`) that `gate verify` checks offline, with the scope's signed policy changes "
             "(`governance`).", True,
             {200: "{release_history_version, scope_hash, rulebook_id, events, governance}", 401: "missing or invalid key",
              404: "not published in this scope"},
             errors=AUTH_ERRORS + ("RULEBOOK_NOT_FOUND",), tags=("releases",)),
    Endpoint("post", "/api/decision/rulebooks/{rulebook_id}/release", "One transition `{action: shadow | canary | "
             "activate | halt | rollback | approve, version?, percent?, subject?, reason?, migration_manifest?, "
             "migration_manifest_hash?, override?, request_seq?, rulebook_hash?}`: a signed, chained release event "
             "naming its principal (the key). Needs `release` (`approve` for approve; `admin` for override). Where "
             "the policy sets require_dry_run, activate (and a canary above dry_run_canary_percent) passes the "
             "version's signed dry-run manifest; a version its guardrail halted needs override `guardrail_halt` "
             "and a reason. Idempotent under x-idempotency-key.", True,
             {200: "{ok, created: false, event, state} replayed", 201: "{ok, created: true, event, state}",
              400: "malformed action", 401: "missing or invalid key",
              403: "permission, or a principal approving its own request",
              404: "rulebook, version or pending request not found",
              409: "the release state or policy refuses the action (a halted version, a missing dry-run), or "
                   "another body under the key",
              413: "body too large", 415: MEDIA, 422: "the dry-run manifest does not allow this move"},
             errors=_RELEASE_ERRORS + ("RELEASE_ACTION_INVALID", "RELEASE_TRANSITION_REFUSED",
                                       "RELEASE_NOTHING_TO_HALT", "RELEASE_NOTHING_TO_ROLL_BACK",
                                       "RELEASE_APPROVAL_NOT_FOUND", "RELEASE_APPROVAL_MISMATCH",
                                       "RELEASE_SELF_APPROVAL", "RELEASE_IDEMPOTENCY_CONFLICT", "RULEBOOK_NOT_ACTIVE",
                                       "RELEASE_VERSION_HALTED", "RELEASE_DRY_RUN_REQUIRED",
                                       "RELEASE_DRY_RUN_REJECTED"),
             request_body="ReleaseActionRequest", request_headers=("x-idempotency-key",),
             response_headers=("x-idempotency-status",), tags=("releases",)),
    Endpoint("get", "/api/decision/release-policy", "The scope's release policy in force, its pending requests "
             "and every change (the signed `release_governance_event_v1` chain).", True,
             {200: "{ok, policy, pending, governance_seq, history}", 401: "missing or invalid key"},
             errors=AUTH_ERRORS, tags=("releases",)),
    Endpoint("put", "/api/decision/release-policy", "State the scope's whole release policy (every member of "
             "ReleasePolicy; a missing one is a 400 naming it). Needs `admin`. A signed policy event; while "
             "approvals are required a weakening change is a request (202) a second principal approves.", True,
             {200: "{ok, policy, pending, governance_seq, event} (event null: nothing changed)",
              202: "{ok, policy, pending, governance_seq, event}: the change waits for approval",
              400: "malformed or incomplete policy", 401: "missing or invalid key", 403: "key lacks admin",
              413: "body too large", 415: MEDIA},
             errors=BODY_ERRORS + AUTH_ERRORS + ("RELEASE_POLICY_INVALID", "RELEASE_PERMISSION_DENIED",
                                                 "LEDGER_UNAVAILABLE", "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED"),
             request_body="ReleasePolicy", tags=("releases",)),
    Endpoint("patch", "/api/decision/release-policy", "Change the named members of the scope's release policy; "
             "every other member keeps its value. Needs `admin`; otherwise as PUT.", True,
             {200: "{ok, policy, pending, governance_seq, event} (event null: nothing changed)",
              202: "{ok, policy, pending, governance_seq, event}: the change waits for approval",
              400: "malformed policy member", 401: "missing or invalid key", 403: "key lacks admin",
              413: "body too large", 415: MEDIA},
             errors=BODY_ERRORS + AUTH_ERRORS + ("RELEASE_POLICY_INVALID", "RELEASE_PERMISSION_DENIED",
                                                 "LEDGER_UNAVAILABLE", "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED"),
             request_body="ReleasePolicyPatch", tags=("releases",)),
    Endpoint("post", "/api/decision/release-policy/approvals", "Approve another principal's pending policy "
             "request `{request_seq, reason?}`: applies it as a signed policy event. Needs `approve`; never the "
             "requester.", True,
             {200: "{ok, policy, pending, governance_seq, event}", 400: "malformed body",
              401: "missing or invalid key", 403: "key lacks approve, or approves its own request",
              404: "no such pending request", 409: "the policy changed since the request",
              413: "body too large", 415: MEDIA},
             errors=BODY_ERRORS + AUTH_ERRORS + ("RELEASE_POLICY_INVALID", "RELEASE_PERMISSION_DENIED",
                                                 "RELEASE_APPROVAL_NOT_FOUND", "RELEASE_SELF_APPROVAL",
                                                 "RELEASE_POLICY_CHANGED", "LEDGER_UNAVAILABLE",
                                                 "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED"),
             request_body="ReleasePolicyApproval", tags=("releases",)),
)

# Events out (docs/events.md): webhook subscriptions, deliveries, replays, the outbox.
_ERRORS = AUTH_ERRORS + ("RELEASE_PERMISSION_DENIED", "LEDGER_UNAVAILABLE")
_SUB = "/api/events/subscriptions/{subscription_id}"
_NOT_FOUND = "no such subscription in this scope"
_KEYED = {401: "missing or invalid key", 403: "key lacks admin"}
EVENT_ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("get", "/api/events/subscriptions", "The scope's webhook subscriptions (never their secrets); needs "
             "`admin`.", True, {200: "{ok, subscriptions}", **_KEYED}, errors=_ERRORS, tags=("events",)),
    Endpoint("post", "/api/events/subscriptions", "Subscribe a webhook `{url, event_types?: [type | \"*\"], "
             "from?: \"now\" | \"beginning\"}`: deliveries are CloudEvents 1.0 signed per Standard Webhooks; the "
             "secret is answered once. An address inside (private, loopback, link-local) is refused unless the "
             "operator allows its host by name (GATE_WEBHOOK_ALLOW_HOSTS). Needs `admin`.", True,
             {201: "{ok, subscription, secret}", 400: "malformed subscription or refused target", **_KEYED,
              409: "the scope has 20 subscriptions", 413: "body too large", 415: MEDIA},
             errors=BODY_ERRORS + _ERRORS + ("EVENT_SUBSCRIPTION_INVALID", "EVENT_TARGET_REFUSED",
                                             "EVENT_SUBSCRIPTION_LIMIT"), tags=("events",)),
    Endpoint("get", _SUB, "One subscription (no secret).", True,
             {200: "{ok, subscription}", **_KEYED, 404: _NOT_FOUND},
             errors=_ERRORS + ("EVENT_SUBSCRIPTION_NOT_FOUND",), tags=("events",)),
    Endpoint("patch", _SUB, "Enable or disable `{status: active | disabled}`; enabling forgets the failures and "
             "carries on from the cursor.", True,
             {200: "{ok, subscription}", 400: "malformed body", **_KEYED, 404: _NOT_FOUND, 413: "body too large",
              415: MEDIA},
             errors=BODY_ERRORS + _ERRORS + ("EVENT_SUBSCRIPTION_INVALID", "EVENT_SUBSCRIPTION_NOT_FOUND"),
             tags=("events",)),
    Endpoint("post", _SUB + "/rotate", "A new secret `{overlap_seconds?}` (default 86,400, at most 604,800): the "
             "old one signs beside it until then.", True,
             {200: "{ok, subscription, secret}", 400: "malformed body", **_KEYED, 404: _NOT_FOUND,
              413: "body too large", 415: MEDIA},
             errors=BODY_ERRORS + _ERRORS + ("EVENT_SUBSCRIPTION_INVALID", "EVENT_SUBSCRIPTION_NOT_FOUND"),
             tags=("events",)),
    Endpoint("post", _SUB + "/replay", "Send events again `{seq}` or `{since, until}` (at most 10,000), with "
             "their original ids.", True,
             {202: "{ok, queued}", 400: "malformed body", **_KEYED, 404: "no such subscription or event",
              413: "body too large", 415: MEDIA},
             errors=BODY_ERRORS + _ERRORS + ("EVENT_SUBSCRIPTION_INVALID", "EVENT_SUBSCRIPTION_NOT_FOUND",
                                             "EVENT_NOT_FOUND"), tags=("events",)),
    Endpoint("get", _SUB + "/deliveries", "Deliveries: attempts, success rate, latency, lag, pending replays and "
             "the last failures with the receiver's status and the first 300 characters of its answer (text).",
             True, {200: "{ok, subscription, attempts, succeeded, success_rate, latency_ms_p50, lag, last_failures}",
                    **_KEYED, 404: _NOT_FOUND},
             errors=_ERRORS + ("EVENT_SUBSCRIPTION_NOT_FOUND",), tags=("events",)),
    Endpoint("get", "/api/events/settings", "The scope's opt-in events: `decision_created` and the anomaly "
             "report's schedule; needs `admin`.", True, {200: "{ok, settings}", **_KEYED}, errors=_ERRORS,
             tags=("events",)),
    Endpoint("put", "/api/events/settings", "State `{decision_created: bool, anomaly_every_seconds: null | "
             "300-604800}`: every decision announced with its record, and the anomaly report run on a schedule "
             "(each anomaly announced once until it clears). Needs `admin`.", True,
             {200: "{ok, settings}", 400: "malformed settings", **_KEYED, 413: "body too large", 415: MEDIA},
             errors=BODY_ERRORS + _ERRORS + ("EVENT_SETTINGS_INVALID",), tags=("events",)),
    Endpoint("get", "/api/events", "The scope's outbox in order: CloudEvents after `after` (a seq), at most "
             "`limit` (1 to 500).", True, {200: "{ok, events}", 400: "bad after or limit", **_KEYED},
             errors=_ERRORS + ("REQUEST_INVALID",),
             query=(("after", "integer", "the last seq already read (default 0)"),
                    ("limit", "integer", "how many events at most (default 100, at most 500)")),
             tags=("events",)),
)

# Held actions (docs/holds.md): the inbox, a hold's signed steps, the hold policy and chain, the wait.
_HOLD = "/api/holds/{decision_id}"
_HOLD_KEYED = {401: "missing or invalid key", 403: "key lacks resolve (or, under four eyes, asked for the action)"}
_HOLD_ERRORS = AUTH_ERRORS + ("HOLD_NOT_FOUND", "LEDGER_UNAVAILABLE")
_HOLD_STEP_ERRORS = BODY_ERRORS + _HOLD_ERRORS + (
    "HOLD_PERMISSION_DENIED", "HOLD_FOUR_EYES", "HOLD_NOT_A_MEMBER", "HOLD_ALREADY_RESOLVED", "HOLD_ALREADY_VOTED",
    "HOLD_CLAIMED", "HOLD_RESOLUTION_INVALID", "HOLD_BUSY", "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED")
_STEP_ANSWERS = {201: "{ok, event, hold}: the signed hold_event_v1 and the hold after it", 400: "malformed body",
                 **_HOLD_KEYED, 404: "no such hold in this scope", 409: "already resolved, voted or claimed",
                 413: "body too large", 415: MEDIA, 503: "busy or no signing key"}
HOLD_ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("get", "/api/holds", "The scope's holds, soonest deadline first then most urgent: `state` (open, "
             "approved, denied, expired, closed, all), `queue`, `limit` (1-500), `offset`.", True,
             {200: "{ok, holds, count, total, counts}", 400: "bad query", 401: "missing or invalid key"},
             errors=AUTH_ERRORS + ("REQUEST_INVALID",),
             query=(("state", "string", "open (default), approved, denied, expired, closed or all",
                     {"type": "string", "enum": ["open", "approved", "denied", "expired", "closed", "all"]}),
                    ("queue", "string", "one queue only"),
                    ("limit", "integer", "at most this many (default 50, at most 500)",
                     {"type": "integer", "minimum": 1, "maximum": 500}),
                    ("offset", "integer", "skip this many", {"type": "integer", "minimum": 0, "maximum": 1_000_000})),
             tags=("holds",)),
    Endpoint("get", "/api/holds/policy", "The scope's hold policy: queues (deadline, quorum, members, "
             "justification, escalation), routes by policy and rule, four eyes.", True,
             {200: "{ok, policy}", 401: "missing or invalid key"}, errors=AUTH_ERRORS, tags=("holds",)),
    Endpoint("put", "/api/holds/policy", "State the whole hold policy (needs `admin`): a signed `policy_set` step "
             "of the scope's hold chain.", True,
             {200: "{ok, policy, event}", 400: "invalid policy", 401: "missing or invalid key", 403: "key lacks admin",
              413: "body too large", 415: MEDIA},
             errors=BODY_ERRORS + AUTH_ERRORS + ("HOLD_POLICY_INVALID", "HOLD_PERMISSION_DENIED"),
             request_body="HoldPolicy", tags=("holds",)),
    Endpoint("get", "/api/holds/history", "The scope's hold chain (`hold_history_v1`) for offline checks "
             "(`gate verify --hold-history`).", True, {200: "hold_history_v1", 401: "missing or invalid key"},
             errors=AUTH_ERRORS, tags=("holds",)),
    Endpoint("get", _HOLD, "One hold with its facts and its signed events.", True,
             {200: "{ok, hold}", 401: "missing or invalid key", 404: "no such hold in this scope"},
             errors=_HOLD_ERRORS, tags=("holds",)),
    Endpoint("post", _HOLD + "/resolve", "A reviewer's vote `{decision: approve | deny, reason_code, note?}` (needs "
             "`resolve`); it closes the hold when it denies or completes the queue's quorum.", True, _STEP_ANSWERS,
             errors=_HOLD_STEP_ERRORS, request_body="HoldResolution", tags=("holds",)),
    Endpoint("post", _HOLD + "/claim", "Claim the hold (others cannot claim or resolve it for 30 minutes).", True,
             _STEP_ANSWERS, errors=_HOLD_STEP_ERRORS, tags=("holds",)),
    Endpoint("post", _HOLD + "/unclaim", "Release one's own claim.", True, _STEP_ANSWERS,
             errors=_HOLD_STEP_ERRORS, tags=("holds",)),
    Endpoint("post", _HOLD + "/reassign", "Move the hold to another queue `{queue, note?}`.", True, _STEP_ANSWERS,
             errors=_HOLD_STEP_ERRORS, request_body="HoldReassign", tags=("holds",)),
    Endpoint("post", _HOLD + "/escalate", "Move the hold to its queue's escalation queue now.", True,
             _STEP_ANSWERS, errors=_HOLD_STEP_ERRORS + ("HOLD_NOT_ESCALABLE",), tags=("holds",)),
    Endpoint("get", "/api/decision/{decision_id}/resolution", "The held decision's state and, once closed, its "
             "signed resolution; `wait` (0-30 s) long-polls for the close without holding a server thread. An "
             "open or expired hold never reads as approval.", True,
             {200: "{ok, decision_id, state, approved, resolution, hold}", 400: "bad wait",
              401: "missing or invalid key", 404: "no hold for this decision in this scope"},
             errors=_HOLD_ERRORS + ("REQUEST_INVALID",),
             query=(("wait", "integer", "seconds to wait for the close (0 to 30)",
                     {"type": "integer", "minimum": 0, "maximum": 30}),), tags=("holds",)),
)

# Issue 11: operational routes (docs/operations.md).
_METRICS_ERRORS = ("METRICS_UNAUTHORIZED", "METRICS_UNAVAILABLE")
OPERATIONS_ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("get", "/api/runtime-config", "Public runtime configuration: versions, binding and advisory modes, "
             "advisor panel (models and provider hosts only), signing algorithm and key id, registries, limits, "
             "which protections are on. Never a secret.", False, {200: "runtime configuration"},
             tags=("operations",)),
    Endpoint(
        "post", "/api/pilot",
        "Pilot intake. Submission `{company, contact_name, contact_email, use_case, monthly_decisions, notes?, "
        "consent: true}` → 201 with pilot_id and a one-time confirmation_token; the same submission again (same "
        "Idempotency-Key, default sha256 of e-mail and company) → 200 replayed; another body under the key → 409. "
        "Confirmation `{pilot_id, confirmation_token}` → 200 confirmed (idempotent); unknown id or wrong token → "
        "404. Rate-limited per client address.",
        False, {201: "intake stored", 200: "replayed submission, or confirmed", 400: "invalid intake or confirmation",
                404: "no intake with this id and token", 409: "idempotency key holds another intake",
                413: "body over 16 KiB", 415: MEDIA, 429: "rate limited per client",
                503: "ledger or rate limiter unavailable"},
        errors=BODY_ERRORS + ("PILOT_IDEMPOTENCY_CONFLICT", "PILOT_NOT_FOUND", "SVC_API_RATE_LIMITED",
                              "RATE_LIMITER_UNAVAILABLE", "LEDGER_UNAVAILABLE"),
        request_body="PilotRequest", response_headers=RATE_HEADERS + ("x-idempotency-status",),
        request_headers=("Idempotency-Key",), tags=("operations",)),
    Endpoint("get", "/api/proof-metrics", "Aggregate proof metrics (decisions by authority and verdict, receipts by "
             "kind, audit chains, workflow runs, pilots, signing readiness); no tenant names. Needs x-metrics-token.",
             False, {200: "proof metrics", 401: "missing or wrong metrics token",
                     503: "no metrics token configured, or ledger unavailable"},
             errors=_METRICS_ERRORS + ("LEDGER_UNAVAILABLE",), request_headers=("x-metrics-token",),
             tags=("operations",)),
    Endpoint("get", "/api/pilot-export", "Pilot intakes as CSV (text/csv, oldest first; every field quoted, and a ' put "
             "before any = + - @ that could start a cell under the separators , ; tab | or a line "
             "break, against formula injection). Needs x-metrics-token.",
             False, {200: "CSV export", 400: "bad limit", 401: "missing or wrong metrics token",
                     503: "no metrics token configured, or ledger unavailable"},
             errors=_METRICS_ERRORS + ("REQUEST_INVALID", "LEDGER_UNAVAILABLE"),
             query=(("limit", "integer", "1-10000, default 1000", P.integer(1, 10_000)),),
             request_headers=("x-metrics-token",),
             tags=("operations",)),
    Endpoint("get", "/api/policy-alerts", "Alerts for the caller's scope: anomalies of the caller's ten most recently "
             "decided policies (or `policy_id`), from the same anomaly engine and report as /anomalies, and vendor "
             "policy-table rows verified longer ago than GATE_POLICY_SOURCE_MAX_AGE_DAYS.",
             True, {200: "alerts", 400: "bad query", 401: "missing or invalid key", 403: "disabled key",
                    503: "ledger unavailable"},
             errors=AUTH_ERRORS + ("REQUEST_INVALID", "LEDGER_UNAVAILABLE"),
             query=(("policy_id", "string", "only this policy's anomalies",
                     P.printable(1, P.MAX_POLICY_ID, "only this policy's anomalies")),), tags=("operations",)),
    Endpoint("get", "/metrics", "Prometheus text exposition: request counts and latencies per route template and "
             "status, decisions by authority and verdict, ledger and signing readiness. No tenant labels. Public "
             "unless GATE_METRICS_TOKEN is set (then x-metrics-token or Bearer).",
             False, {200: "Prometheus text format", 401: "metrics token required and missing or wrong"},
             errors=("METRICS_UNAUTHORIZED",), request_headers=("x-metrics-token",), tags=("operations",)),
)

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(
        "post", "/api/decide", "Create a signed Decision Record (binding in rulebook mode; advisory in the legacy "
        "modes single, multi, runtime and when mode is omitted: decision_contract advisory_only, an advisory "
        "approval reads verdict review / c unclear) or replay one.",
        True,
        {200: "Decision Record in the requested view", 400: "malformed request", 401: "missing or invalid key",
         403: "disabled key", 409: "idempotency or rulebook version conflict", 413: "body too large",
         415: MEDIA, 422: "rulebook or trusted adapter invocation refused, or evaluation limits exceeded (fail closed)",
         429: "rate limit or monthly cap",
         500: "trusted adapter output invalid or capability denied (nothing stored, nothing approved)",
         502: "advisory mode: the advisor failed (nothing stored)",
         503: "signing, ledger, limiter, adapter worker or (multi) advisors unavailable",
         504: "trusted adapter exceeded its 1,000 ms budget (nothing stored)"},
        errors=AUTH_ERRORS + BODY_ERRORS + (
            "SVC_API_RATE_LIMITED", "SVC_API_MONTHLY_CAP_EXCEEDED", "SVC_API_IDEMPOTENCY_CONFLICT",
            "LEGACY_MODE_UNAVAILABLE", "ADVISOR_UPSTREAM_FAILED", "ADVISOR_UNAVAILABLE", "RULEBOOK_INVALID", "RULEBOOK_BINDING_MODE_UNSUPPORTED",
            "RULEBOOK_BINDING_MODE_CONFLICT", "RULEBOOK_OUTPUT_MATERIAL_FORBIDDEN",
            "RULEBOOK_VERSION_CONFLICT", "TRUSTED_ADAPTER_INVALID", "TRUSTED_ADAPTER_NOT_REGISTERED",
            "TRUSTED_ADAPTER_MANIFEST_MISMATCH", "TRUSTED_ADAPTER_INPUT_INVALID",
            "TRUSTED_ADAPTER_EXECUTION_TIMEOUT", "TRUSTED_ADAPTER_OUTPUT_INVALID",
            "TRUSTED_ADAPTER_CAPABILITY_DENIED", "TRUSTED_ADAPTER_UNAVAILABLE",
            "EVALUATION_INPUT_TOO_LARGE", "EVALUATION_TOO_COSTLY",
            "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED", "LEDGER_UNAVAILABLE", "RATE_LIMITER_UNAVAILABLE", "INTERNAL_ERROR",
        ),
        request_body="DecisionRequest",
        response_headers=DECIDE_HEADERS + ("Retry-After",),
        request_headers=tuple(REQUEST_HEADERS),
        tags=("decisions",),
    ),
    Endpoint(
        "get", "/api/decision/status", "Readiness: signing, ledger, idempotency, limits, auth, registries.",
        False, {200: "ready", 503: "degraded (same body shape)"}, tags=("registries",),
    ),
    Endpoint(
        "get", "/api/decision/receipt-keys", "Public receipt key registry (active and retired Ed25519 keys).",
        False, {200: "key registry"}, tags=("registries",),
    ),
    Endpoint(
        "get", "/api/decision/policy-bundles", "Policy bundle registry; `?hash=` resolves one bundle.",
        False, {200: "registry or one bundle", 400: "malformed hash", 404: "unknown bundle hash"},
        errors=("REQUEST_INVALID", "POLICY_BUNDLE_NOT_FOUND"),
        query=(("hash", "string", "64-hex bundle hash to resolve",
                {"type": "string", "pattern": f"^{P.SPACES}*[0-9A-Fa-f]{{64}}{P.SPACES}*$",
                 "description": "64-hex bundle hash to resolve (case and surrounding space ignored)"}),),
        tags=("registries",),
    ),
    Endpoint(
        "get", "/api/decision/policy-patterns",
        "Policy pattern registry (decision_pattern_registry_v1): pricing_exception, refund_review, "
        "agent_action_gate, crm_writeback_gate, each with pattern_hash, a decision_request_template that is a "
        "valid rulebook-mode request, outcome and CRM sync templates and SDK examples. `?pattern_id=` (pattern "
        "id or policy id) answers one `policy_pattern`; `?tag=` filters the list.",
        False, {200: "registry or one pattern", 400: "unknown or malformed query parameter",
                404: "no pattern has this id (or not with this tag)"},
        errors=("REQUEST_INVALID", "POLICY_PATTERN_NOT_FOUND"),
        query=(("pattern_id", "string", "pattern id or policy id; answers one pattern",
                {"type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,120}$"}),
               ("tag", "string", "only patterns carrying this tag", {"type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,120}$"})),
        tags=("registries",),
    ),
    Endpoint(
        "get", "/api/decision/rulebooks", "Rulebook snapshot metadata in the caller's scope (never the body).",
        True, {200: "{ok, rulebook}", 400: "lookup needs exactly hash, or rulebook_id and version",
               401: "missing or invalid key", 403: "disabled key", 404: "not in scope"},
        errors=AUTH_ERRORS + ("RULEBOOK_LOOKUP_INVALID", "RULEBOOK_NOT_FOUND"),
        query=(("hash", "string", "rulebook hash"), ("rulebook_id", "string", "with version"),
               ("version", "string", "with rulebook_id")),
        tags=("registries",),
    ),
    Endpoint(
        "get", "/api/decision/adapters", "Trusted adapter registry (public): manifests with closed input and "
        "output JSON Schemas, implementation_hash, manifest_hash and the execution contract, so a caller can "
        "build an `adapter` invocation. `?adapter_id=` filters; with `&version=` it answers one `adapter`.",
        False, {200: "{ok, trusted_adapter_registry_version, count, adapters} or {ok, adapter}",
                400: "version without adapter_id, or not semver", 404: "no registered adapter matches"},
        errors=("REQUEST_INVALID", "TRUSTED_ADAPTER_NOT_FOUND"),
        query=(("adapter_id", "string", "adapter id"),
               ("version", "string", "semver, with adapter_id", {"type": "string", "pattern": P.SEMVER})),
        tags=("registries",),
    ),
    Endpoint(
        "get", "/api/decision/verify", "Describe exported-record verification.", False,
        {200: "endpoint metadata"}, tags=("verification",),
    ),
    Endpoint(
        "post", "/api/decision/verify",
        "Verify an exported record `{record, input?, public_key?}` without a ledger lookup. "
        "A key in the request is never a trust anchor.",
        False, {200: "verification result", 400: "malformed body", 413: "body too large", 415: MEDIA},
        errors=BODY_ERRORS, request_body="ExportedRecordVerificationRequest", tags=("verification",),
    ),
    Endpoint(
        "get", "/api/decision/{decision_id}", "The stored Decision Record (full view unless a view is asked for). "
        "A row whose record is not bound to it (another id or scope) reads as absent.",
        True, {200: "Decision Record", 400: "response_view is not minimal, standard or full",
               401: "missing or invalid key", 403: "disabled key", 404: "not in scope"},
        errors=AUTH_ERRORS + ("DECISION_NOT_FOUND", "REQUEST_INVALID"),
        query=(("response_view", "string", "minimal, standard or full", P.view("minimal, standard or full")),),
        tags=("decisions",),
    ),
    Endpoint(
        "get", "/api/decision/{decision_id}/verify",
        "Recompute the stored record's hashes and signatures, and bind it to its ledger row: id, scope, "
        "chain position, indexed columns, the row seal and the decision's receipt chain (docs/verification.md §9).",
        True, {200: "verification result", 401: "missing or invalid key", 403: "disabled key", 404: "not in scope"},
        errors=AUTH_ERRORS + ("DECISION_NOT_FOUND",), tags=("verification",),
    ),
    Endpoint(
        "post", "/api/decision/{decision_id}/verify",
        "Verify a supplied record (`{record?, input?}`) against the stored one, or the stored one.",
        True, {200: "verification result", 400: "malformed body", 401: "missing or invalid key",
               403: "disabled key", 404: "not in scope", 413: "body too large", 415: MEDIA},
        errors=AUTH_ERRORS + BODY_ERRORS + ("DECISION_NOT_FOUND",),
        request_body="RecordVerificationRequest", tags=("verification",),
    ),
    *[
        endpoint
        for path, code, wrapper, id_header in (
            ("execution", "SVC_EXECUTION", "execution", "x-decision-execution"),
            ("outcome", "SVC_OUTCOME", "outcome", "x-decision-outcome"),
            ("crm-sync", "SVC_CRM_SYNC", "crm_sync", "x-decision-crm-sync"),
        )
        for endpoint in (
            Endpoint(
                "post", f"/api/decision/{{decision_id}}/{path}",
                f"Record a hashed {wrapper.replace('_', ' ')} receipt linked to the decision "
                f"(`{{ok, {wrapper}}}`); idempotent with x-idempotency-key.",
                True,
                {201: "created", 200: "idempotent replay (identical body)", 400: "malformed body",
                 401: "missing or invalid key", 403: "disabled key", 404: "decision not in scope",
                 409: "idempotency conflict, in progress, or record mismatch"
                 + (" or execution mismatch (the linked execution receipt)" if path == "outcome" else ""),
                 413: "body too large",
                 415: MEDIA, 422: "credentials offered (CRM sync)", 503: "claim or storage failure: nothing recorded"},
                errors=(f"{code}_UNAUTHORIZED", "DECISION_NOT_FOUND", f"{code}_IDEMPOTENCY_CONFLICT",
                        f"{code}_IDEMPOTENCY_IN_PROGRESS", f"{code}_RECORD_MISMATCH", f"{code}_UNAVAILABLE")
                + BODY_ERRORS + (("SVC_CRM_SYNC_CREDENTIALS_FORBIDDEN",) if path == "crm-sync" else ())
                + (("SVC_OUTCOME_EXECUTION_MISMATCH",) if path == "outcome" else ()),
                request_body=f"{wrapper.title().replace('_', '')}Request",
                response_headers=(f"{id_header}-id", f"{id_header}-hash", "x-idempotency-status"),
                request_headers=("x-api-key", "x-idempotency-key", "x-request-id"),
                tags=("lifecycle",),
            ),
            Endpoint(
                "get", f"/api/decision/{{decision_id}}/{path}",
                f"List the decision's {wrapper.replace('_', ' ')} receipts, newest first, paged.",
                True, {200: "page", 400: "bad limit or cursor", 401: "missing or invalid key",
                       403: "disabled key", 404: "decision not in scope"},
                errors=(f"{code}_UNAUTHORIZED", "DECISION_NOT_FOUND", "REQUEST_INVALID"),
                query=(("limit", "integer", "1-100, default 20", P.integer(1, 100)),
                       ("cursor", "string", "next_cursor of the previous page")),
                tags=("lifecycle",),
            ),
        )
    ],
    *[
        Endpoint(
            "post", f"/api/decision/{{decision_id}}/{path}", summary, True,
            {200: "replay summary: replay_against, compared fields, replay_status, drift[], decision projection",
             400: "malformed body", 401: "missing or invalid key", 403: "disabled key", 404: "not in scope",
             409: "historical rulebook, evaluator or adapter lineage unavailable or mismatched",
             413: "body too large", 415: MEDIA,
             422: "invalid replay mode, forbidden historical input override, unavailable replay input, or an "
                  "override over the evaluation limits",
             500: "the re-run trusted adapter returned invalid output or was denied a capability",
             502: "advisory decision: the advisor failed (nothing written)",
             503: "ledger, adapter worker or (multi) advisors unavailable",
             504: "the re-run trusted adapter exceeded its 1,000 ms budget"},
            errors=AUTH_ERRORS + BODY_ERRORS + (
                "DECISION_NOT_FOUND", "REPLAY_MODE_INVALID", "REPLAY_INPUT_OVERRIDE_FORBIDDEN",
                "REPLAY_INPUT_UNAVAILABLE", "REPLAY_LINEAGE_UNAVAILABLE", "REPLAY_LINEAGE_MISMATCH",
                "RULEBOOK_OUTPUT_MATERIAL_FORBIDDEN", "EVALUATION_INPUT_TOO_LARGE", "EVALUATION_TOO_COSTLY",
                "TRUSTED_ADAPTER_EXECUTION_TIMEOUT", "TRUSTED_ADAPTER_OUTPUT_INVALID",
                "TRUSTED_ADAPTER_CAPABILITY_DENIED", "TRUSTED_ADAPTER_UNAVAILABLE",
                "ADVISOR_UPSTREAM_FAILED", "ADVISOR_UNAVAILABLE", "LEDGER_UNAVAILABLE"),
            request_body="DiffRequest" if path == "diff" else "ReplayRequest", response_headers=("x-decision-id",),
            request_headers=("x-api-key", "Prefer", "x-decision-response-view"), tags=("replay",),
        )
        for path, summary in (
            ("replay", ("Replay a stored decision without writing anything. Rulebook decisions replay historically by "
                       "default (stored snapshot, canonical input, pinned adapter re-run with its output hash "
                       "compared; never the current evaluator); `replay_mode: current` uses the scope's current "
                       "rulebook for the id and accepts an `input` override. Advisory (legacy-mode) decisions "
                       "replay in current mode against the advisor panel (docs/replay.md).")),
            ("diff", ("Replay forced to current mode: the stored decision against the scope's current rulebook, or "
                     "against a current-mode `input` override. Same summary shape as replay.")),
        )
    ],
    Endpoint(
        "post", "/api/decision/{decision_id}/counterfactuals",
        f"Simulation-only what-if scenarios (at most {MAX_SCENARIOS}): each `context_patch` is merged (RFC 7396) "
        "over the stored context and facts and evaluated against the current runtime. Never authorizes a mutation.",
        True, {200: "scenarios[] with scenario_id, label, verdict, action, changed, diff, recommendation",
               400: "missing or invalid scenarios, or malformed body", 401: "missing or invalid key",
               403: "disabled key", 404: "not in scope", 413: "body too large", 415: MEDIA,
               422: "base input unavailable, or a patch over the evaluation limits", 503: "ledger unavailable"},
        errors=AUTH_ERRORS + BODY_ERRORS + (
            "DECISION_NOT_FOUND", "COUNTERFACTUAL_SCENARIOS_INVALID", "COUNTERFACTUAL_BASE_INPUT_UNAVAILABLE",
            "RULEBOOK_OUTPUT_MATERIAL_FORBIDDEN", "EVALUATION_INPUT_TOO_LARGE", "EVALUATION_TOO_COSTLY",
            "LEDGER_UNAVAILABLE"),
        request_body="CounterfactualsRequest", response_headers=COUNTERFACTUAL_HEADERS,
        request_headers=("x-api-key",), tags=("replay",),
    ),
    Endpoint(
        "get", "/api/decision/chains/{chain_id}",
        "The caller's audit chain: retained links, chain_size, rolling merkle_root, head_link_hash, "
        "RFC 6962 tree root, signed checkpoint, the window's outcomes linked to their execution receipts "
        "(execution_links) and verification recomputed from storage.",
        True, {200: "chain view", 400: "bad limit", 401: "missing or invalid key", 403: "disabled key",
               404: "not in scope"},
        errors=("SVC_CHAIN_UNAUTHORIZED", "CHAIN_NOT_FOUND", "REQUEST_INVALID"),
        query=(("limit", "integer", "retained links, 1-1000, default 20", P.integer(1, 1000)),), tags=("audit",),
    ),
    Endpoint(
        "get", "/api/decision/chains/{chain_id}/checkpoint",
        "The signed checkpoint of the caller's chain at its head, appended to the gate's checkpoint log "
        "(GATE_CHECKPOINT_LOG), with `first` also the consistency proof from that tree size (for a witness: "
        "`gate checkpoint save`).",
        True, {200: "checkpoint", 400: "bad first", 401: "missing or invalid key", 403: "disabled key",
               404: "chain not in scope or without decisions",
               409: "the stored chain contradicts its links, nodes or the gate's checkpoint log",
               503: "the checkpoint log cannot be written"},
        errors=("SVC_CHAIN_UNAUTHORIZED", "CHAIN_NOT_FOUND", "REQUEST_INVALID", "CHAIN_INTEGRITY_FAILED",
                "LEDGER_UNAVAILABLE"),
        query=(("first", "integer", "optional, 1 … chain size: include the consistency proof from it",
                P.integer(1, P.INT_ARG_MAX)),),
        tags=("audit",),
    ),
    Endpoint(
        "get", "/api/decision/chains/{chain_id}/inclusion",
        "RFC 6962 inclusion proof of a decision's leaf at a tree size (default: the head), with the signed "
        "checkpoint of that size.",
        True, {200: "inclusion proof", 400: "missing decision_id or bad tree_size", 401: "missing or invalid key",
               403: "disabled key", 404: "chain or decision not in scope",
               409: "the stored chain head contradicts its links or nodes"},
        errors=("SVC_CHAIN_UNAUTHORIZED", "CHAIN_NOT_FOUND", "REQUEST_INVALID", "CHAIN_INTEGRITY_FAILED"),
        query=(("decision_id", "string", "required", {**P.text(), "minLength": 1, "x-required": True}),
               ("tree_size", "integer", "record position … chain size", P.integer(1, P.INT_ARG_MAX))),
        tags=("audit",),
    ),
    Endpoint(
        "get", "/api/decision/chains/{chain_id}/consistency",
        "RFC 6962 consistency proof between two tree sizes (second defaults to the head), both roots "
        "recomputed from stored nodes, and both signed checkpoints.",
        True, {200: "consistency proof", 400: "bad sizes", 401: "missing or invalid key", 403: "disabled key",
               404: "chain not in scope", 409: "the stored chain head contradicts its links or nodes"},
        errors=("SVC_CHAIN_UNAUTHORIZED", "CHAIN_NOT_FOUND", "REQUEST_INVALID", "CHAIN_INTEGRITY_FAILED"),
        query=(("first", "integer", "required, ≥ 1", {**P.integer(1, P.INT_ARG_MAX), "x-required": True}),
               ("second", "integer", "first … chain size", P.integer(1, P.INT_ARG_MAX))),
        tags=("audit",),
    ),
    Endpoint(
        "get", "/api/decision/{decision_id}/packet",
        "Export a portable decision_packet_v1: the record, receipts, outcomes, CRM syncs, a held decision's signed "
        "hold events and the audit-chain excerpt with its inclusion proof and signed checkpoint. Never partial: 503 "
        "when a source cannot be read.",
        True, {200: "packet", 400: "bad query", 401: "missing or invalid key", 403: "disabled key",
               404: "not in scope", 409: "the stored chain head contradicts its links or nodes",
               503: "a packet source cannot be read"},
        errors=AUTH_ERRORS + ("REQUEST_INVALID", "DECISION_NOT_FOUND", "PACKET_SOURCE_UNAVAILABLE",
                              "CHAIN_INTEGRITY_FAILED"),
        query=(("include_input", "boolean", "default false"), ("include_chain", "boolean", "default true"),
               ("include_intelligence", "boolean", "default true"),
               *[(name, "integer", "1-1000, default 20", P.packet_limit("1-1000, default 20"))
                 for name in ("execution_limit", "outcome_limit", "chain_limit")],
               ("consistency_from", "integer", ("optional, 1 … chain size: add chain_consistency, the proof that "
                                                "the tree of that size (a witness's checkpoint) is a prefix of the "
                                                "exported one"), P.integer(1, P.INT_ARG_MAX))),
        response_headers=("x-decision-packet-version", "x-decision-packet-hash"), tags=("packets",),
    ),
    Endpoint("get", "/api/decision/packet/verify", "Describe packet verification.", False,
             {200: "endpoint metadata"}, tags=("verification",)),
    Endpoint(
        "post", "/api/decision/packet/verify",
        "Verify an exported packet `{packet, input?}`: packet hash, embedded record, receipt links, hold events, "
        "report hashes, chain links, inclusion proof and checkpoint signature. A key inside the packet is never "
        "trusted.",
        False, {200: "verification result", 400: "malformed body", 413: "body too large", 415: MEDIA},
        errors=BODY_ERRORS, request_body="PacketVerificationRequest", tags=("verification",),
    ),
    *[
        Endpoint(
            "get", kind.path,
            kind.summary + " Computed from the live ledger by the same engines as `gate report` "
            "(docs/intelligence.md); only the caller's scope is read, so a policy without decisions in it "
            "answers an empty sample.",
            True, {200: "sealed report", 400: "bad query parameter", 401: "missing or invalid key", 403: "disabled key",
                   503: "ledger unavailable"},
            errors=(kind.unauthorized, "REQUEST_INVALID", "LEDGER_UNAVAILABLE"),
            query=tuple((name, REPORT_PARAMS[name].type.__name__.replace("int", "integer").replace("float", "number")
                         .replace("str", "string"), REPORT_PARAMS[name].describe(), P.report_param(name))
                        for name in kind.params),
            tags=("intelligence",),
        )
        for kind in REPORTS.values()
    ],
    Endpoint(
        "get", "/schemas/{name}", "Public contract schemas, served byte for byte (Rulebook v1 …).",
        False, {200: "JSON Schema", 404: "unknown schema"}, errors=("NOT_FOUND",), tags=("contract",),
    ),
    Endpoint("get", "/openapi.json", "This OpenAPI 3.1 document.", False, {200: "OpenAPI"}, tags=("contract",)),
    Endpoint("get", "/docs.json", "Endpoints, schemas, limits and error codes.", False, {200: "docs"},
             tags=("contract",)),
    Endpoint("get", "/docs", "Interactive API reference (Swagger UI over /openapi.json), from assets installed with "
             "the server; no CDN.", False, {200: "HTML page", 404: "reference assets not installed"},
             errors=("NOT_FOUND",), response_headers=("Content-Security-Policy", "X-Content-Type-Options"),
             tags=("contract",)),
    Endpoint("get", "/docs/assets/{name}", "A script, style or icon file of the API reference page (fixed list).",
             False, {200: "asset file", 404: "no such asset"}, errors=("NOT_FOUND",), tags=("contract",)),
    Endpoint("get", "/healthz", "Liveness: 200 while the process serves requests; reads no ledger, limiter or key "
             "(readiness is /api/decision/status).", False, {200: "alive"}, tags=("registries",)),
    *POLICYCHECK_ENDPOINTS,
    *OPERATIONS_ENDPOINTS,
    *RELEASE_ENDPOINTS,
    *EVENT_ENDPOINTS,
    *HOLD_ENDPOINTS,
)

# Issue 18 item 7: the costly keyed routes are charged to the key's cost window (api/costs.py).
COST_HEADERS = (*RATE_HEADERS, "X-RateLimit-Cost", "Retry-After")
CHARGED_ROUTES = frozenset({
    ("post", "/api/decision/{decision_id}/replay"), ("post", "/api/decision/{decision_id}/diff"),
    ("post", "/api/decision/{decision_id}/counterfactuals"), ("get", "/api/decision/{decision_id}/verify"),
    ("post", "/api/decision/{decision_id}/verify"), ("get", "/api/decision/{decision_id}/packet"),
    ("get", "/api/decision/chains/{chain_id}"), ("get", "/api/policy-alerts"),
    ("post", "/api/decision/rulebooks"), ("get", "/api/decision/rulebooks/{rulebook_id}/release"),
    ("get", "/api/decision/rulebooks/{rulebook_id}/release/history"),
    ("post", "/api/decision/rulebooks/{rulebook_id}/release"),
    *((e.method, e.path) for e in EVENT_ENDPOINTS),
    *(("get", kind.path) for kind in REPORTS.values()),
})


def _charged(endpoint: Endpoint) -> Endpoint:
    """A charged route's 429 and limiter 503, and its cost-window headers
    (docs/operating.md "Rate limits and cost units")."""
    if (endpoint.method, endpoint.path) not in CHARGED_ROUTES:
        return endpoint
    unavailable = endpoint.responses.get(503)
    responses = {**endpoint.responses,
                 429: "the request's cost units exceed what remains of the key's cost window this minute "
                      "(Retry-After; nothing was computed)",
                 503: f"{unavailable}, or the rate limiter is unavailable" if unavailable
                 else "rate limiter unavailable"}
    return replace(endpoint, responses=responses,
                   errors=endpoint.errors + ("SVC_API_RATE_LIMITED", "RATE_LIMITER_UNAVAILABLE"),
                   response_headers=endpoint.response_headers + COST_HEADERS)


ENDPOINTS = tuple(_charged(endpoint) for endpoint in ENDPOINTS)


# The members of a release policy (gate.releases.policy), whole for PUT, any for PATCH.
_RELEASE_POLICY_MEMBERS: dict[str, Any] = {
    "require_approval": {"type": "boolean"},
    "approval_ttl_seconds": {"type": "integer", "minimum": 60, "maximum": 2592000},
    "refuse_superseded_inline": {"type": "boolean"},
    "require_dry_run": {"type": "boolean", "description": "activate, and a canary above dry_run_canary_percent, "
                        "need the version's signed dry-run manifest"},
    "dry_run_canary_percent": {"type": "number", "minimum": 0, "exclusiveMaximum": 100},
    "dry_run_max_age_seconds": {"type": "integer", "minimum": 60, "maximum": 31536000},
}

SCHEMAS: dict[str, Any] = {
    **RECEIPT_REQUEST_SCHEMAS,  # derived from gate.receipts.validation (api.openapi_receipts)
    "ErrorBody": {
        "type": "object",
        "required": ["c", "v", "error", "message"],
        "properties": {
            "c": {"const": C.COMPACT_UNCLEAR, "description": "Always unclear: an error is never an approval."},
            "v": {"type": "string"},
            "error": {"type": "string", "enum": sorted(ERROR_TABLE)},
            "message": {"type": "string"},
            "errors": {"type": "array", "items": {"type": "object", "properties": {
                "field": {"type": "string"}, "code": {"type": "string"}, "message": {"type": "string"}}}},
            "retry_after": {"type": "integer"},
        },
        "additionalProperties": True,
    },
    "DecisionRequest": {
        "type": "object",
        "description": "Rulebook mode (binding): mode 'rulebook' and a rulebook. Advisory modes (single, multi, "
                       "runtime, or mode omitted): a question; context.inputs feeds the offline policy-pattern "
                       "advisor and is required in runtime; context.policy_pattern picks a pattern (docs/advisory.md).",
        # Rulebook mode needs a rulebook; the advisory modes (mode absent, null or legacy) need a
        # non-blank question and refuse the rulebook-only members (gate.protocol.requests, gate.advisory.request).
        "if": {"required": ["mode"], "properties": {"mode": {"const": C.MODE_RULEBOOK}}},
        "then": {"required": ["rulebook"]},
        "else": {"required": ["question"], "properties": {"question": {"pattern": "\\S"}},
                 "not": {"anyOf": [{"required": [name]} for name in ("rulebook", "binding_mode", "adapter")]}},
        "properties": {
            "mode": {"enum": [C.MODE_RULEBOOK, *C.LEGACY_MODES, None], "description": "null or absent: single"},
            "question": {"type": "string", "maxLength": 2000,
                         "description": "Required in the advisory modes; descriptive metadata in rulebook mode."},
            "rulebook": {"type": "object", "description": f"Rulebook v1; JSON Schema at {C.RULEBOOK_SCHEMA_PATH}"},
            "binding_mode": {"enum": list(C.SUPPORTED_BINDING_MODES)},
            "adapter": {
                "type": "object", "required": ["adapter_id", "version", "manifest_hash", "input"],
                "additionalProperties": False,
                "description": "One trusted adapter invocation (GET /api/decision/adapters lists the manifests); "
                               "replaces context.inputs.",
                "properties": {
                    "adapter_id": {"type": "string", "pattern": "^[a-z][a-z0-9_.:-]{1,119}$"},
                    "version": {"type": "string", "pattern": "^\\d+\\.\\d+\\.\\d+$"},
                    "manifest_hash": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                    "input": {"type": "object", "description": "validated against the adapter's closed input schema"},
                },
            },
            "context": {"type": ["object", "null"], "properties": {"inputs": {"type": ["object", "null"]}},
                        "description": "null reads as {}"},
            "response_view": {"enum": [*C.VIEWS, None]},
        },
    },
    "PilotRequest": P.PILOT_REQUEST,
    "DecisionRecord": {
        "type": "object",
        "required": ["decision_record_version", "decision_id", "verdict", "record_hash", "receipt_hash"],
        "properties": {
            "decision_record_version": {"const": C.DECISION_RECORD_VERSION},
            "c": {"enum": list(C.COMPACT_FOR_VERDICT.values())},
            "verdict": {"enum": list(C.VERDICTS)},
            "record_hash": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            "receipt_hash": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        },
        "additionalProperties": True,
    },
    "PacketVerificationRequest": {
        "type": "object",
        "required": ["packet"],
        "properties": {"packet": {"type": "object"}, "input": {"type": "object"}},
        "additionalProperties": False,
    },
    "JsonRpcMessage": {
        "type": "object",
        "required": ["jsonrpc", "method"],
        "properties": {
            "jsonrpc": {"const": "2.0"},
            "id": {"oneOf": [{"type": "string"}, {"type": "integer", "minimum": -C.MAX_SAFE_INTEGER,
                                                  "maximum": C.MAX_SAFE_INTEGER}],
                   "description": "absent for a notification (answered 202)"},
            "method": {"type": "string", "minLength": 1, "description": "initialize, ping, tools/list, tools/call, "
                       "notifications/…; any other method is answered −32601 (HTTP 200)"},
            "params": {"type": "object"},
        },
    },
    "JsonRpcError": {
        "type": "object",
        "required": ["jsonrpc", "id", "error"],
        "properties": {
            "jsonrpc": {"const": "2.0"},
            "id": {"type": ["string", "integer", "null"]},
            "error": {"type": "object", "required": ["code", "message"],
                      "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "data": {}}},
        },
    },
    # The REST twins take exactly their MCP tool's inputSchema (api.mcp.input_schema).
    **{f"PolicyCheckArguments_{spec.tool}": input_schema(spec) for spec in POLICY_CHECKS},
    "WorkflowRequest": {
        "type": "object",
        "required": ["vendor", "ticket_id"],
        "properties": {**dict(input_schema(POLICY_CHECKS[0])["properties"].items()),
                       "days_since_purchase": {**input_schema(POLICY_CHECKS[0])["properties"]["days_since_purchase"],
                                               "description": "required for refund and return"},
                       "ticket_id": {"oneOf": [{"type": "string", "pattern": "^[!-~]{1,200}$"},
                                               {"type": "integer", "minimum": 0, "maximum": C.MAX_SAFE_INTEGER}]}},
        "additionalProperties": False,
    },
    "ReplayRequest": {
        "type": "object",
        "properties": {
            "replay_mode": {"enum": list(REPLAY_MODES), "description": "historical (default for rulebook "
                            "decisions) or current; /diff accepts current only"},
            "input": {"type": "object", "description": "current mode only: facts evaluated instead of the stored ones"},
            "response_view": {"enum": list(C.VIEWS)},
        },
        # An input override is evaluated in current mode only (422 REPLAY_INPUT_OVERRIDE_FORBIDDEN).
        "dependentSchemas": {"input": {"required": ["replay_mode"],
                                       "properties": {"replay_mode": {"const": "current"}}}},
        "additionalProperties": False,
    },
    "DiffRequest": {
        "type": "object",
        "properties": {
            "replay_mode": {"const": "current", "description": "/diff is always current mode"},
            "input": {"type": "object", "description": "facts evaluated instead of the stored ones"},
            "response_view": {"enum": list(C.VIEWS)},
        },
        "additionalProperties": False,
    },
    "CounterfactualsRequest": {
        "type": "object",
        "required": ["scenarios"],
        "properties": {
            "response_view": {"enum": list(C.VIEWS), "description": "adds each scenario's simulated record in this view"},
            "scenarios": {"type": "array", "minItems": 1, "maxItems": MAX_SCENARIOS, "items": {
                "type": "object", "required": ["scenario_id", "context_patch"], "additionalProperties": False,
                "properties": {"scenario_id": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.:-]{0,119}$"},
                               "label": {"type": "string", "minLength": 1, "maxLength": 200},
                               "context_patch": {"type": "object", "description": "RFC 7396 merge patch over the "
                                                 "stored context; `inputs` patches the stored facts"}}}},
        },
        "additionalProperties": False,
    },
    "RecordVerificationRequest": {
        "type": "object",
        "properties": {
            "record": {"type": "object", "description": "A Decision Record (DecisionRecord); absent: the stored one."},
            "input": {"type": "object", "description": "The original request, checked against input_hash."},
            "public_key": {"type": "string", "description": "PEM; diagnostics only, never a trust anchor."},
        },
        "additionalProperties": False,
    },
    "RulebookPublishRequest": {
        "type": "object",
        "description": f"A Rulebook v1 (JSON Schema at {C.RULEBOOK_SCHEMA_PATH}); its semantics are checked on "
                       "publication (422 RULEBOOK_INVALID).",
    },
    "ReleaseActionRequest": {
        "type": "object",
        "required": ["action"],
        "properties": {
            "action": {"type": "string", "enum": ["shadow", "canary", "activate", "halt", "rollback", "approve"]},
            "version": {"type": "string", "minLength": 1, "maxLength": 80},
            "percent": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 100,
                        "description": "canary share of subjects, at most two decimals"},
            "subject": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]{0,63}(\\.[A-Za-z_][A-Za-z0-9_]{0,63}){0,7}$"},
            "reason": {"type": "string", "minLength": 1, "maxLength": 500},
            "migration_manifest_hash": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            "migration_manifest": {"type": "object", "description": "the version's signed dry-run manifest "
                                   "(rulebook_migration_v1 with dry_run), checked in full for canary and activate"},
            "override": {"type": "string", "enum": ["guardrail_halt"],
                         "description": "an admin activating a version its guardrail halted (with a reason)"},
            "request_seq": {"type": "integer", "minimum": 1},
            "rulebook_hash": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        },
        "additionalProperties": False,
    },
    "ReleasePolicy": {
        "type": "object",
        "required": ["require_approval", "approval_ttl_seconds", "refuse_superseded_inline", "require_dry_run",
                     "dry_run_canary_percent", "dry_run_max_age_seconds"],
        "properties": _RELEASE_POLICY_MEMBERS,
        "additionalProperties": False,
    },
    "ReleasePolicyPatch": {
        "type": "object",
        "minProperties": 1,
        "properties": _RELEASE_POLICY_MEMBERS,
        "additionalProperties": False,
    },
    "HoldPolicy": {
        "type": "object",
        "required": ["default_queue", "four_eyes", "queues", "routes"],
        "properties": {"default_queue": {"type": "string"}, "four_eyes": {"type": "boolean"},
                       "queues": {"type": "object", "additionalProperties": {"type": "object"}},
                       "routes": {"type": "array", "items": {"type": "object"}}},
        "additionalProperties": False,
    },
    "HoldReassign": {
        "type": "object",
        "required": ["queue"],
        "properties": {"queue": {"type": "string", "pattern": "^[a-z][a-z0-9_-]{0,63}$"},
                       "note": {"type": "string", "maxLength": 2000}},
        "additionalProperties": False,
    },
    "HoldResolution": {
        "type": "object",
        "required": ["decision", "reason_code"],
        "properties": {"decision": {"type": "string", "enum": ["approve", "deny"]},
                       "reason_code": {"type": "string", "pattern": "^[A-Z][A-Z0-9_]{1,63}$"},
                       "note": {"type": "string", "maxLength": 2000}},
        "additionalProperties": False,
    },
    "ReleasePolicyApproval": {
        "type": "object",
        "required": ["request_seq"],
        "properties": {"request_seq": {"type": "integer", "minimum": 1},
                       "reason": {"type": "string", "minLength": 1, "maxLength": 500}},
        "additionalProperties": False,
    },
    "ExportedRecordVerificationRequest": {
        "type": "object",
        "required": ["record"],
        "properties": {
            "record": {"type": "object", "description": "The exported Decision Record (DecisionRecord)."},
            "input": {"type": "object", "description": "The original request, checked against input_hash."},
            "public_key": {"type": "string", "description": "PEM; diagnostics only, never a trust anchor."},
        },
        "additionalProperties": False,
    },
}


def _query_parameter(name: str, kind: str, text: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """One query parameter; `schema` states the route's own check (api.openapi_params), else
    the type, and for text the control characters every route refuses."""
    schema = dict(schema) if schema else (P.text() if kind == "string" else {"type": kind})
    required = bool(schema.pop("x-required", False))
    return {"name": name, "in": "query", "required": required, "schema": schema, "description": text}


def _operation(endpoint: Endpoint) -> dict[str, Any]:
    """One route's OpenAPI operation: its parameters, body, responses and the error codes of each."""
    operation: dict[str, Any] = {
        "summary": endpoint.summary,
        "tags": list(endpoint.tags),
        "operationId": endpoint.method + endpoint.path.replace("/", "_").replace("{", "").replace("}", ""),
        "responses": {},
    }
    operation["security"] = [{"ApiKey": []}, {"Bearer": []}] if endpoint.auth else []
    parameters = _parameters(endpoint)
    if parameters:
        operation["parameters"] = parameters
    responses, errors, budget = _responses_and_errors(endpoint, parameters)
    if endpoint.request_body:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{endpoint.request_body}"}}},
        }
    for status, description in sorted(responses.items()):
        operation["responses"][str(status)] = _response(endpoint, status, description, errors, budget)
    undocumented = [code for code in errors if str(ERROR_TABLE[code][0]) not in operation["responses"]]
    if undocumented:
        operation["x-other-error-codes"] = undocumented
    return operation


def _parameters(endpoint: Endpoint) -> list[dict[str, Any]]:
    """The route's path parameters, then its query parameters, then its request headers."""
    parameters = [
        {"name": name, "in": "path", "required": True, "schema": P.path_param(name)}
        for name in ("decision_id", "chain_id", "policy_id", "rulebook_id", "name", "ticketing_system", "workflow",
                     "subscription_id")
        if "{" + name + "}" in endpoint.path
    ]
    parameters += [_query_parameter(*entry) for entry in endpoint.query]
    parameters += [
        {"name": name, "in": "header", "required": False, "schema": P.header_param(name),
         "description": {**WORKFLOW_REQUEST_HEADERS, **OPERATIONS_REQUEST_HEADERS, **REQUEST_HEADERS}[name]}
        for name in endpoint.request_headers
    ]
    return parameters


def _responses_and_errors(endpoint: Endpoint, parameters: list[dict[str, Any]]
                          ) -> tuple[dict[int, str], tuple[str, ...], str | None]:
    """Every status the route answers and every error code it can give, with the server's own and
    a public route's budget (its kind, or None)."""
    responses = {**SERVER_RESPONSES, **endpoint.responses}
    errors = endpoint.errors + SERVER_ERRORS
    budget = PUBLIC_PATHS.get((endpoint.method, endpoint.path))  # issue 18: public route budgets
    if budget:
        responses, errors = _with_public_budget(budget, responses, errors)
    if any(p["in"] in ("path", "query") for p in parameters) and 400 not in responses:
        # Every route refuses control characters in path and query values (api.app).
        responses[400] = "control characters in a path or query value"
        errors = errors + ("REQUEST_INVALID",)
    return responses, errors, budget


def _response(endpoint: Endpoint, status: int, description: str, errors: tuple[str, ...],
              budget: str | None) -> dict[str, Any]:
    """One status of the operation: its error codes and body schema, or its headers."""
    response: dict[str, Any] = {"description": description}
    if status >= 400:
        codes = [code for code in errors if ERROR_TABLE[code][0] == status
                 or (status == 403 and code.endswith("_UNAUTHORIZED"))]
        response["content"] = {"application/json": {"schema": {"$ref": f"#/components/schemas/{endpoint.error_schema}"}}}
        if codes:
            response["x-error-codes"] = codes
    if status in (200, 201) and endpoint.response_headers:
        response["headers"] = {name: {"schema": {"type": "string"}} for name in endpoint.response_headers}
    if budget and (status < 300 or status == 429):
        rate_headers = RATE_HEADERS + (("Retry-After",) if status == 429 else ())
        response["headers"] = {**response.get("headers", {}),
                               **{name: {"schema": {"type": "string"}} for name in rate_headers}}
    return response


def _with_public_budget(kind: str, responses: dict[int, str],
                        errors: tuple[str, ...]) -> tuple[dict[int, str], tuple[str, ...]]:
    """A public route's 429 (per-client budget) and 503 (limiter down; verification slots busy)."""
    setting = "GATE_PUBLIC_VERIFY_RATE_LIMIT" if kind == "verify" else "GATE_PUBLIC_RATE_LIMIT"
    unavailable = "rate limiter unavailable" + (
        ", or every public verification slot of the process busy (Retry-After: 1)" if kind in HEAVY_KINDS else "")
    responses = {**responses, 429: f"rate limited per client address ({setting} per minute)",
                 503: responses.get(503, unavailable) if 503 in responses else unavailable}
    extra = ("SVC_API_RATE_LIMITED", "RATE_LIMITER_UNAVAILABLE") + (("PUBLIC_VERIFY_BUSY",) if kind in HEAVY_KINDS else ())
    return responses, errors + tuple(code for code in extra if code not in errors)


@lru_cache(maxsize=1)
def openapi_document() -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for endpoint in ENDPOINTS:
        paths.setdefault(endpoint.path, {})[endpoint.method] = _operation(endpoint)
    return P.resolve_printable({
        "openapi": "3.1.0",
        "info": {
            "title": "Decision Gate",
            "version": C.INTERFACE_VERSION,
            "description": "Binding decisions from declarative Rulebook v1, as signed, hashed Decision Records. "
                           "Only `yes` lets an action proceed; every error body has `c: unclear`.",
        },
        "paths": paths,
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {
                "ApiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"},
                "Bearer": {"type": "http", "scheme": "bearer"},
            },
        },
        "x-error-codes": {code: {"status": status, "v": word} for code, (status, word) in sorted(ERROR_TABLE.items())},
    })


# Issue 18 item 8: how request text is read, whatever the route.
INPUT_NORMALISATION = {
    "url_encoding": "a path or query whose percent-encoded bytes are not UTF-8 is refused (400 REQUEST_INVALID, "
                    "errors[].code invalid_encoding)",
    "query_numbers": "ASCII digits only (Unicode digits, spaces and underscores are refused with 400)",
    "null_members": "a member sent as null is refused unless its schema says it is nullable",
}


def _cost_limits() -> dict[str, Any]:
    """The cost window of the costly keyed routes (api/costs.py), for /docs.json."""
    return {
        "window": "fixed one-minute window per API key, separate from the decide window; X-RateLimit-* on "
                  "these routes describe it, X-RateLimit-Cost the request's units; 429 SVC_API_RATE_LIMITED "
                  "with Retry-After when a request's units do not fit (nothing is charged or computed)",
        "units_per_minute": {name: plan["cost_limit"] for name, plan in DEFAULT_PLANS.items()},
        "per_key": "scaled by the key's own rate_limit against its plan's; GATE_PLANS cost_limit "
                   f"(default {COST_UNITS_PER_DECIDE} units per decide of rate_limit)",
        "weights": {
            "replay, diff, counterfactuals": f"1 + 1 per started {K.BODY_BYTES_PER_UNIT // 1024} KiB of body + 1 per "
                                             f"full {K.STORED_BYTES_PER_UNIT // 1024} KiB of the stored request",
            "stored-record verify": f"1 + 1 per started {K.BODY_BYTES_PER_UNIT // 1024} KiB of body + 4 per full "
                                    f"{K.STORED_BYTES_PER_UNIT // 1024} KiB of the stored request",
            "policy reports": f"1 + 1 per started {K.REPORT_ROWS_PER_UNIT} of limit (default 1,000: 21)",
            "policy alerts": "1 + 20 per policy read: 21 with policy_id, else 201",
            "packet export": f"1 + 4 per full {K.STORED_BYTES_PER_UNIT // 1024} KiB of the stored request + 1 per "
                             f"started {K.LINKS_PER_UNIT} of execution_limit + outcome_limit + chain_limit + "
                             f"{K.PACKET_INTELLIGENCE_UNITS} unless include_intelligence=false (default 27)",
            "chain view": f"1 + 1 per started {K.LINKS_PER_UNIT} of limit (default 3)",
            "cap": "a request never costs more than the whole window",
        },
        "monthly_cap": "counts decides only",
    }


# /docs.json: the versions the gate speaks and where its public schemas are served.
VERSIONS = {
    "protocol": C.DECISION_PROTOCOL_VERSION,
    "record": C.DECISION_RECORD_VERSION,
    "rulebook_schema": C.RULEBOOK_SCHEMA_VERSION,
    "evaluator": C.EVALUATOR_VERSION,
    "rulebook_registry": C.RULEBOOK_REGISTRY_VERSION,
    "registry_attestation": C.REGISTRY_ATTESTATION_VERSION,
    "canonicalization": C.CANONICALIZATION,
}
SCHEMA_PATHS = {"rulebook_v1": C.RULEBOOK_SCHEMA_PATH,
                "rulebook_migration_v1": "/schemas/rulebook-migration-v1.schema.json", "openapi": "/openapi.json",
                "vendor_policy_table_v1": "/schemas/vendor-policy-table-v1.schema.json",
                "conformance_index": "/schemas/conformance/index.json",
                "golden_replay_corpus": "/schemas/golden-replay/index.json"}


def _limits() -> dict[str, Any]:
    """Every limit a client can meet, for /docs.json (the numbers are the configured defaults)."""
    return {
        "rate_limit": "fixed one-minute window per API key; starter plan 20 decides per minute",
        "cost_limit": _cost_limits(),
        "monthly_cap": "records per key per calendar month (UTC); per plan, overridable per key",
        "max_body_bytes": "1 MiB by default (GATE_MAX_BODY_BYTES), enforced while the body streams in",
        "request_read_timeout": "10 s by default (GATE_REQUEST_READ_TIMEOUT) to send a request's head and body",
        "rulebook": {"rules": "1-100", "condition_nodes": 256, "depth": 8, "children_per_combinator": 32},
        "evaluation": {
            "input_values": F.MAX_FACT_VALUES, "input_array_length": F.MAX_FACT_ARRAY_LENGTH,
            "input_string_length": F.MAX_FACT_STRING_LENGTH, "work_units": B.MAX_EVALUATION_WORK,
            "work_model": "per leaf: path parts; contains/not_contains over an array: length × needle "
                          "size; in/not_in/eq/neq: size of the rulebook value (422 beyond)",
        },
        "json": "NaN, ±Infinity, numbers that overflow or underflow a double (1e400, 1e-400), duplicate "
                "keys, integers beyond ±(2^53−1) and lone surrogates are refused with 400",
        "json_depth": {"request_bodies": MAX_JSON_DEPTH, "verified_records_and_packets": MAX_DOCUMENT_DEPTH,
                       "error": "JSON_TOO_DEEP"},
        "max_packet_bytes": "16 MiB by default (GATE_MAX_PACKET_BYTES), POST /api/decision/packet/verify",
        "media_type": "JSON bodies are application/json or application/*+json in UTF-8 (absent Content-Type "
                      "is read as JSON); anything else is 415",
        "public_routes": "verification, registries, schemas, docs, readiness and metrics: fixed one-minute "
                         "window per client address, GATE_PUBLIC_VERIFY_RATE_LIMIT (60) verifications and "
                         "GATE_PUBLIC_RATE_LIMIT (600) other requests (429 SVC_API_RATE_LIMITED); at most "
                         "GATE_PUBLIC_VERIFY_CONCURRENCY (1) verifications at once per server process (503 "
                         "PUBLIC_VERIFY_BUSY, Retry-After: 1). Behind a proxy: GATE_CLIENT_ADDRESS_HEADER from "
                         "GATE_TRUSTED_PROXIES only",
        "policy_checks": "MCP endpoints, REST twins and workflow routes: fixed one-minute window per client "
                         "address, GATE_POLICYCHECK_RATE_LIMIT (600) requests; bodies ≤ 64 KiB, JSON depth ≤ 32 "
                         "(docs/policy-checks.md)",
        "trusted_adapters": {
            "execution": f"one-shot isolated worker process per run, {C.ADAPTER_EXECUTION_TIMEOUT_MS} ms budget "
                         "(504 beyond), empty environment, memory bound GATE_ADAPTER_MEMORY_MB (256 MiB), "
                         "network, file writes and subprocesses denied (500 TRUSTED_ADAPTER_CAPABILITY_DENIED)",
            "pool": "GATE_ADAPTER_POOL_SIZE (2) warm, never-reused workers per server process",
            "plugins": f"entry-point group {C.ADAPTER_ENTRY_POINT_GROUP} (GATE_ADAPTER_PLUGINS)",
            "registry": "/api/decision/adapters",
            "docs": "docs/adapters.md",
        },
        "identifiers": "control characters (U+0000-U+001F, U+007F-U+009F) are refused in path and query "
                       "values (400) and in rulebook version and action (422)",
        **INPUT_NORMALISATION,
    }


@lru_cache(maxsize=1)
def docs_document() -> dict[str, Any]:
    return {
        "service": "decision-gate",
        "interface_version": C.INTERFACE_VERSION,
        "versions": VERSIONS,
        "endpoints": [
            {"method": e.method.upper(), "path": e.path, "auth": "api_key" if e.auth else "public",
             "summary": e.summary, "error_codes": list(e.errors)}
            for e in ENDPOINTS
        ],
        "schemas": SCHEMA_PATHS,
        "request_headers": REQUEST_HEADERS,
        "response_headers": list(DECIDE_HEADERS) + ["Retry-After", "WWW-Authenticate"],
        "limits": _limits(),
        "error_codes": {code: {"status": status, "v": word} for code, (status, word) in sorted(ERROR_TABLE.items())},
    }
