"""Shared inputs for the receipt tests: the golden Decision Record and minimal valid bodies."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from gate.errors import GateError

GOLDEN = Path(__file__).resolve().parent / "golden"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "receipts.md"
RECORD = json.loads((GOLDEN / "decision-record.json").read_text(encoding="utf-8"))
REPORTED_AT = "2026-05-21T00:00:07.000Z"


def record() -> dict:
    return copy.deepcopy(RECORD)


def execution_body(**changes) -> dict:
    body = {
        "execution_status": "executed",
        "decision_record_hash": RECORD["record_hash"],
        "decision_receipt_hash": RECORD["receipt_hash"],
    }
    body.update(changes)
    return body


def outcome_body(**changes) -> dict:
    body = {"outcome_status": "succeeded"}
    body.update(changes)
    return body


def crm_body(**changes) -> dict:
    body = {"sync_status": "written", "crm_provider": "hubspot", "crm_object_id": "9912734"}
    body.update(changes)
    return body


def problems(fn, body) -> list[tuple[str, str]]:
    """The (field, code) pairs of the REQUEST_INVALID that `fn(body)` raises."""
    with pytest.raises(GateError) as caught:
        fn(body)
    assert caught.value.code == "REQUEST_INVALID", caught.value.code
    errors = caught.value.details["errors"]
    assert all(set(item) == {"field", "code", "message"} and item["message"] for item in errors)
    return [(item["field"], item["code"]) for item in errors]


def golden(name: str) -> dict:
    return json.loads((GOLDEN / name).read_text(encoding="utf-8"))
