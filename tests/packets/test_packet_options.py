"""`PacketOptions.from_query`: spec defaults and bounds (limits 1..1000, default 20)."""

from __future__ import annotations

import pytest

from gate.errors import GateError
from gate.packets import PacketOptions


def problems(query) -> list[tuple[str, str]]:
    with pytest.raises(GateError) as caught:
        PacketOptions.from_query(query)
    assert caught.value.code == "REQUEST_INVALID"
    errors = caught.value.details["errors"]
    assert all(set(e) == {"field", "code", "message"} and e["message"] for e in errors)
    return [(e["field"], e["code"]) for e in errors]


def test_defaults():
    options = PacketOptions.from_query({})
    assert options == PacketOptions()
    assert options.to_dict() == {"include_input": False, "include_chain": True, "include_intelligence": True,
                                 "execution_limit": 20, "outcome_limit": 20, "chain_limit": 20}


def test_valid_values():
    options = PacketOptions.from_query({"include_input": "true", "include_chain": "0", "include_intelligence": "false",
                                        "execution_limit": "1000", "outcome_limit": "1", "chain_limit": "7",
                                        "unrelated": "ignored"})
    assert options == PacketOptions(include_input=True, include_chain=False, include_intelligence=False,
                                    execution_limit=1000, outcome_limit=1, chain_limit=7)
    assert PacketOptions.from_query({"include_input": "1"}).include_input is True
    assert PacketOptions.from_query({"chain_limit": ["5"]}).chain_limit == 5  # parse_qs form
    assert PacketOptions.from_query({"include_chain": False, "chain_limit": 3}) == PacketOptions(include_chain=False, chain_limit=3)


@pytest.mark.parametrize("name", ["execution_limit", "outcome_limit", "chain_limit"])
@pytest.mark.parametrize("value,code", [
    ("0", "out_of_range"), ("1001", "out_of_range"), ("-1", "out_of_range"), ("99999999999999999999", "out_of_range"),
    ("abc", "invalid_type"), ("", "invalid_type"), ("2.5", "invalid_type"), ("20.0", "invalid_type"),
    (" 20", "invalid_type"), ("1e2", "invalid_type"), ("٣", "invalid_type"), (True, "invalid_type"),
])
def test_limit_bounds(name, value, code):
    assert problems({name: value}) == [(name, code)]


@pytest.mark.parametrize("name", ["include_input", "include_chain", "include_intelligence"])
@pytest.mark.parametrize("value", ["abc", "", "TRUE", "yes", "2", " true", 1])
def test_boolean_values(name, value):
    assert problems({name: value}) == [(name, "invalid_value")]


def test_every_problem_is_reported_in_order():
    assert problems({"chain_limit": "0", "include_input": "maybe", "execution_limit": "x", "outcome_limit": "1001"}) == [
        ("include_input", "invalid_value"),
        ("execution_limit", "invalid_type"),
        ("outcome_limit", "out_of_range"),
        ("chain_limit", "out_of_range"),
    ]


def test_repeated_parameter_is_invalid():
    assert problems({"chain_limit": ["5", "6"]}) == [("chain_limit", "invalid_value")]


def test_constructor_enforces_the_same_bounds():
    for bad in ({"chain_limit": 0}, {"execution_limit": 1001}, {"outcome_limit": True}, {"include_input": 1}):
        with pytest.raises(ValueError):
            PacketOptions(**bad)
