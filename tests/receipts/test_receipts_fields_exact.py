"""`gate.receipts.fields` checks called directly, at their boundaries: the exact problems each
records and the value it returns (the validators only show the problems)."""

from __future__ import annotations

import pytest

from gate.receipts import fields as F
from gate.vocabulary import MAX_SAFE_INTEGER


def run(check, value, path="p"):
    """(returned value, [(field, code), ...]) of one check."""
    problems = F.Problems()
    result = check(value, path, problems)
    return result, [(item["field"], item["code"]) for item in problems.items]


def test_one_of_made_at_call_time_refuses_non_strings_and_other_values_exactly():
    # The request tables build their `one_of` checks at import; this builds one in the test.
    check = F.one_of(("on", "off"))
    assert run(check, "on") == ("on", [])
    assert run(check, None) == (None, [])
    assert run(check, 1) == (None, [("p", "invalid_type")])
    assert run(check, "ON") == (None, [("p", "invalid_value")])
    assert run(check, " on") == (None, [("p", "invalid_value")])


def test_utf16_length_counts_astral_characters_twice_and_the_last_bmp_one_once():
    assert F.utf16_length("\uffff") == 1
    assert F.utf16_length("\U00010000") == 2
    assert F.utf16_length("a\U0010ffff") == 3


def test_a_safe_integer_at_the_limit_is_kept_one_beyond_is_refused_and_not_kept():
    assert run(F.observed_metrics, {"m": MAX_SAFE_INTEGER}) == ({"m": MAX_SAFE_INTEGER}, [])
    assert run(F.observed_metrics, {"m": -MAX_SAFE_INTEGER}) == ({"m": -MAX_SAFE_INTEGER}, [])
    assert run(F.observed_metrics, {"m": MAX_SAFE_INTEGER + 1, "n": 1}) == ({"n": 1}, [("p.m", "invalid_value")])
    assert run(F.result_text_or_object, {"m": float("inf"), "n": 2}) == ({"n": 2}, [("p.m", "invalid_value")])


def test_a_bad_binding_member_name_does_not_stop_the_check_of_the_members_after_it():
    assert run(F.action_binding, {"bad-name": "x", "ok": 3, "fine": "v"}) == (
        {"fine": "v"}, [("p.bad-name", "invalid_format"), ("p.ok", "invalid_type")])


def test_a_field_mapping_key_of_exactly_160_units_is_kept():
    key = "k" * 160
    assert run(F.field_mapping, {key: "v"}) == ({key: "v"}, [])
    assert run(F.field_mapping, {key + "k": "v"}) == (None, [("p." + key + "k", "too_long")])


@pytest.mark.parametrize("url", ["http://crm.example/a", "HTTP://crm.example/a", "https://crm.example/a"])
def test_http_and_https_urls_are_accepted_in_any_case(url):
    assert run(F.http_url, url) == (url, [])


def test_a_null_result_member_is_an_empty_value_not_a_wrong_type():
    assert run(F.result_text_or_object, {"a": None, "b": True}) == ({"b": True}, [("p.a", "invalid_value")])


@pytest.mark.parametrize("value, code", [(5, "invalid_type"), ("2026-05-21T00:00:00.000000000Z" + "0" * 11, "too_long")])
def test_a_timestamp_that_is_not_text_of_at_most_40_units_is_named_at_its_path(value, code):
    assert run(F.timestamp, value, "executed_at") == (None, [("executed_at", code)])


def test_problems_at_looks_for_the_field_of_a_recorded_problem():
    problems = F.Problems()
    assert problems.at("a") is False
    problems.add("a", "invalid_type", "a must be a string")
    assert problems.at("a") is True
    assert problems.at("b") is False


@pytest.mark.parametrize("value, ok", [
    ("2026-05-21T23:59:59Z", True), ("2026-05-21T00:60:00Z", False), ("2026-05-21T00:00:60Z", False),
    ("2026-05-21T24:00:00Z", False), ("2026-13-01T00:00:00Z", False), ("2026-05-32T00:00:00Z", False),
])
def test_a_timestamp_is_a_real_time_in_each_of_its_six_fields(value, ok):
    """The pattern takes any two digits; the hour, minute and second must each exist too."""
    assert run(F.timestamp, value, "executed_at") == ((value, []) if ok else (None, [("executed_at", "invalid_format")]))
