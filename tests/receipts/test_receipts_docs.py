"""Documented or the test fails: docs/receipts.md names every value, member, code and limit."""

from __future__ import annotations

import re

import pytest
from receipts_support import DOCS

from gate import receipts
from gate.receipts import fields as F
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


@pytest.mark.parametrize("members", [receipts.EXECUTION_REQUEST_MEMBERS, receipts.OUTCOME_REQUEST_MEMBERS,
                                     receipts.CRM_SYNC_REQUEST_MEMBERS])
def test_every_request_member_is_documented(members):
    for name in members:
        assert f"`{name}`" in TEXT, name


def test_credential_rules_are_documented():
    section = TEXT[TEXT.index("## 3. Credentials"):TEXT.index("## 4. Binding")]
    for name in sorted(CREDENTIAL_NAMES | URL_CREDENTIAL_PARAMETERS) + list(CREDENTIAL_VALUE_PREFIXES):
        assert f"`{name}`" in section, name


def test_limits_are_documented():
    for limit in (F.MAX_ID, F.MAX_LABEL, F.MAX_URL, F.MAX_OPAQUE_HASH, F.MAX_RESULT_TEXT, F.MAX_DECISION_ID,
                  F.MAX_METRICS, F.MAX_FIELD_MAPPING, F.MAX_BINDING_MEMBERS, F.MAX_EVIDENCE_REFS):
        assert f"≤ {limit}" in TEXT, limit
    assert F.METRIC_NAME.pattern in TEXT and F.BINDING_MEMBER_NAME.pattern in TEXT
