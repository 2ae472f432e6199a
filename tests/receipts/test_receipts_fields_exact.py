"""The receipts' member rules at their boundaries, through the validators that check a body by its
schema alone (gate/bodies/execution, outcome, crm-sync): the exact problems each value gets and the
value stored (the HTTP tests show the refusals; these pin each edge)."""

from __future__ import annotations

from typing import Any

import pytest

from gate.bodies.text import utf16_length
from gate.errors import GateError
from gate.receipts import validate_crm_sync_request, validate_execution_request, validate_outcome_request
from gate.vocabulary import MAX_SAFE_INTEGER

HASH = "0123456789abcdef" * 4
EXECUTION = {"execution_status": "executed", "decision_record_hash": HASH, "decision_receipt_hash": HASH}
OUTCOME = {"outcome_status": "succeeded"}
CRM = {"sync_status": "pending", "crm_provider": "hubspot"}


def run(validate: Any, base: dict[str, Any], member: str, value: Any) -> tuple[Any, list[tuple[str, str]]]:
    """(the member as stored, [(field, code), ...]) of a body of `base` with `member` set."""
    try:
        stored = validate({**base, member: value})
    except GateError as refused:
        assert refused.code == "REQUEST_INVALID"
        return None, [(item["field"], item["code"]) for item in refused.details["errors"]]
    return stored.get(member), []


def test_a_status_refuses_non_strings_and_other_values_exactly():
    assert run(validate_crm_sync_request, CRM, "sync_direction", "inbound") == ("inbound", [])
    assert run(validate_crm_sync_request, CRM, "sync_direction", None) == ("writeback", [])
    assert run(validate_crm_sync_request, CRM, "sync_direction", 1) == (None, [("sync_direction", "invalid_type")])
    assert run(validate_crm_sync_request, CRM, "sync_direction", "INBOUND") == (None, [("sync_direction", "invalid_value")])
    assert run(validate_crm_sync_request, CRM, "sync_direction", " inbound") == (None, [("sync_direction", "invalid_value")])
    assert run(validate_crm_sync_request, CRM, "sync_direction", "") == (None, [("sync_direction", "invalid_value")])
    assert run(validate_crm_sync_request, CRM, "sync_status", " ") == (None, [("sync_status", "missing_field")])


def test_utf16_length_counts_astral_characters_twice_and_the_last_bmp_one_once():
    assert utf16_length("\uffff") == 1
    assert utf16_length("\U00010000") == 2
    assert utf16_length("a\U0010ffff") == 3


@pytest.mark.parametrize(("text", "ok"), [
    ("x" * 160, True), ("x" * 161, False), ("\U0001F600" * 80, True), ("\U0001F600" * 80 + "x", False),
    (" \u3000" + "x" * 160 + "\ufeff\n", True), ("é" * 160, True),
])
def test_a_label_is_at_most_160_utf16_units_once_trimmed_as_javascript_trims(text, ok):
    expected = (text.strip(" \u3000\ufeff\n"), []) if ok else (None, [("action_taken", "too_long")])
    assert run(validate_outcome_request, OUTCOME, "action_taken", text) == expected


def test_a_safe_integer_at_the_limit_is_kept_one_beyond_is_refused():
    assert run(validate_outcome_request, OUTCOME, "observed_metrics", {"m": MAX_SAFE_INTEGER}) == (
        {"m": MAX_SAFE_INTEGER}, [])
    assert run(validate_outcome_request, OUTCOME, "observed_metrics", {"m": -MAX_SAFE_INTEGER}) == (
        {"m": -MAX_SAFE_INTEGER}, [])
    assert run(validate_outcome_request, OUTCOME, "observed_metrics", {"m": MAX_SAFE_INTEGER + 1, "n": 1}) == (
        None, [("observed_metrics.m", "invalid_value")])
    assert run(validate_outcome_request, OUTCOME, "observed_metrics", {"m": 1e300}) == ({"m": 1e300}, [])


def test_a_number_that_json_cannot_write_is_no_number():
    """A caller in process could pass Infinity or NaN (the parser of a request's text refuses them
    first): neither is a JSON number, so neither is stored."""
    for value in (float("inf"), float("nan")):
        assert run(validate_execution_request, EXECUTION, "execution_result", {"m": value, "n": 2}) == (
            None, [("execution_result.m", "invalid_type")])
        assert run(validate_outcome_request, OUTCOME, "observed_metrics", {"m": value}) == (
            None, [("observed_metrics.m", "invalid_type")])


def test_a_bad_binding_member_name_does_not_stop_the_check_of_the_members_after_it():
    assert run(validate_execution_request, EXECUTION, "action_binding", {"bad-name": "x", "ok": 3, "fine": "v"}) == (
        None, [("action_binding.bad-name", "invalid_format"), ("action_binding.ok", "invalid_type")])
    assert run(validate_execution_request, EXECUTION, "action_binding", {"ok": 3, "bad-name": "x"}) == (
        None, [("action_binding.bad-name", "invalid_format"), ("action_binding.ok", "invalid_type")])


def test_a_field_mapping_key_of_exactly_160_units_is_kept_and_is_never_trimmed():
    key = "k" * 160
    assert run(validate_crm_sync_request, CRM, "field_mapping", {key: " v "}) == ({key: "v"}, [])
    assert run(validate_crm_sync_request, CRM, "field_mapping", {key + "k": "v"}) == (
        None, [("field_mapping." + key + "k", "too_long")])
    padded = " " + "k" * 159 + " "
    assert run(validate_crm_sync_request, CRM, "field_mapping", {padded: "v"}) == (
        None, [("field_mapping." + padded, "too_long")])
    assert run(validate_crm_sync_request, CRM, "field_mapping", {" ": "v"}) == (None, [("field_mapping. ", "invalid_value")])


@pytest.mark.parametrize("url", ["http://crm.example/a", "HTTP://crm.example/a", "https://crm.example/a"])
def test_http_and_https_urls_are_accepted_in_any_case(url):
    assert run(validate_crm_sync_request, CRM, "crm_record_url", url) == (url, [])


@pytest.mark.parametrize(("url", "code"), [
    ("ftp://crm.example", "invalid_value"), ("https://", "invalid_format"), ("https://crm .example", "invalid_format"),
    ("http://crm.example:99999", "invalid_format"), ("ftp:// bad", "invalid_format"), ("x" * 801, "too_long"),
])
def test_a_url_names_what_is_wrong_with_it_first(url, code):
    assert run(validate_crm_sync_request, CRM, "crm_record_url", url) == (None, [("crm_record_url", code)])


def test_a_null_result_member_is_an_empty_value_not_a_wrong_type():
    assert run(validate_execution_request, EXECUTION, "execution_result", {"a": None, "b": True}) == (
        None, [("execution_result.a", "invalid_value")])
    assert run(validate_execution_request, EXECUTION, "execution_result", {"a": " v ", "b": True, "c": 1.5}) == (
        {"a": "v", "b": True, "c": 1.5}, [])


@pytest.mark.parametrize("value, code", [(5, "invalid_type"), ("2026-05-21T00:00:00.000000000Z" + "0" * 11, "too_long")])
def test_a_timestamp_that_is_not_text_of_at_most_40_units_is_named_at_its_path(value, code):
    assert run(validate_outcome_request, OUTCOME, "executed_at", value) == (None, [("executed_at", code)])


@pytest.mark.parametrize("value, ok", [
    ("2026-05-21T23:59:59Z", True), ("2026-05-21T00:60:00Z", False), ("2026-05-21T00:00:60Z", False),
    ("2026-05-21T24:00:00Z", False), ("2026-13-01T00:00:00Z", False), ("2026-05-32T00:00:00Z", False),
    ("2024-02-29T00:00:00Z", True), ("2026-02-29T00:00:00Z", False), (" 2026-05-21T00:00:00.123+00:00 ", True),
    ("2026-05-21T00:00:00+01:00", False), ("2026-05-21", False), ("\u0662026-05-21T00:00:00Z", False),
])
def test_a_timestamp_is_a_real_time_in_each_of_its_six_fields(value, ok):
    """The shape takes any two digits; the date and the hour, minute and second must exist too."""
    expected = (value.strip(), []) if ok else (None, [("executed_at", "invalid_format")])
    assert run(validate_outcome_request, OUTCOME, "executed_at", value) == expected


def test_an_executor_names_each_member_missing_and_each_unknown_first():
    assert run(validate_execution_request, EXECUTION, "executor", {"id": "", "type": "a", "z": 1}) == (
        None, [("executor.z", "unknown_field"), ("executor.id", "missing_field")])
    assert run(validate_execution_request, EXECUTION, "executor", {}) == (
        None, [("executor.type", "missing_field"), ("executor.id", "missing_field")])
    assert run(validate_execution_request, EXECUTION, "executor", {"id": " a ", "type": " b "}) == (
        {"type": "b", "id": "a"}, [])


def test_a_member_wrong_as_a_whole_hides_what_is_wrong_inside_it():
    refs = ["", *["ev"] * 32]
    assert run(validate_execution_request, EXECUTION, "evidence_refs", refs) == (None, [("evidence_refs", "too_many")])
    assert run(validate_execution_request, EXECUTION, "evidence_refs", [" a ", None, "b", 2]) == (
        None, [("evidence_refs[1]", "invalid_value"), ("evidence_refs[3]", "invalid_type")])
    binding = {f"k{index}": "" for index in range(33)}
    assert run(validate_execution_request, EXECUTION, "action_binding", binding) == (None, [("action_binding", "too_many")])


@pytest.mark.parametrize("year", [1, 4, 100, 400, 1900, 2000, 2023, 2024, 2100, 9996, 9999])
def test_a_timestamp_s_date_is_one_the_calendar_has(year):
    """The schema states the Gregorian calendar in its pattern (leap years by 4, 100 and 400);
    every month 00-13 and day 00-32 of these years is taken exactly when `datetime.date` takes it."""
    import datetime

    for month in range(14):
        for day in range(33):
            try:
                datetime.date(year, month, day)
                real = True
            except ValueError:
                real = False
            stamp = f"{year:04d}-{month:02d}-{day:02d}T12:00:00Z"
            assert run(validate_outcome_request, OUTCOME, "executed_at", stamp)[1] == (
                [] if real else [("executed_at", "invalid_format")]), stamp
    assert run(validate_outcome_request, OUTCOME, "executed_at", "0000-01-01T00:00:00Z")[1] == [
        ("executed_at", "invalid_format")]
