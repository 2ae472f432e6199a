"""The closed value sets of execution receipts, outcome records and CRM sync records.

`execution_status` is the spec's fixed set of seven. The spec leaves the others open
("`succeeded` and others", "`written` and others"); the sets here are ours and are documented
with their meaning in docs/receipts.md. Every set is closed: any other string is refused with
REQUEST_INVALID (code `invalid_value`), so reports and effectiveness never meet a value they
cannot classify.
"""

from __future__ import annotations

from types import MappingProxyType

__all__ = [
    "EFFECT_EXCLUDED",
    "EFFECT_FAILURE",
    "EFFECT_OPEN",
    "EFFECT_SUCCESS",
    "EXECUTION_MUTATED_STATUSES",
    "EXECUTION_STATUSES",
    "EXECUTION_TERMINAL_STATUSES",
    "OUTCOME_EFFECTIVENESS_CLASS",
    "OUTCOME_STATUSES",
    "OUTCOME_TERMINAL_STATUSES",
    "SYNC_DIRECTIONS",
    "SYNC_DIRECTION_DEFAULT",
    "SYNC_STATUSES",
    "SYNC_TERMINAL_STATUSES",
]

# --------------------------------------------------------------------------- execution

# Spec "Action Execution Receipt" / "States and transitions": exactly these seven.
EXECUTION_STATUSES = ("executed", "queued", "skipped", "failed", "blocked", "reviewed", "reverted")
# Statuses after which no further execution receipt is expected for the attempt.
# `queued` (will run later) and `reviewed` (held for the declared owner) are still open.
EXECUTION_TERMINAL_STATUSES = frozenset({"executed", "skipped", "failed", "blocked", "reverted"})
# Statuses that say the target state was changed at some point (`reverted` changed it, then
# undid it).
EXECUTION_MUTATED_STATUSES = frozenset({"executed", "reverted"})

# --------------------------------------------------------------------------- outcome

EFFECT_SUCCESS = "success"
EFFECT_FAILURE = "failure"
EFFECT_EXCLUDED = "excluded"
EFFECT_OPEN = "open"

OUTCOME_STATUSES = ("succeeded", "failed", "pending", "review", "reverted", "cancelled")
# How policy effectiveness reads the latest Outcome Record of a decision (spec "Effectiveness
# uses the latest Outcome Record per decision"):
# success / failure count in the success rate; excluded is terminal but says nothing about the
# policy (the business withdrew the action before it took effect); open is not yet terminal.
OUTCOME_EFFECTIVENESS_CLASS = MappingProxyType({
    "succeeded": EFFECT_SUCCESS,
    "failed": EFFECT_FAILURE,
    "reverted": EFFECT_FAILURE,
    "cancelled": EFFECT_EXCLUDED,
    "pending": EFFECT_OPEN,
    "review": EFFECT_OPEN,
})
OUTCOME_TERMINAL_STATUSES = frozenset(
    status for status, effect in OUTCOME_EFFECTIVENESS_CLASS.items() if effect != EFFECT_OPEN
)

# --------------------------------------------------------------------------- CRM sync

SYNC_STATUSES = ("written", "pending", "failed", "skipped", "conflict")
# `pending` will be written later; `conflict` needs a person or a later sync to resolve it.
SYNC_TERMINAL_STATUSES = frozenset({"written", "failed", "skipped"})
# One record describes one data flow, so `field_mapping` always reads source → destination.
SYNC_DIRECTIONS = ("writeback", "inbound")
SYNC_DIRECTION_DEFAULT = "writeback"

if set(OUTCOME_EFFECTIVENESS_CLASS) != set(OUTCOME_STATUSES):  # an import-time check of the two tables
    raise AssertionError("every outcome status needs an effectiveness class, and only those")
