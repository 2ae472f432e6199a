"""The three stored receipts as values: `ExecutionReceipt`, `OutcomeRecord`, `CrmSyncRecord`.

Each is its kind's compacted hash preimage (`gate.receipts.hashing`) and its hash member, in the
order of the kind's member list: a member the builder may leave null, "" or {} is compacted away,
so it is `NotRequired`. Members copied from the Decision Record are the stored record's strings.

No `from __future__ import annotations` here: `NotRequired` must be a real object when the
TypedDict is created, or Python 3.11 cannot tell the optional members apart.
"""

from typing import NotRequired, TypedDict

__all__ = ["CrmSyncRecord", "ExecutionReceipt", "Executor", "OutcomeRecord", "ResultObject"]


class Executor(TypedDict):
    """`executor` as stored: who ran the action (both members trimmed text)."""

    type: str
    id: str


# `execution_result` given as an object: member name → text, finite number or boolean.
ResultObject = dict[str, str | int | float | bool]


class ExecutionReceipt(TypedDict):
    """`decision_execution_v1` (`build_execution_receipt`), in `EXECUTION_HASH_MEMBERS` order."""

    decision_protocol_version: str
    decision_execution_version: str
    execution_receipt_id: str
    decision_id: str
    idempotency_key: NotRequired[str]
    execution_status: str
    execution_result: NotRequired[str | ResultObject]
    action_taken: NotRequired[str]
    target_system: NotRequired[str]
    target_object_id: NotRequired[str]
    mutation: NotRequired[str]
    external_ref: NotRequired[str]
    execution_id: NotRequired[str]
    executor: NotRequired[Executor]
    decision_record_hash: str
    decision_receipt_hash: str
    decision_verdict: NotRequired[str]
    decision_action: NotRequired[str]
    policy_id: NotRequired[str]
    policy_version: NotRequired[str]
    policy_bundle_hash: NotRequired[str]
    action_binding: NotRequired[dict[str, str]]
    action_binding_hash: str
    action_binding_match: bool
    state_before_hash: NotRequired[str]
    state_after_hash: NotRequired[str]
    state_before_ref: NotRequired[str]
    state_after_ref: NotRequired[str]
    evidence_refs: NotRequired[list[str]]
    execution_input_hash: str
    executed_at: NotRequired[str]
    reported_at: str
    decision_found: bool
    execution_hash: str


class OutcomeRecord(TypedDict):
    """`decision_outcome_v1` (`build_outcome_record`), in `OUTCOME_HASH_MEMBERS` order, then its
    link to an execution receipt (`OUTCOME_LINK_MEMBERS`, outside `outcome_hash`)."""

    decision_protocol_version: str
    decision_outcome_version: str
    outcome_id: str
    decision_id: str
    idempotency_key: NotRequired[str]
    outcome_status: str
    action_executed: NotRequired[bool]
    action_taken: NotRequired[str]
    target_system: NotRequired[str]
    target_object_id: NotRequired[str]
    mutation: NotRequired[str]
    external_ref: NotRequired[str]
    decision_record_hash: NotRequired[str]
    decision_receipt_hash: NotRequired[str]
    decision_verdict: NotRequired[str]
    decision_action: NotRequired[str]
    policy_id: NotRequired[str]
    policy_version: NotRequired[str]
    policy_bundle_hash: NotRequired[str]
    action_binding: NotRequired[dict[str, str]]
    observed_metrics: NotRequired[dict[str, int | float]]
    evidence_refs: NotRequired[list[str]]
    outcome_input_hash: str
    executed_at: NotRequired[str]
    reported_at: str
    decision_found: bool
    outcome_hash: str
    execution_receipt_id: NotRequired[str]
    execution_hash: NotRequired[str]


class CrmSyncRecord(TypedDict):
    """`decision_crm_sync_v1` (`build_crm_sync_record`), in `SYNC_HASH_MEMBERS` order."""

    decision_protocol_version: str
    decision_crm_sync_version: str
    sync_id: str
    decision_id: str
    idempotency_key: NotRequired[str]
    sync_status: str
    sync_direction: str
    crm_provider: str
    crm_object_type: NotRequired[str]
    crm_object_id: NotRequired[str]
    crm_record_url: NotRequired[str]
    field_mapping: NotRequired[dict[str, str]]
    external_ref: NotRequired[str]
    decision_record_hash: NotRequired[str]
    decision_receipt_hash: NotRequired[str]
    decision_verdict: NotRequired[str]
    decision_action: NotRequired[str]
    policy_id: NotRequired[str]
    policy_version: NotRequired[str]
    policy_bundle_hash: NotRequired[str]
    sync_input_hash: str
    synced_at: NotRequired[str]
    reported_at: str
    decision_found: bool
    sync_hash: str
