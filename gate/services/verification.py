"""Hosted verification of one stored decision: every offline check of `gate.verify` over the
stored record, plus what only the ledger can show.

`verify_stored_decision` is the one implementation behind `GET|POST /api/decision/{id}/verify`
and the workbench's fresh verification, so both name the same checks for the same row:

- the record verifies offline (hashes, receipt signature, attestations, audit-chain member);
- the row's indexed hashes are the ones the stored record recomputes to (`ledger_*_hash`);
- its chain link recomputes and sits under the chain head (`link_checks_for`), and that head
  names the chain's newest stored link and the stored Merkle tree (`chain_head`, its failures
  listed in `chain_failures`), and with the gate's checkpoint log the stored tree extends the
  newest checkpoint that log holds (`checkpoint_log`);
- the row binds its record: the record's decision id, scope and chain position are the row's,
  its indexed columns copy the record, and its seal recomputes and is signed
  (`decision_row_checks`);
- the rulebook snapshot it was decided under still hashes, from its stored body, to the
  record's rulebook hash (`rulebook_snapshot`);
- its lifecycle receipts recompute and form the signed per-decision receipt chain;
- a supplied record is the stored one (`matches_ledger`).

A decision whose inputs were removed (docs/privacy.md, "Retention") stores a remainder
(`gate.privacy.removal`): its `record_hash` cannot be recomputed from a body that is gone, so it
is checked as a hash the chain and the receipt signature bind (`record_hash` is null, not
false; the answer's `inputs_removed` says by what), its `receipt_hash` recomputes from the kept
hashes, the signature over both verifies, and every ledger check above runs as before. A caller
who kept the signed record supplies it: checked whole, and against the row's hashes.

SECURITY: the caller must have resolved `stored` within its own scope (another scope's row
never reaches this function); a failing ledger check makes `verified` false whatever the
offline checks say.
"""

from __future__ import annotations

import json
from typing import Any, Literal, TypedDict

from gate.keys.config import LiveSigning, SigningSetup
from gate.ledger import Ledger, StoredDecision
from gate.ledger.chains import ChainHeadRow, ChainLinkRow
from gate.privacy.removal import removed, summary
from gate.protocol.canonical import sha256_hex
from gate.protocol.records import record_hash
from gate.services.chains import (
    AuditChainService,
    chain_head_integrity,
    chain_tree_root,
    link_checks_for,
    rulebook_snapshot_check,
)
from gate.strict_json import JsonValue
from gate.verify import verify_record
from gate.verify.ledger_rows import (
    RECEIPT_CHAIN_WINDOW,
    decision_row_checks,
    receipt_chain_failures,
)
from gate.verify.remainder import verify_remainder
from gate.verify.result import VerificationReport


class _Removed(TypedDict, total=False):
    """What only some stored decisions answer: a remainder's removal (`gate.privacy.removal.summary`)
    and the rulebook snapshot's check (`SnapshotCheck` without `valid`, which is in `checks`)."""

    inputs_removed: dict[str, str]
    rulebook_snapshot: dict[str, str | None]


class StoredVerification(VerificationReport, _Removed):
    """`verify_stored_decision`: the record's offline verification with the ledger's checks added
    to `checks` and `failed_checks` (a failing one makes `integrity_valid` and `verified` false),
    then what only the ledger shows; the body of `GET|POST /api/decision/{id}/verify` without `ok`."""

    source: Literal["supplied", "ledger"]
    receipt_failures: list[str]
    ledger_column_mismatches: list[str]
    chain_failures: list[str]


def _head_checks(ledger: Ledger, audit: AuditChainService | None, link_row: ChainLinkRow | None,
                 head: ChainHeadRow | None) -> tuple[dict[str, bool], list[str]]:
    """`chain_head` (the head names the newest stored link and the stored tree) and, with the
    gate's checkpoint log, `checkpoint_log` (the stored tree extends the newest checkpoint it
    holds); with the named failures of both."""
    if link_row is None or head is None:
        return {"chain_head": False}, []
    failures = chain_head_integrity(ledger, link_row["chain_id"], head)
    checks = {"chain_head": not failures}
    if audit is not None and audit.checkpoint_log is not None and not failures:
        witnessed = audit.witness_failures(link_row["chain_id"], head["size"], chain_tree_root(head))[1]
        checks["checkpoint_log"] = not witnessed
        failures = failures + witnessed
    return checks, failures


def _hash_checks(stored: StoredDecision, record: dict[str, JsonValue], request: Any) -> dict[str, bool | None]:
    """The row's indexed hashes against its record (a remainder's stated `record_hash`, a whole
    record's recomputed one) and, while it is stored, its request."""
    whole = removed(record) is None
    return {
        "ledger_record_hash": stored.record_hash == record.get("record_hash")
        and (not whole or stored.record_hash == record_hash(record)),
        "ledger_receipt_hash": stored.receipt_hash == record.get("receipt_hash"),
        "ledger_input_hash": stored.input_hash == record.get("input_hash")
        and (request is None or stored.input_hash == sha256_hex(request)),
    }


def verify_stored_decision(ledger: Ledger, lifecycle: Any, signing: SigningSetup | LiveSigning, stored: StoredDecision, *,
                           supplied: dict[str, Any] | None = None, original: dict[str, Any] | None = None,
                           public_key: str | None = None, audit: AuditChainService | None = None) -> StoredVerification:
    """The verification body (without `ok`) for a stored decision, or for a `supplied` record
    checked against it; `original` overrides the stored request for the input-hash check;
    `audit` (the gate's chain service) adds the check against its checkpoint log."""
    anchors = signing.trust_anchors()
    decision_id = stored.decision_id
    stored_record = json.loads(stored.record_json)
    stored_request = json.loads(stored.request_json)
    gone = removed(stored_record)
    record = supplied if supplied is not None else stored_record
    if gone is None or supplied is not None:
        result = verify_record(record, anchors=anchors, request_public_key=public_key,
                               original_input=original if original is not None or gone else stored_request)
    else:
        result = verify_remainder(stored_record, anchors, public_key)
    report, extra = result.to_dict(), _Removed()
    if gone is not None:
        extra["inputs_removed"] = summary(gone)
        if supplied is not None and record_hash(supplied) == stored.record_hash:
            stored_record = supplied  # the body the caller kept is the one the row's hashes name
    with ledger.one_snapshot():  # the chain head, links, receipts and their heads as of one instant
        ledger_checks = _hash_checks(stored, stored_record, None if gone else stored_request)
        ledger_checks.update(link_checks_for(ledger, stored_record))
        link_row = ledger.chain_link_for(decision_id)
        chain_head = ledger.chain_head(link_row["chain_id"]) if link_row else None
        head_checks, head_failures = _head_checks(ledger, audit, link_row, chain_head)
        ledger_checks.update(head_checks)
        row_checks, mismatched = decision_row_checks(decision_id, stored.columns, stored_record, link_row,
                                                     chain_head, anchors)
        ledger_checks.update(row_checks)
        snapshot = rulebook_snapshot_check(ledger, stored.scope, stored_record)
        if snapshot is not None:
            ledger_checks["rulebook_snapshot"] = snapshot["valid"]
            extra["rulebook_snapshot"] = {name: snapshot[name] for name in ("rulebook_id", "version", "expected", "actual")}
        receipt_failures = lifecycle.integrity_failures(decision_id, stored_record)
        ledger_checks["lifecycle_receipts"] = not receipt_failures
        chained, total = lifecycle.store.chained(decision_id, limit=RECEIPT_CHAIN_WINDOW)
        chain_failures = receipt_chain_failures(decision_id, stored.scope, chained, total,
                                                lifecycle.store.receipt_head(decision_id), stored_record, anchors)
        ledger_checks["receipt_chain"] = not chain_failures
    if supplied is not None:
        ledger_checks["matches_ledger"] = (supplied.get("record_hash") == stored.record_hash
                                           and record_hash(supplied) == stored.record_hash)
    body: StoredVerification = {  # the report's members in place, then the ledger's
        **report, "decision_id": decision_id, "source": "supplied" if supplied is not None else "ledger", **extra,
        "checks": {**report["checks"], **ledger_checks},
        "failed_checks": sorted(set(report["failed_checks"]) | {name for name, ok in ledger_checks.items() if ok is False}),
        "receipt_failures": sorted(set(receipt_failures) | set(chain_failures)),
        "ledger_column_mismatches": mismatched, "chain_failures": head_failures,
    }
    if any(ok is False for ok in ledger_checks.values()):
        body["integrity_valid"] = False
        body["verified"] = False
    return body
