"""The four checks: rulebooks valid under the gate's validator, verdicts and codes over the tables."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from gate.clock import FixedClock
from gate.policychecks.tables import TABLES_DIR
from gate.protocol.canonical import sha256_hex
from gate.rulebook import get_evaluator, validate_rulebook
from gate.services.policychecks import (
    CHECKS,
    ArgumentsInvalid,
    CheckFailed,
    PolicyCheckService,
)
from tests.policychecks.support import undecided_service

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def service():
    return PolicyCheckService(clock=FixedClock(NOW))


@pytest.mark.parametrize("spec", CHECKS, ids=lambda s: s.service)
def test_each_check_is_a_valid_rulebook_v1(spec):
    rulebook = json.loads((TABLES_DIR / f"{spec.service}.rulebook.json").read_text())
    assert validate_rulebook(rulebook) == []
    assert rulebook["schema_version"] == "rulebook_v1"


@pytest.mark.parametrize("tool, arguments, verdict, code, decision", [
    ("refund_eligibility", {"vendor": "Adobe", "days_since_purchase": 14}, "ALLOWED", "WITHIN_WINDOW", "yes"),
    ("refund_eligibility", {"vendor": "Adobe", "days_since_purchase": 14.5}, "DENIED", "OUTSIDE_WINDOW", "no"),
    ("refund_eligibility", {"vendor": "microsoft 365", "plan": "Monthly", "days_since_purchase": 0}, "DENIED",
     "NO_REFUNDS", "no"),
    ("refund_eligibility", {"vendor": "acme-unknown", "days_since_purchase": 1}, "UNKNOWN", "UNSUPPORTED_VENDOR",
     "review"),
    ("refund_eligibility", {"vendor": "adobe", "region": "gb", "days_since_purchase": 1}, "UNKNOWN", "NON_US_REGION",
     "review"),
    ("refund_eligibility", {"vendor": "zoom", "plan": "enterprise", "days_since_purchase": 1}, "UNKNOWN",
     "PLAN_NOT_COVERED", "review"),
    ("cancellation_penalty", {"vendor": "spotify"}, "FREE_CANCEL", "NO_PENALTY", "yes"),
    ("cancellation_penalty", {"vendor": "adobe", "plan": "annual-monthly"}, "PENALTY", "EARLY_TERMINATION_FEE",
     "review"),
    ("cancellation_penalty", {"vendor": "google-workspace", "plan": "annual"}, "LOCKED", "COMMITMENT_LOCKED", "no"),
    ("cancellation_penalty", {"vendor": "walmart"}, "UNKNOWN", "UNSUPPORTED_VENDOR", "review"),
    ("return_eligibility", {"vendor": "walmart", "days_since_purchase": 90}, "RETURNABLE", "WITHIN_WINDOW", "yes"),
    ("return_eligibility", {"vendor": "walmart", "plan": "electronics", "days_since_purchase": 31}, "EXPIRED",
     "OUTSIDE_WINDOW", "no"),
    ("return_eligibility", {"vendor": "amazon", "plan": "digital", "days_since_purchase": 0}, "NON_RETURNABLE",
     "NO_RETURNS", "no"),
    ("trial_terms", {"vendor": "dropbox"}, "TRIAL_AVAILABLE", "TRIAL_OFFERED", "yes"),
    ("trial_terms", {"vendor": "zoom"}, "NO_TRIAL", "NO_TRIAL_OFFERED", "no"),
    ("trial_terms", {"vendor": "amazon"}, "UNKNOWN", "PLAN_NOT_COVERED", "review"),
])
def test_verdicts_and_codes(service, tool, arguments, verdict, code, decision):
    result = service.check(tool, arguments)
    assert (result["verdict"], result["code"], result["decision"]) == (verdict, code, decision)
    assert result["production_verdict"] is False and result["illustrative"] is True
    assert result["evaluated_at"] == "2026-11-22T12:00:00.000Z"
    assert result["rulebook_result"]["application_verdict"] == verdict
    assert result["rulebook_result"]["reason_code"] == code
    assert result["message"]


def test_result_carries_versions_sources_and_the_rulebook_trace(service):
    result = service.check("refund_eligibility", {"vendor": "Best Buy", "days_since_purchase": 3})
    rulebook, digest = service.rulebook("refund")
    assert result["rulebook_id"] == rulebook["rulebook_id"] == "policycheck_refund_eligibility"
    assert result["rulebook_hash"] == digest == sha256_hex(rulebook)
    assert result["rules_version"] == rulebook["version"]
    assert result["policy_version"] == "refund@2026-11-01"
    assert result["policy_table_hash"] == service.table("refund").table_hash
    [source] = result["sources"]
    assert source["source_url"].startswith("https://www.bestbuy.com/") and source["last_verified"]
    assert result["rulebook_result"]["matched_rule_id"] == "within_window"
    assert result["rulebook_result"]["evaluation"]["matched"] is True
    assert result["terms"]["refund_window_days"] == 15


def test_one_engine_the_verdict_is_what_the_gate_evaluator_says(service):
    rulebook, digest = service.rulebook("return")
    facts = {"vendor": "ikea", "region": "US", "plan": "*", "vendor_supported": True, "policy_found": True,
             "days_since_purchase": 400, "policy": {"returns_accepted": True}, "days_left_in_window": -35}
    direct = get_evaluator(rulebook, digest).evaluate(facts)
    via = service.check("return_eligibility", {"vendor": "IKEA", "days_since_purchase": 400})
    assert via["rulebook_result"]["matched_rule_id"] == direct.matched_rule_id == "outside_window"
    assert via["verdict"] == direct.application_verdict == "EXPIRED"


@pytest.mark.parametrize("tool, arguments, field, code", [
    ("refund_eligibility", {}, "vendor", "required"),
    ("refund_eligibility", {"vendor": "adobe"}, "days_since_purchase", "required"),
    ("refund_eligibility", {"vendor": "adobe", "days_since_purchase": -1}, "days_since_purchase", "invalid_value"),
    ("refund_eligibility", {"vendor": "adobe", "days_since_purchase": True}, "days_since_purchase", "invalid_value"),
    ("refund_eligibility", {"vendor": "adobe", "days_since_purchase": "3"}, "days_since_purchase", "invalid_value"),
    ("return_eligibility", {"vendor": "amazon", "days_since_purchase": 36501}, "days_since_purchase",
     "invalid_value"),
    ("trial_terms", {"vendor": ""}, "vendor", "invalid_value"),
    ("trial_terms", {"vendor": "!!!"}, "vendor", "invalid_value"),
    ("trial_terms", {"vendor": "x" * 101}, "vendor", "invalid_value"),
    ("trial_terms", {"vendor": "canva", "region": "USA"}, "region", "invalid_value"),
    ("trial_terms", {"vendor": "canva", "region": 1}, "region", "invalid_value"),
    ("trial_terms", {"vendor": "canva", "plan": ""}, "plan", "invalid_value"),
    ("trial_terms", {"vendor": "canva", "days_since_purchase": 1}, "days_since_purchase", "unknown_field"),
    ("cancellation_penalty", ["adobe"], "arguments", "invalid_type"),
])
def test_bad_arguments_are_refused_with_the_field_named(service, tool, arguments, field, code):
    with pytest.raises(ArgumentsInvalid) as caught:
        service.check(tool, arguments)
    assert {"field": field, "code": code} in [{k: e[k] for k in ("field", "code")} for e in caught.value.errors]


def test_a_rulebook_that_reaches_no_verdict_fails_closed(tmp_path):
    service = undecided_service(tmp_path)
    with pytest.raises(CheckFailed):
        service.check("refund_eligibility", {"vendor": "adobe", "days_since_purchase": 1})


def test_an_invalid_rulebook_file_stops_the_service(tmp_path):
    import shutil

    target = tmp_path / "bad"
    shutil.copytree(TABLES_DIR, target)
    path = target / "trial.rulebook.json"
    rulebook = json.loads(path.read_text())
    rulebook["rules"][0]["condition"]["function"] = "x"
    path.write_text(json.dumps(rulebook))
    with pytest.raises(ValueError, match="not a valid Rulebook v1"):
        PolicyCheckService(target)


def test_a_workflow_body_is_checked_once_by_its_composed_schema_with_the_check_s_own_rules(service):
    """A workflow's body (its check's arguments and `ticket_id`) goes through the check whole,
    checked by its composed schema: every problem of both at once, and the rule a schema cannot
    say (finite days, for a caller in process) holds for it as for the check's own arguments."""
    from gate.services.workflows import body_schema

    tool = service.spec_for_service("refund").tool
    body = {"vendor": "adobe", "region": "US", "plan": "annual", "days_since_purchase": 5, "ticket_id": "T-1"}
    assert service.check(tool, body, body_schema("refund"))["verdict"] == "ALLOWED"
    with pytest.raises(ArgumentsInvalid) as nan:
        service.check(tool, {**body, "days_since_purchase": float("nan")}, body_schema("refund"))
    assert [(e["field"], e["code"]) for e in nan.value.errors] == [("days_since_purchase", "invalid_value")]
    with pytest.raises(ArgumentsInvalid) as both:
        service.check(tool, {**body, "vendor": "", "ticket_id": "a b"}, body_schema("refund"))
    assert [e["field"] for e in both.value.errors] == ["vendor", "ticket_id"]
    with pytest.raises(ArgumentsInvalid) as alone:  # the check's own schema knows no ticket id
        service.check(tool, body)
    assert [(e["field"], e["code"]) for e in alone.value.errors] == [("ticket_id", "unknown_field")]
