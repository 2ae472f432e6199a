"""`/openapi.json` and `/docs.json` document everything implemented ("documented or the test fails")."""

from __future__ import annotations

import re

from openapi_spec_validator import validate

from api.errors import ERROR_TABLE
from api.openapi import DECIDE_HEADERS


def test_openapi_is_a_valid_3_1_document(client):
    document = client.get("/openapi.json").json
    assert document["openapi"] == "3.1.0"
    validate(document)


def test_every_route_is_documented_and_every_documented_route_is_served(app, client):
    """The app's URL rules and the document's operations are the same set, each method and path
    served by one rule (both come from the routes' declarations, `api.routing`)."""
    paths = client.get("/openapi.json").json["paths"]
    served = [(method.lower(), re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule))
              for rule in app.url_map.iter_rules() if rule.endpoint != "static"
              for method in rule.methods - {"HEAD", "OPTIONS"}]
    documented = [(method, path) for path, operations in paths.items() for method in operations]
    assert len(served) == len(set(served)), "a method and path served by two rules"
    assert sorted(served) == sorted(documented)


def test_every_error_code_and_header_is_documented(client):
    document = client.get("/openapi.json").json
    docs = client.get("/docs.json").json
    assert set(document["x-error-codes"]) == set(ERROR_TABLE)
    assert set(docs["error_codes"]) == set(ERROR_TABLE)
    for code, (status, word) in ERROR_TABLE.items():
        assert docs["error_codes"][code] == {"status": status, "v": word}
    decide = document["paths"]["/api/decide"]["post"]
    documented_headers = set(decide["responses"]["200"]["headers"])
    spec_headers = {"x-decision-id", "x-decision-record-hash", "x-decision-receipt-hash",
                    "x-decision-confidence-score", "x-decision-confidence-level", "x-decision-confidence-hash",
                    "x-idempotency-status", "x-decision-verify-url", "x-decision-receipt-signature",
                    "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-Usage-Monthly-Remaining"}
    assert spec_headers <= documented_headers == set(DECIDE_HEADERS) | {"Retry-After"}
    request_headers = {p["name"] for p in decide["parameters"] if p["in"] == "header"}
    assert {"x-api-key", "x-idempotency-key", "x-request-id", "Prefer", "x-decision-response-view"} <= request_headers
    codes_on_decide = set(decide.get("x-other-error-codes", []))
    for response in decide["responses"].values():
        codes_on_decide |= set(response.get("x-error-codes", []))
    assert {"SVC_API_UNAUTHORIZED", "SVC_API_RATE_LIMITED", "SVC_API_MONTHLY_CAP_EXCEEDED",
            "SVC_API_IDEMPOTENCY_CONFLICT", "RULEBOOK_BINDING_MODE_UNSUPPORTED",
            "RULEBOOK_OUTPUT_MATERIAL_FORBIDDEN"} <= codes_on_decide


def test_docs_lists_endpoints_schemas_and_limits(client):
    docs = client.get("/docs.json").json
    listed = {(e["method"], e["path"]) for e in docs["endpoints"]}
    assert ("POST", "/api/decide") in listed and ("GET", "/api/decision/status") in listed
    assert docs["schemas"]["rulebook_v1"] == "/schemas/rulebook-v1.schema.json"
    assert "20 decides per minute" in docs["limits"]["rate_limit"]


def test_readme_documents_every_setting():
    from pathlib import Path

    from gate.settings import Settings

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    source = Path(Settings.__module__.replace(".", "/") + ".py").read_text()
    for variable in sorted(set(re.findall(r'"(GATE_[A-Z_]+)"', source))):
        assert f"`{variable}`" in readme, variable
