"""Every policy-check and workflow route, error code and setting is documented ("documented or the test fails")."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROUTES = [("POST", p) for p in ("/api/mcp", "/refund/api/mcp", "/cancel/api/mcp", "/return/api/mcp", "/trial/api/mcp",
                                "/api/v1/refund/eligibility", "/api/v1/cancel/penalty", "/api/v1/return/eligibility",
                                "/api/v1/trial/terms", "/api/v1/workflows/{ticketing_system}/{workflow}")]
ROUTES += [("GET", "/rules/policy-sources.json"), ("GET", "/api/mcp")]
CODES = ("POLICY_CHECK_UNDECIDED", "WORKFLOW_UNSUPPORTED", "WORKFLOW_UNAUTHORIZED", "WORKFLOW_IDEMPOTENCY_CONFLICT")


@pytest.mark.parametrize("method, path", ROUTES)
def test_route_is_in_openapi_and_docs_json(client, method, path):
    assert method.lower() in client.get("/openapi.json").json["paths"][path]
    assert (method, path) in {(e["method"], e["path"]) for e in client.get("/docs.json").json["endpoints"]}


def test_docs_json_names_the_table_schema_and_the_limit(client):
    docs = client.get("/docs.json").json
    assert docs["schemas"]["vendor_policy_table_v1"] == "/schemas/vendor-policy-table-v1.schema.json"
    assert "GATE_POLICYCHECK_RATE_LIMIT" in docs["limits"]["policy_checks"]


def test_docs_page_names_every_code_setting_and_jsonrpc_error():
    text = (ROOT / "docs" / "policy-checks.md").read_text()
    for needle in (*CODES, "GATE_POLICYCHECK_RATE_LIMIT", "GATE_WORKFLOW_TOKEN", "−32700", "−32600", "−32601",
                   "−32602", "−32603", "−32000", "2025-11-25", "2024-11-05", "illustrative"):
        assert needle in text, needle
