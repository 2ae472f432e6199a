"""Validator paths map to the line and column where the author typed them."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.app.jsonpos import locate, position_of
from workbench.app.store import check_draft

DRAFT = """{
  "schema_version": "rulebook_v1",
  "rulebook_id": "rb",
  "version": "1",
  "rules": [
    {"rule_id": "ok_rule", "priority": 1,
     "condition": {"field": "x", "operator": "gtx", "value": 1},
     "outcome": {"decision": "yes", "verdict": "OK", "action": "go", "reason_code": "OK_R"}}
  ],
  "default_outcome": {"decision": "no", "verdict": "NO", "action": "stop", "reason_code": "DEFAULT"}
}"""


def test_an_error_is_placed_where_it_was_typed():
    check = check_draft(DRAFT)
    assert not check.valid
    [error] = check.errors
    assert error["field"] == "draft.rules[0].condition.operator"
    line = DRAFT.splitlines()[error["line"]]
    assert line[error["column"]:].startswith('"operator"')


def test_a_missing_member_is_placed_at_its_parent():
    text = DRAFT.replace('"verdict": "NO", ', "")
    check = check_draft(text)
    fields = {e["field"]: e for e in check.errors}
    error = fields["draft.default_outcome.verdict"]
    assert text.splitlines()[error["line"]][error["column"]:].startswith('"default_outcome"')


def test_unparsable_json_points_at_the_parse_error():
    check = check_draft('{"rules": [1, 2,, 3]}')
    [error] = check.errors
    assert error["code"] == "invalid_json" and (error["line"], error["column"]) == (0, 16)


def test_a_valid_draft_has_a_hash():
    with open("gate/data/rulebooks/pricing-exception.json") as draft:
        text = draft.read()
    check = check_draft(text)
    assert check.valid and len(check.rulebook_hash) == 64


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(json_values, st.sampled_from([None, 2]))
def test_every_path_points_at_its_own_value(value, indent):
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    positions = locate(text, "$")
    offsets = [sum(len(row) + 1 for row in text.splitlines()[:line]) + column for line, column in positions.values()]
    assert len(set(offsets)) == len(offsets)  # one place per path
    assert position_of(positions, "$") == (0, 0)
