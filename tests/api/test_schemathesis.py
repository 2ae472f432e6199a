"""Schemathesis over the whole `/openapi.json` with every check (issue 6 "The standing harness";
issue 18 item 8: the document states what the server enforces, in both directions).

Every operation of the document is called with generated inputs, valid and invalid, with a
fixed seed and a bounded example budget, through the Flask app on a fresh SQLite ledger, and
every response goes through every check schemathesis has (`load_all_checks`): no server
error, documented status, content type, headers and body; a schema-violating request is
refused; undeclared methods answer 405 with `Allow`; auth is not ignored; and a schema-valid
request is accepted.

"Accepted" is the one check with a stated exception list, `DOCUMENTED_REFUSALS`: a request
the document calls valid may still be refused for a reason JSON Schema cannot state (the
stored state, a relation between two parameters, the rulebook's own semantics, the JSON
parser's limits inside free-form objects) — but only with an error code the operation
documents, and, for REQUEST_INVALID, only naming the fields listed. Any other refusal of a
schema-valid request means the document hides a constraint, and fails here.

Keyed operations get a valid key of one scope, and about half of the generated `decision_id`
and `chain_id` values are replaced by ids that exist in that scope, so the checks reach the
handlers' success paths and not only their 404s. Operations that only document their 405 (the
MCP paths' other methods) are held to that instead of to acceptance.

(Schemathesis' own pytest loader does not run under pytest 9, so the operations are listed from
the document at import and each runs as a Hypothesis test over `operation.as_strategy()`.)
"""

from __future__ import annotations

import os

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.strategies._internal import regex as hypothesis_regex
from hypothesis.strategies._internal.lazy import unwrap_strategies
from schemathesis import GenerationMode
from schemathesis.checks import CHECKS, load_all_checks, not_a_server_error
from schemathesis.generation.jsonschema import strategy as schemathesis_strategy
from schemathesis.specs.openapi.checks import positive_data_acceptance

from api.openapi import openapi_document
from api.openapi_params import PRINTABLE_FORMAT
from gate.bodies import HTTP_URL_FORMAT

EXAMPLES_PER_OPERATION = int(os.environ.get("GATE_SCHEMATHESIS_EXAMPLES", "12"))
SEED = int(os.environ.get("GATE_SCHEMATHESIS_SEED", "20261122"))  # other seeds: exploratory runs
SCHEMA = schemathesis.openapi.from_dict(openapi_document())
SCHEMA.config.update(base_url="http://localhost")
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]
# Generates what `printable` patterns admit (str.isprintable) without walking their long class.
schemathesis.openapi.format(PRINTABLE_FORMAT, st.text(
    st.characters(codec="utf-8", exclude_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs")) | st.just(" "),
    min_size=1, max_size=40))

# Generates what the receipts' URL format admits (gate.bodies: an absolute http(s) URL with a host).
schemathesis.openapi.format(HTTP_URL_FORMAT, st.builds(
    "{}://{}{}{}".format, st.sampled_from(["http", "https", "HTTPS"]),
    st.from_regex(r"\A[a-z][a-z0-9-]{0,20}(\.[a-z]{2,6}){0,2}\Z"),
    st.sampled_from(["", ":80", ":8443"]), st.from_regex(r"\A(/[A-Za-z0-9._~-]{0,12}){0,3}\Z")))

_JSON_LIMITS = "JSON parser limits inside free-form objects (docs.json limits.json, json_depth)"
_SEMANTICS = "the rulebook's semantics, the registry's content or the gate's configuration"
# error code → (the fields (REQUEST_INVALID) or problem codes it may name, None for any; operations, None for
# all; why JSON Schema cannot say it)
DOCUMENTED_REFUSALS: dict[str, tuple[frozenset[str] | None, tuple[str, ...] | None, str]] = {
    "JSON_UNSAFE_INTEGER": (None, None, _JSON_LIMITS),
    "JSON_TOO_DEEP": (None, None, _JSON_LIMITS),
    "RULEBOOK_INVALID": (None, None, _SEMANTICS),
    "RULEBOOK_BINDING_MODE_CONFLICT": (None, None, "binding_mode against the facts source the body implies"),
    "RULEBOOK_OUTPUT_MATERIAL_FORBIDDEN": (None, None, "response-only member names anywhere in the body"),
    "LEGACY_MODE_UNAVAILABLE": (None, None, _SEMANTICS),
    "ADVISOR_UNAVAILABLE": (None, None, _SEMANTICS),
    "TRUSTED_ADAPTER_NOT_REGISTERED": (None, None, _SEMANTICS),
    "TRUSTED_ADAPTER_MANIFEST_MISMATCH": (None, None, _SEMANTICS),
    "TRUSTED_ADAPTER_INPUT_INVALID": (None, None, "the adapter's own input schema (GET /api/decision/adapters)"),
    "EVALUATION_INPUT_TOO_LARGE": (None, None, "evaluation cost limits (docs.json limits.evaluation)"),
    "EVALUATION_TOO_COSTLY": (None, None, "evaluation cost limits (docs.json limits.evaluation)"),
    "REPLAY_INPUT_UNAVAILABLE": (None, None, "the stored decision's state"),
    "COUNTERFACTUAL_BASE_INPUT_UNAVAILABLE": (None, None, "the stored decision's state"),
    "SVC_CRM_SYNC_CREDENTIALS_FORBIDDEN": (None, None, "credential-looking names and values anywhere in the body"),
    "RULEBOOK_LOOKUP_INVALID": (None, ("GET /api/decision/rulebooks",), "exactly hash, or rulebook_id with version"),
    # An action's own members (approve needs request_seq, version and rulebook_hash; a canary its
    # percent; a percent two decimals): relations JSON Schema's one object cannot state per action.
    "RELEASE_ACTION_INVALID": (None, ("POST /api/decision/rulebooks/{rulebook_id}/release",),
                               "the members each action needs"),
    # A migration_manifest is an object to the schema; the gate checks it as `gate migration check`
    # does (signature, hashes, the version it tested, its age): issue 42, docs/releases.md.
    "RELEASE_DRY_RUN_REJECTED": (None, ("POST /api/decision/rulebooks/{rulebook_id}/release",),
                                 "the dry-run manifest's signature, hashes, version and age"),
    # Slack's interactions need the gate's Slack signing secret and grants file, which the
    # contract's app does not configure (their checks are tests/holds/test_channels.py's).
    "SLACK_NOT_CONFIGURED": (None, ("POST /api/integrations/slack/interactions",), _SEMANTICS),
    # JSON Schema's uniqueItems compares whole items; scenario ids are unique on their own.
    "COUNTERFACTUAL_SCENARIOS_INVALID": (frozenset({"duplicate_value"}), None, "scenario ids unique in the request"),
    "REQUEST_INVALID": (frozenset({
        "version",  # adapters: version needs adapter_id
        "first", "second", "tree_size",  # chains: sizes up to the chain's current size
        "consistency_from",  # packets: with include_chain, up to the chain's current size
        "cursor",  # receipt lists: a next_cursor the gate issued
        "days_since_purchase",  # workflows: required for the refund and return workflows (a path parameter)
        "Idempotency-Key",  # workflows: Idempotency-Key and x-idempotency-key, when both, agree
        "context.inputs",  # decide: runtime mode needs inputs
        "context.policy_pattern",  # decide: a pattern of the registry
    }), None, "a relation between parameters, or the stored state"),
}


def _documented_codes(case) -> set[str]:
    codes: set[str] = set(case.operation.definition.raw.get("x-other-error-codes", []))
    for response in case.operation.definition.raw.get("responses", {}).values():
        codes |= set(response.get("x-error-codes", []))
    return codes


def accepted_or_refused_for_a_documented_reason(ctx, response, case):
    """`positive_data_acceptance`, with the documented exceptions of `DOCUMENTED_REFUSALS`."""
    if case.meta is None or not case.meta.generation.mode.is_positive or response.status_code < 400:
        return None
    if response.status_code in (401, 403, 404, 409, 429):  # credentials, existence, conflicts, limits
        return None
    body = response.json() if "json" in response.headers.get("content-type", [""])[0] else {}
    code = body.get("error") if isinstance(body, dict) else None
    reason = f"{case.method} {case.formatted_path}: schema-valid request refused {response.status_code} {body}"
    if isinstance(code, dict):  # JSON-RPC: only the strict parser's limits (−32700, docs/policy-checks.md)
        assert code.get("code") == -32700 and any(
            limit in code.get("message", "") for limit in ("2^53", "deeper than")), reason
        return None
    allowed = DOCUMENTED_REFUSALS.get(code)
    assert allowed is not None and code in _documented_codes(case), reason
    fields, operations, _ = allowed
    assert operations is None or case.operation.label in operations, reason
    named = {problem.get("code" if code != "REQUEST_INVALID" else "field") for problem in body.get("errors", [])}
    if named == {"url"} and any("%" in str(value) for value in (case.path_parameters or {}).values()):
        # The generator sends a '%' inside a path value as it is (it takes it for an escape the
        # value already carries), so the server decodes another value than the one generated:
        # `\u%04x` arrives as `\u<U+0004>x`, refused for its control character, as documented.
        return None
    assert fields is None or (named and named <= fields), reason
    return None


def only_documented_refusals_of_undocumented_methods(ctx, response, case):
    """Operations documenting only a 405 (a method a path does not serve) answer it, with Allow."""
    assert response.status_code == 405 and response.headers.get("allow"), case.operation.label


def documented_5xx_only(ctx, response, case):
    """`not_a_server_error`, except a 503 the operation documents: a dependency the gate's
    configuration lacks (the `multi` advisory mode without a second advisor) fails closed."""
    if response.status_code >= 500:
        documented = case.operation.definition.raw.get("responses", {})
        assert response.status_code == 503 and "503" in documented, (
            f"{case.method} {case.formatted_path} answered {response.status_code}: {response.text[:300]}")


def _checks(operation) -> list:
    load_all_checks()
    serves = any(status.startswith("2") for status in operation.definition.raw.get("responses", {}))
    replaced = (positive_data_acceptance, not_a_server_error)
    checks = [check for check in CHECKS.get_all() if check not in replaced] + [documented_5xx_only]
    return checks + [accepted_or_refused_for_a_documented_reason if serves
                     else only_documented_refusals_of_undocumented_methods]


def test_every_operation_of_the_document_is_exercised(client):
    served = client.get("/openapi.json").json
    listed = {(method.upper(), path) for path, item in served["paths"].items() for method in item}
    assert {(op.method.upper(), op.path) for op in OPERATIONS} == listed


@pytest.fixture(scope="module")
def regex_strategies_built_once():
    """Each pattern's Hypothesis strategy built once per alphabet, then reused.

    Hypothesis builds a character class one code point at a time, and builds a pattern's strategy
    anew for every lazy copy schemathesis makes of it (each `.filter`, each negative case's mutated
    schema). The printable class (`api.openapi_params.printable`), which `POST /api/pilot` holds
    beside its contact_email pattern, took 3 to 12 s a build and was built 8 times for that
    operation's 12 examples: most of its 49 s on CI. A strategy is a description, reusable across
    draws, so the seed draws the very same cases (12 of 12 identical bodies, headers and modes
    when this was measured), in 16 s instead of 89 s on a busy host. Where Hypothesis's internals
    change, the wrapper still passes every call through: slower, never different."""
    build = hypothesis_regex.regex_strategy
    built: dict[tuple, tuple] = {}

    def built_once(regex, *args, alphabet=None, **kwargs):
        plain = unwrap_strategies(alphabet) if alphabet is not None else None
        key = (regex, args, tuple(sorted(kwargs.items())), id(plain))
        if key not in built:  # the alphabet is kept beside it, so its id stays its own
            built[key] = (build(regex, *args, alphabet=alphabet, **kwargs), plain)
        return built[key][0]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hypothesis_regex, "regex_strategy", built_once)
        # A negative case past an array's maxItems: schemathesis (4.29 on) fills an array longer
        # than it draws by copying one element up to the floor. The facts' schema nests arrays of
        # 10,000 items in arrays, so one copied element was itself 10,001 copies, and so on: a
        # single `POST /api/decide` case grew past 23 GB and the process was killed (seen run alone,
        # which schemathesis's constants pool makes draw otherwise than in the suite). Drawn
        # element by element instead, such an array outgrows Hypothesis's buffer and the case is
        # dropped; the 10,000-item bound has its own tests (tests/api/test_evaluation_limits.py).
        patch.setattr(schemathesis_strategy, "MAX_DRAWN_ARRAY_ITEMS", 10**9)
        yield


@pytest.fixture
def contract_app(make_app):
    # Metrics reads configured (else they are a documented 503), client budgets out of the way.
    return make_app({"GATE_METRICS_TOKEN": "metrics-token-for-the-contract-run",
                     "GATE_POLICYCHECK_RATE_LIMIT": "1000000"})


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda op: op.label)
def test_every_operation_keeps_its_documented_contract(operation, contract_app, api_key, sample_request,
                                                       regex_strategies_built_once):
    app = contract_app
    SCHEMA.app = app  # checks that send follow-up requests (ignored_auth, use_after_free) reach this app
    client = app.test_client()
    record = client.post("/api/decide", json=sample_request, headers={"x-api-key": api_key}).json
    known = {"decision_id": record["decision_id"], "chain_id": record["audit_chain"]["chain_id"]}
    keyed = bool(operation.definition.raw.get("security"))
    strategy = st.one_of(operation.as_strategy(GenerationMode.POSITIVE),
                         operation.as_strategy(GenerationMode.NEGATIVE))
    checks = _checks(operation)

    @seed(SEED)
    @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=strategy, use_known=st.booleans())
    def run(case, use_known):
        for name, value in known.items():  # a negative case keeps its invalid ids: they are what it tests
            if use_known and case.meta.generation.mode.is_positive and case.path_parameters \
                    and name in case.path_parameters:
                case.path_parameters[name] = value
        case.call_and_validate(headers={"x-api-key": api_key} if keyed else {}, checks=checks, app=app)

    run()
