"""`/openapi.json` (OpenAPI 3.1) and `/docs.json`, generated from the routes' declarations.

Each route declares itself once, on its handler in `api/routes/` (`api.routing.Endpoint`); this
module turns those declarations into the document and holds the shared component schemas.
`tests/test_openapi.py` fails when a registered route, an error code of `api.errors.ERROR_TABLE`
or a spec header is missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache
from typing import NotRequired, TypedDict

from api import costs as K
from api import openapi_params as P
from api.errors import ERROR_TABLE
from api.public_limits import HEAVY_KINDS
from api.routing import (
    DECIDE_HEADERS,
    OPERATIONS_REQUEST_HEADERS,
    RATE_HEADERS,
    REQUEST_HEADERS,
    WORKFLOW_REQUEST_HEADERS,
    Endpoint,
    path_parameters,
)
from gate import bodies
from gate import vocabulary as C
from gate.protocol import fact_limits as F
from gate.protocol.canonical import MAX_DOCUMENT_DEPTH, MAX_JSON_DEPTH
from gate.rulebook import budget as B
from gate.services.policychecks import CHECKS as POLICY_CHECKS
from gate.settings import COST_UNITS_PER_DECIDE, DEFAULT_PLANS
from gate.strict_json import JsonValue

# Refused by the HTTP server itself (api.serving) on any route, in the same JSON error shape.
SERVER_RESPONSES = {408: "request (head or body) not received within GATE_REQUEST_READ_TIMEOUT",
                    414: "request line too long", 431: "request headers too large or too many"}
SERVER_ERRORS = ("REQUEST_TIMEOUT", "REQUEST_URI_TOO_LONG", "REQUEST_HEADERS_TOO_LARGE",
                 "EXPECTATION_FAILED", "TRANSFER_CODING_UNSUPPORTED")

# A media type's schema by reference: {"application/json": {"schema": {"$ref": "#/components/schemas/…"}}}.
Content = dict[str, dict[str, dict[str, str]]]
# A path, query or header parameter; a path parameter has no description.
Parameter = TypedDict("Parameter", {"name": str, "in": str, "required": bool, "schema": P.ParameterSchema,
                                    "description": NotRequired[str]})
# One status of an operation: an error status has its body schema and error codes, a success its headers.
Response = TypedDict("Response", {"description": str, "content": NotRequired[Content],
                                  "x-error-codes": NotRequired[list[str]],
                                  "headers": NotRequired[dict[str, dict[str, dict[str, str]]]]})


class RequestBody(TypedDict):
    required: bool
    content: Content


# One route and method: the members in the order the document states them.
Operation = TypedDict("Operation", {"summary": str, "tags": list[str], "operationId": str,
                                    "responses": dict[str, Response], "security": list[dict[str, list[str]]],
                                    "parameters": NotRequired[list[Parameter]],
                                    "requestBody": NotRequired[RequestBody],
                                    "x-other-error-codes": NotRequired[list[str]]})

class ErrorCodeEntry(TypedDict):
    """An error code's status and verdict word, as both documents list them."""

    status: int
    v: str


class Info(TypedDict):
    title: str
    version: str
    description: str


class Components(TypedDict):
    schemas: dict[str, Mapping[str, JsonValue]]
    securitySchemes: dict[str, dict[str, str]]


# The OpenAPI document: the members in the order it states them.
OpenApiDocument = TypedDict("OpenApiDocument", {"openapi": str, "info": Info, "paths": dict[str, dict[str, Operation]],
                                                "components": Components,
                                                "x-error-codes": dict[str, ErrorCodeEntry]})


class EndpointDoc(TypedDict):
    method: str
    path: str
    auth: str
    summary: str
    error_codes: list[str]


class DocsDocument(TypedDict):
    """/docs.json: the versions, every endpoint, the schemas' paths, the headers, the limits and the error codes."""

    service: str
    interface_version: str
    versions: dict[str, str]
    endpoints: list[EndpointDoc]
    schemas: dict[str, str]
    request_headers: dict[str, str]
    response_headers: list[str]
    limits: dict[str, JsonValue]
    error_codes: dict[str, ErrorCodeEntry]


# Issue 18 item 7: the costly keyed routes (declared `charged`) are charged to the key's cost window (api/costs.py).
COST_HEADERS = (*RATE_HEADERS, "X-RateLimit-Cost", "Retry-After")


def _charged(endpoint: Endpoint) -> Endpoint:
    """A charged route's 429 and limiter 503, and its cost-window headers
    (docs/operating.md "Rate limits and cost units")."""
    if not endpoint.charged:
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


@lru_cache(maxsize=1)
def endpoints() -> tuple[Endpoint, ...]:
    """Every route's declaration, as documented, by path (a path's methods in declaration order):
    the document does not change when a route moves between modules."""
    from api.routes import route_tables  # the route modules import this one (api.routes.meta)

    declared = [_charged(endpoint) for routes in route_tables() for endpoint in routes.endpoints]
    return tuple(sorted(declared, key=lambda endpoint: endpoint.path))


# A release policy (gate/bodies/release-policy.schema.json): whole for PUT, any members for PATCH.
_RELEASE_POLICY = bodies.openapi_schema("release-policy")
_RELEASE_POLICY_PATCH: dict[str, JsonValue] = {**{k: v for k, v in _RELEASE_POLICY.items() if k not in ("required", "title")},
                         "description": "Any members of a release policy (at least one); the others are kept.",
                         "minProperties": 1}

SCHEMAS: dict[str, Mapping[str, JsonValue]] = {
    # The receipts' bodies; their hand checks (gate.receipts.validation) are held to them
    # (tests/core/test_receipt_body_schemas.py).
    "ExecutionRequest": bodies.openapi_schema("execution"),
    "OutcomeRequest": bodies.openapi_schema("outcome"),
    "CrmSyncRequest": bodies.openapi_schema("crm-sync"),
    "ErrorBody": {
        "type": "object",
        "required": ["c", "v", "error", "message"],
        "properties": {
            "c": {"const": C.COMPACT_UNCLEAR, "description": "Always unclear: an error is never an approval."},
            "v": {"type": "string"},
            "error": {"type": "string", "enum": list[JsonValue](sorted(ERROR_TABLE))},
            "message": {"type": "string"},
            "errors": {"type": "array", "items": {"type": "object", "properties": {
                "field": {"type": "string"}, "code": {"type": "string"}, "message": {"type": "string"}}}},
            "retry_after": {"type": "integer"},
        },
        "additionalProperties": True,
    },
    # gate/bodies/decide.schema.json; the decide path's own checks are held to it (tests/core/test_decide_schema.py).
    "DecisionRequest": bodies.openapi_schema("decide"),
    "PilotRequest": bodies.openapi_schema("pilot"),  # its printable runs resolved when served
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
    "PacketVerificationRequest": bodies.openapi_schema("packet-verification"),
    "JsonRpcMessage": bodies.openapi_schema("jsonrpc-message"),
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
    # Each REST twin's body is its MCP tool's inputSchema, one file (api.mcp.input_schema reads it).
    **{f"PolicyCheckArguments_{spec.tool}": bodies.openapi_schema(f"policy-check-{spec.service}")
       for spec in POLICY_CHECKS},
    "WorkflowRequest": bodies.openapi_schema("workflow"),
    "ReplayRequest": bodies.openapi_schema("replay"),
    "DiffRequest": bodies.openapi_schema("diff"),
    "CounterfactualsRequest": bodies.openapi_schema("counterfactuals"),
    "RecordVerificationRequest": bodies.openapi_schema("record-verification"),
    "RulebookPublishRequest": bodies.openapi_schema("rulebook-publish"),
    "ReleaseActionRequest": bodies.openapi_schema("release-action"),
    "ReleasePolicy": _RELEASE_POLICY,
    "ReleasePolicyPatch": _RELEASE_POLICY_PATCH,
    "EventSettings": bodies.openapi_schema("event-settings"),  # gate/bodies/event-settings.schema.json
    "PrivacySettings": bodies.openapi_schema("privacy"),  # gate/bodies/privacy.schema.json (issue 67)
    "SubjectExport": bodies.openapi_schema("subject-export"),  # gate/bodies/subject-export.schema.json
    "SubjectErasure": bodies.openapi_schema("subject-erasure"),  # gate/bodies/subject-erasure.schema.json
    "EventSubscription": bodies.openapi_schema("event-subscription"),  # gate/bodies/event-subscription.schema.json
    "EventSubscriptionStatus": bodies.openapi_schema("event-subscription-status"),
    "EventSecretRotation": bodies.openapi_schema("event-rotation"),
    "HoldPolicy": bodies.openapi_schema("hold-policy"),  # gate/bodies/hold-policy.schema.json
    "HoldReassign": bodies.openapi_schema("hold-reassign"),  # gate/bodies/hold-reassign.schema.json
    "HoldResolution": bodies.openapi_schema("hold-resolution"),  # gate/bodies/hold-resolution.schema.json
    # One approval body for every safeguard setting (gate/bodies/setting-approval.schema.json).
    "SettingApproval": bodies.openapi_schema("setting-approval"),
    "ReleasePolicyApproval": {**bodies.openapi_schema("setting-approval"), "title": "ReleasePolicyApproval"},
    "ExportedRecordVerificationRequest": bodies.openapi_schema("exported-record-verification"),
}


def _query_parameter(name: str, kind: str, text: str, schema: P.ParameterSchema | None = None) -> Parameter:
    """One query parameter; `schema` states the route's own check (api.openapi_params), else
    the type, and for text the control characters every route refuses."""
    schema = {**schema} if schema else (P.text() if kind == "string" else {"type": kind})
    required = schema.pop("x-required", False)
    return {"name": name, "in": "query", "required": required, "schema": schema, "description": text}


def _operation(endpoint: Endpoint) -> Operation:
    """One route's OpenAPI operation: its parameters, body, responses and the error codes of each."""
    operation: Operation = {
        "summary": endpoint.summary,
        "tags": list(endpoint.tags),
        "operationId": endpoint.method + endpoint.path.replace("/", "_").replace("{", "").replace("}", ""),
        "responses": {},
        "security": [{"ApiKey": []}, {"Bearer": []}] if endpoint.auth else [],
    }
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


def _parameters(endpoint: Endpoint) -> list[Parameter]:
    """The route's path parameters, then its query parameters, then its request headers."""
    parameters: list[Parameter] = [
        {"name": name, "in": "path", "required": True, "schema": P.path_param(name)}
        for name in path_parameters(endpoint.path)
    ]
    parameters += [_query_parameter(*entry) for entry in endpoint.query]
    parameters += [
        {"name": name, "in": "header", "required": False, "schema": P.header_param(name),
         "description": {**WORKFLOW_REQUEST_HEADERS, **OPERATIONS_REQUEST_HEADERS, **REQUEST_HEADERS}[name]}
        for name in endpoint.request_headers
    ]
    return parameters


def _responses_and_errors(endpoint: Endpoint, parameters: list[Parameter]
                          ) -> tuple[dict[int, str], tuple[str, ...], str | None]:
    """Every status the route answers and every error code it can give, with the server's own and
    a public route's budget (its kind, or None)."""
    responses = {**SERVER_RESPONSES, **endpoint.responses}
    errors = endpoint.errors + SERVER_ERRORS
    budget = endpoint.budget  # issue 18: public route budgets
    if budget:
        responses, errors = _with_public_budget(budget, responses, errors)
    if any(p["in"] in ("path", "query") for p in parameters) and 400 not in responses:
        # Every route refuses control characters in path and query values (api.app).
        responses[400] = "control characters in a path or query value"
        errors = errors + ("REQUEST_INVALID",)
    return responses, errors, budget


def _response(endpoint: Endpoint, status: int, description: str, errors: tuple[str, ...],
              budget: str | None) -> Response:
    """One status of the operation: its error codes and body schema, or its headers."""
    response: Response = {"description": description}
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
def openapi_document() -> OpenApiDocument:
    paths: dict[str, dict[str, Operation]] = {}
    for endpoint in endpoints():
        paths.setdefault(endpoint.path, {})[endpoint.method] = _operation(endpoint)
    document: OpenApiDocument = {
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
                "Bearer": {"type": "http", "scheme": "bearer",
                           "description": "An API key; or, on publishing and the release routes of a gate "
                                          "with a CI issuer, a CI workload-identity token acting as "
                                          "ci:<repository>@<ref>, in the scope the x-gate-scope header names "
                                          "(docs/ci-principal.md)."},
            },
        },
        "x-error-codes": {code: {"status": status, "v": word} for code, (status, word) in sorted(ERROR_TABLE.items())},
    }
    return bodies.resolved(document)  # the patterns' placeholders, as this interpreter reads text


# Issue 18 item 8: how request text is read, whatever the route.
INPUT_NORMALISATION = {
    "url_encoding": "a path or query whose percent-encoded bytes are not UTF-8 is refused (400 REQUEST_INVALID, "
                    "errors[].code invalid_encoding)",
    "query_numbers": "ASCII digits only (Unicode digits, spaces and underscores are refused with 400)",
    "null_members": "a member sent as null is refused unless its schema says it is nullable",
}


def _cost_limits() -> dict[str, JsonValue]:
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


def _limits() -> dict[str, JsonValue]:
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
def docs_document() -> DocsDocument:
    return {
        "service": "decision-gate",
        "interface_version": C.INTERFACE_VERSION,
        "versions": VERSIONS,
        "endpoints": [
            {"method": e.method.upper(), "path": e.path, "auth": "api_key" if e.auth else "public",
             "summary": e.summary, "error_codes": list(e.errors)}
            for e in endpoints()
        ],
        "schemas": SCHEMA_PATHS,
        "request_headers": REQUEST_HEADERS,
        "response_headers": list(DECIDE_HEADERS) + ["Retry-After", "WWW-Authenticate"],
        "limits": _limits(),
        "error_codes": {code: {"status": status, "v": word} for code, (status, word) in sorted(ERROR_TABLE.items())},
    }
