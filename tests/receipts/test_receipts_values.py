"""The closed value sets and their classifications."""

from __future__ import annotations

from gate import receipts
from gate.receipts.values import (
    EFFECT_EXCLUDED,
    EFFECT_FAILURE,
    EFFECT_OPEN,
    EFFECT_SUCCESS,
)


def test_execution_status_is_exactly_the_spec_seven():
    assert receipts.EXECUTION_STATUSES == (
        "executed", "queued", "skipped", "failed", "blocked", "reviewed", "reverted")
    assert set(receipts.EXECUTION_STATUSES) - {"queued", "reviewed"} == receipts.EXECUTION_TERMINAL_STATUSES
    assert {"executed", "reverted"} == receipts.EXECUTION_MUTATED_STATUSES


def test_outcome_statuses_include_the_spec_named_ones_and_classify_every_value():
    assert {"succeeded", "failed", "pending", "review", "reverted"} <= set(receipts.OUTCOME_STATUSES)
    assert set(receipts.OUTCOME_EFFECTIVENESS_CLASS) == set(receipts.OUTCOME_STATUSES)
    assert set(receipts.OUTCOME_EFFECTIVENESS_CLASS.values()) == {
        EFFECT_SUCCESS, EFFECT_FAILURE, EFFECT_EXCLUDED, EFFECT_OPEN}
    assert {"succeeded", "failed", "reverted", "cancelled"} == receipts.OUTCOME_TERMINAL_STATUSES


def test_sync_values():
    assert "written" in receipts.SYNC_STATUSES
    assert set(receipts.SYNC_STATUSES) > receipts.SYNC_TERMINAL_STATUSES
    assert receipts.SYNC_DIRECTIONS == ("writeback", "inbound")
    assert receipts.SYNC_DIRECTION_DEFAULT in receipts.SYNC_DIRECTIONS
