"""Ledger row seals: what binds a stored row's own columns to the gate's receipt key.

A Decision Record's hashes and signatures cover the record, not the ledger row that files it.
Columns such as `scope` and `key_id` are not in the record at all, and the indexed copies of
record members (`verdict`, `policy_id`, …) are read without the record. So every row the
gate writes carries a *seal* that hosted verification recomputes (docs/verification.md §9):

* A decisions row has `row_hash = H(decision_row_material(row))`. It covers every column
  except the two JSON documents, which have their own hashes (`record_hash`, `input_hash`).
  With a receipt signer the row also has `row_signature`, the receipt key's signature over
  `canon({ledger_row_version, row_hash, key_id})`.
* The lifecycle receipts of one decision form a hash chain. Each row has a `sequence`
  (1, 2, … in write order, across the three kinds), the `previous_row_hash` of the row before,
  and `row_hash = H(receipt_row_material(row))`, which covers every column except
  `receipt_json` (covered by `receipt_hash`). The decision's *receipt head* stores the count
  and the newest `row_hash`, signed with the receipt key over
  `canon({receipt_chain_version, decision_id, count, head_row_hash, key_id})`. Deleting any
  receipt row, moving one to another decision, or editing any column breaks the chain, the
  count or the signature. An Outcome Record's link to its execution receipt is not in its
  `receipt_hash` (that stays over the reference's list), so the row repeats it in two columns
  (`RECEIPT_ROW_LINK_COLUMNS`) that the row hash covers when the row has a link; a row without
  one hashes exactly as rows did before the columns existed.

`H` is sha256 over canonical JSON (`json.sort_deep.v1`). Everything here is pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from gate.keys.signing import ReceiptSigner
from gate.protocol.canonical import canonical_bytes, sha256_hex
from gate.strict_json import JsonValue

LEDGER_ROW_VERSION = "ledger_row_v1"
RECEIPT_CHAIN_VERSION = "decision_receipts_v1"

# decisions columns under `row_hash` (record_json and request_json have their own hashes).
DECISION_ROW_COLUMNS = (
    "decision_id", "scope", "key_id", "idempotency_key", "input_hash", "record_hash", "receipt_hash",
    "policy_bundle_hash", "rulebook_hash", "policy_id", "policy_version", "verdict", "created_at",
)

# lifecycle_receipts columns under `row_hash` (receipt_json is covered by receipt_hash).
RECEIPT_ROW_COLUMNS = (
    "receipt_id", "kind", "decision_id", "scope", "idempotency_key", "input_hash", "receipt_hash",
    "reported_at", "sequence", "previous_row_hash",
)


class DecisionRow(TypedDict):
    """A decisions row as a decide writes it, before its seal: DECISION_ROW_COLUMNS, then the
    record's stored text (written by the chain's seal) and the canonical request."""

    decision_id: str
    scope: str
    key_id: str
    idempotency_key: str | None
    input_hash: str
    record_hash: str
    receipt_hash: str
    policy_bundle_hash: str | None
    rulebook_hash: str
    policy_id: Any  # the rulebook's (or advisor panel's) id and version, as it states them
    policy_version: Any
    verdict: str
    created_at: str
    record_json: str
    request_json: str


class SealedDecisionRow(DecisionRow):
    """The row with its seal: `row_hash` over its columns and, with a receipt signer, `row_signature`."""

    row_hash: str
    row_signature: str | None


def sealed_decision_row(row: DecisionRow, receipt_signer: ReceiptSigner | None) -> SealedDecisionRow:
    """The row's own seal, a new row: its columns hashed, and signed with the receipt key."""
    row_hash = decision_row_hash(row)
    signature = (receipt_signer.sign_payload(row_signature_payload(row_hash, receipt_signer.key_id))
                 if receipt_signer is not None else None)
    return {**row, "row_hash": row_hash, "row_signature": signature}


def decision_row_material(row: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """The object whose hash is a decisions row's `row_hash` (missing columns as null)."""
    material = {name: row.get(name) for name in DECISION_ROW_COLUMNS}
    material["ledger_row_version"] = LEDGER_ROW_VERSION
    material["table"] = "decisions"
    return material


def decision_row_hash(row: Mapping[str, Any]) -> str:
    return sha256_hex(decision_row_material(row))


# lifecycle_receipts columns under `row_hash` only when one of them is set (an outcome's link).
RECEIPT_ROW_LINK_COLUMNS = ("execution_receipt_id", "execution_hash")


def receipt_row_material(row: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """The object whose hash is a lifecycle_receipts row's `row_hash` (missing columns as null;
    the link columns only when one is set)."""
    material = {name: row.get(name) for name in RECEIPT_ROW_COLUMNS}
    if any(row.get(name) is not None for name in RECEIPT_ROW_LINK_COLUMNS):
        material.update({name: row.get(name) for name in RECEIPT_ROW_LINK_COLUMNS})
    material["ledger_row_version"] = LEDGER_ROW_VERSION
    material["table"] = "lifecycle_receipts"
    return material


def receipt_row_hash(row: Mapping[str, JsonValue]) -> str:
    return sha256_hex(receipt_row_material(row))


def row_signature_payload(row_hash: Any, key_id: Any) -> bytes:
    """What a decisions row's `row_signature` signs."""
    return canonical_bytes({"ledger_row_version": LEDGER_ROW_VERSION, "row_hash": row_hash, "key_id": key_id})


def receipt_head_payload(decision_id: Any, count: Any, head_row_hash: Any, key_id: Any) -> bytes:
    """What a receipt head's `signature` signs. Its members differ from the row payload's, so
    one signature can never stand in for the other."""
    return canonical_bytes({"receipt_chain_version": RECEIPT_CHAIN_VERSION, "decision_id": decision_id,
                            "count": count, "head_row_hash": head_row_hash, "key_id": key_id})
