"""Documented or the test fails: docs/receipts.md names every value, member, code and limit."""

from __future__ import annotations

import re

import pytest
from receipts_support import DOCS

from gate import bodies, receipts
from gate.receipts.credentials import (
    CREDENTIAL_NAMES,
    CREDENTIAL_VALUE_PREFIXES,
    URL_CREDENTIAL_PARAMETERS,
)

TEXT = DOCS.read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = TEXT.index(title)
    end = TEXT.find("\n**", start + len(title))
    return TEXT[start:end if end != -1 else None]


def _listed(section: str) -> list[str]:
    return re.findall(r"`([a-z_]+)`", section.split("covers:", 1)[1])


@pytest.mark.parametrize("title, members", [
    ("**`execution_hash`**", receipts.EXECUTION_HASH_MEMBERS),
    ("**`outcome_hash`**", receipts.OUTCOME_HASH_MEMBERS),
    ("**`sync_hash`**", receipts.SYNC_HASH_MEMBERS),
])
def test_preimage_lists_are_written_out_exactly(title, members):
    assert _listed(_section(title)) == list(members)


def test_members_outside_the_preimages_are_documented():
    section = _section("**Not in any preimage:**")
    for hash_member in ("execution_hash", "outcome_hash", "sync_hash"):
        assert f"`{hash_member}`" in section


@pytest.mark.parametrize("values", [
    receipts.EXECUTION_STATUSES, receipts.OUTCOME_STATUSES, receipts.SYNC_STATUSES, receipts.SYNC_DIRECTIONS,
])
def test_every_value_is_documented_in_a_table_row(values):
    for value in values:
        assert re.search(rf"^\| `{value}`", TEXT, re.M), value


def test_effectiveness_classes_are_documented_per_status():
    for status, effect in receipts.OUTCOME_EFFECTIVENESS_CLASS.items():
        assert re.search(rf"^\| `{status}` \|.*\| `{effect}` \|$", TEXT, re.M), status
    for status in receipts.EXECUTION_STATUSES:
        terminal = "yes" if status in receipts.EXECUTION_TERMINAL_STATUSES else "no"
        assert re.search(rf"^\| `{status}` \|.*\| {terminal} \|$", TEXT, re.M), status
    for status in receipts.SYNC_STATUSES:
        terminal = "yes" if status in receipts.SYNC_TERMINAL_STATUSES else "no"
        assert re.search(rf"^\| `{status}` \|.*\| {terminal} \|$", TEXT, re.M), status


@pytest.mark.parametrize("code", receipts.ERROR_CODES + ("REQUEST_INVALID", "DECISION_NOT_FOUND"))
def test_every_error_code_is_in_the_error_table(code):
    assert re.search(rf"^\| `{code}` \|", TEXT, re.M)


@pytest.mark.parametrize("code", ["missing_field", "unknown_field", "invalid_type", "invalid_value",
                                  "invalid_format", "too_long", "too_many"])
def test_every_problem_code_is_documented(code):
    assert re.search(rf"^\| `{code}` \|", TEXT, re.M)


@pytest.mark.parametrize("body_schema", [receipts.EXECUTION_BODY, receipts.OUTCOME_BODY, receipts.CRM_SYNC_BODY])
def test_every_request_member_is_documented(body_schema):
    for name in bodies.schema(body_schema)["properties"]:
        assert f"`{name}`" in TEXT, name


def test_credential_rules_are_documented():
    section = TEXT[TEXT.index("## 3. Credentials"):TEXT.index("## 4. Binding")]
    for name in sorted(CREDENTIAL_NAMES | URL_CREDENTIAL_PARAMETERS) + list(CREDENTIAL_VALUE_PREFIXES):
        assert f"`{name}`" in section, name


def _limits(node: object) -> set[int]:
    """Every length and count limit the receipts' schemas state."""
    found: set[int] = set()
    if isinstance(node, dict):
        found |= {value for key, value in node.items() if isinstance(value, int)
                  and key in ("x-js-max-length", "x-utf16-max-length", "maxProperties", "maxItems")}
        for value in node.values():
            found |= _limits(value)
    elif isinstance(node, list):
        for value in node:
            found |= _limits(value)
    return found


def _patterns(node: object) -> set[str]:
    if isinstance(node, dict):
        return ({node["pattern"]} if isinstance(node.get("pattern"), str) and "propertyNames" not in node else set()) \
            | {pattern for value in node.values() for pattern in _patterns(value)}
    return {pattern for value in node for pattern in _patterns(value)} if isinstance(node, list) else set()


def test_limits_are_documented():
    limits = set().union(*(_limits(bodies.schema(name)) for name in ("execution", "outcome", "crm-sync")))
    assert limits >= {300, 160, 800, 200, 500, 600, 64, 100, 32, 40}
    for limit in limits - {40}:  # 40: a timestamp's own length, its format says more
        assert f"≤ {limit}" in TEXT, limit
    names = {pattern for pattern in _patterns(bodies.schema("execution")) if pattern.startswith("^[A-Za-z_]")}
    assert names and all(pattern in TEXT for pattern in names)
