"""Hosted verification of ledger rows: is the stored record the one its row files, and are the
row's own columns and its decision's receipt rows intact? (docs/verification.md §9)

`verify_record` proves a record is internally consistent and signed. It cannot see the row the
record is stored in: a row holding another decision's record, a row moved to another scope, an
edited indexed column or a deleted receipt row all leave every record check true. These checks
compare the row with what the record states and recompute the row seals of `gate.chain.rowseal`.
Each returns named results; nothing here raises on malformed stored data.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping
from typing import Any

from gate.chain.links import chain_id_for, scope_hash
from gate.chain.rowseal import (
    decision_row_hash,
    receipt_head_payload,
    receipt_row_hash,
    row_signature_payload,
)
from gate.keys.anchors import TrustAnchors
from gate.keys.signing import b64url_decode, ed25519_verify
from gate.strict_json import JsonValue
from gate.vocabulary import SIG_ED25519, SIG_HMAC_SHA256

# Row columns that copy a record member: column -> record member.
RECORD_COLUMNS = {
    "verdict": "verdict",
    "policy_id": "policy_id",
    "policy_version": "policy_version",
    "policy_bundle_hash": "policy_bundle_hash",
    "rulebook_hash": "policy_hash",
    "created_at": "created_at",
    "idempotency_key": "idempotency_key",
    "input_hash": "input_hash",
    "record_hash": "record_hash",
    "receipt_hash": "receipt_hash",
}

# Receipt rows read back per verification (the newest by sequence); older rows are still
# counted, and each row's hash is chained into the signed head.
RECEIPT_CHAIN_WINDOW = 3000


def signature_valid(signature: Any, key_id: Any, payload: bytes, anchors: TrustAnchors,
                    fingerprint: Any = None) -> bool | None:
    """An `ed25519:<base64url>` or `hmac-sha256:<hex>` signature over `payload`, checked with
    the trusted key or secret of `key_id` only. None when no trusted key exists for it."""
    if not isinstance(signature, str):
        return False
    algorithm, _, body = signature.partition(":")
    if algorithm == SIG_HMAC_SHA256:
        secret = anchors.select_hmac(key_id)
        if secret is None:
            return None
        return hmac.compare_digest(hmac.new(secret.secret, payload, "sha256").hexdigest(), body)
    if algorithm == SIG_ED25519:
        key = anchors.select_ed25519(key_id, fingerprint)
        if key is None:
            return None
        try:
            raw = b64url_decode(body)
        except (ValueError, TypeError):
            return False
        return len(raw) == 64 and ed25519_verify(key.public_key_raw, payload, raw)
    return False


def decision_row_checks(decision_id: str, columns: Mapping[str, Any], record: Mapping[str, Any],
                        link_row: Mapping[str, Any] | None, head_row: Mapping[str, Any] | None,
                        anchors: TrustAnchors) -> tuple[dict[str, bool | None], list[str]]:
    """Named checks binding a decisions row to the record it stores, and the mismatched columns.

    * `ledger_decision_id`: the row asked for, the row's id and the record's `decision_id` agree.
    * `ledger_scope`: the row's scope owns the chain the record's signed `audit_chain` names,
      the chain link and chain head agree, and the record's registry entry names that scope.
    * `ledger_chain_position`: the chain link filed under this decision names it, at the
      position the record's `audit_chain` states.
    * `ledger_columns`: every column that copies a record member equals it.
    * `ledger_row_hash` / `ledger_row_signature`: the row seal recomputes and, for a signed
      record, carries the receipt key's signature (missing is false).
    """
    checks: dict[str, bool | None] = {}
    checks["ledger_decision_id"] = columns.get("decision_id") == decision_id == record.get("decision_id")

    scope = columns.get("scope")
    chain = record.get("audit_chain")
    registry = record.get("rulebook_registry")
    expected_chain = chain_id_for(scope) if isinstance(scope, str) else None
    checks["ledger_scope"] = bool(
        isinstance(scope, str) and expected_chain is not None and isinstance(chain, Mapping) and chain.get("chain_id") == expected_chain
        and link_row is not None and link_row.get("chain_id") == expected_chain
        and head_row is not None and head_row.get("scope") == scope
        and (not isinstance(registry, Mapping) or registry.get("scope_hash") == scope_hash(scope)))

    stated_link = _json_or_none(link_row.get("link_json")) if link_row is not None else None
    checks["ledger_chain_position"] = bool(
        link_row is not None and isinstance(chain, Mapping) and isinstance(stated_link, Mapping)
        and link_row.get("decision_id") == columns.get("decision_id") == stated_link.get("decision_id")
        and link_row.get("chain_position") == stated_link.get("chain_position") == chain.get("chain_position"))

    mismatched = sorted(name for name, member in RECORD_COLUMNS.items() if columns.get(name) != record.get(member))
    checks["ledger_columns"] = not mismatched

    recomputed = decision_row_hash(columns)
    checks["ledger_row_hash"] = isinstance(columns.get("row_hash"), str) and hmac.compare_digest(
        columns["row_hash"], recomputed)
    key_id = record.get("receipt_key_id")
    signature = columns.get("row_signature")
    if isinstance(key_id, str):
        # SECURITY: a signed record's row must be signed too; a missing row signature is false.
        checks["ledger_row_signature"] = signature_valid(
            signature, key_id, row_signature_payload(recomputed, key_id), anchors,
            record.get("receipt_public_key_fingerprint"))
    else:
        checks["ledger_row_signature"] = None if signature is None else False
    return checks, mismatched


def receipt_chain_failures(decision_id: str, scope: Any, rows: list[Mapping[str, JsonValue]], total: int,
                           head: Mapping[str, JsonValue] | None, record: Mapping[str, JsonValue],
                           anchors: TrustAnchors) -> list[str]:
    """Named failures of a decision's receipt chain (`rows`: the newest by sequence, ascending;
    `total`: all of the decision's receipt rows). Empty when intact."""
    failures: set[str] = set()
    if head is None:
        return ["receipt_chain.head"] if total else []
    count = head.get("count")
    if count != total:
        failures.add("receipt_chain.count")
    previous: Mapping[str, JsonValue] | None = None
    for row in rows:
        sequence = row.get("sequence")
        if not isinstance(sequence, int):
            failures.add("receipt_chain.sequence")
            previous = row
            continue
        previous_sequence = previous.get("sequence") if previous is not None else None
        if previous is not None and (not isinstance(previous_sequence, int) or sequence != previous_sequence + 1):
            failures.add("receipt_chain.sequence")
        if row.get("row_hash") != receipt_row_hash(row):
            failures.add("receipt_chain.row_hash")
        stated_previous = row.get("previous_row_hash")
        if previous is not None:
            if stated_previous != previous.get("row_hash"):
                failures.add("receipt_chain.link")
        elif (sequence == 1) != (stated_previous is None):
            failures.add("receipt_chain.link")
        if row.get("scope") != scope or row.get("decision_id") != decision_id:
            failures.add("receipt_chain.scope")
        previous = row
    if rows and len(rows) == total and rows[0].get("sequence") != 1:
        failures.add("receipt_chain.sequence")  # the whole chain is in view: it starts at 1
    newest = rows[-1] if rows else None
    if (newest is None and count) or (newest is not None and (
            newest.get("sequence") != count or newest.get("row_hash") != head.get("head_row_hash"))):
        failures.add("receipt_chain.head")
    if isinstance(record.get("receipt_key_id"), str):
        # SECURITY: a signed decision's receipt head must carry a receipt-key signature that a
        # trusted key verifies; an unknown key id fails too (no trusted key, no proof).
        valid = signature_valid(head.get("signature"), head.get("key_id"),
                                receipt_head_payload(decision_id, count, head.get("head_row_hash"),
                                                     head.get("key_id")), anchors)
        if valid is not True:
            failures.add("receipt_chain.signature")
    return sorted(failures)


def _json_or_none(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
