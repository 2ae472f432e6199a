"""What a verifier proves of a record *remainder*: a stored record whose inputs were removed (issue
67; docs/privacy.md, "Retention"). Pure and offline, like the rest of `gate.verify`: the hosted
verify route and the packet verifier read it.

A remainder keeps the record's hashes and its receipt signature, and states under `inputs_removed`
by what it was reduced (`cause`, `ref`, `removed_at`) and the receipt's two inner hashes
(`action_binding_hash`, `evidence_manifest_hash`). So: its `receipt_hash` recomputes from what it
kept, the receipt signature over {decision_id, key_id, receipt_hash, record_hash} verifies, and its
`audit_chain` leaf is over both hashes. Its `record_hash` cannot be recomputed from a body that is
gone: the check is null (not false, not true), and a note says a kept copy verifies against it.
"""

from __future__ import annotations

from collections.abc import Mapping

from gate.keys.anchors import TrustAnchors
from gate.privacy.removal import MARKER, remainder_receipt_hash, removed
from gate.strict_json import JsonValue
from gate.verify.checks import check_audit_chain
from gate.verify.result import CheckResult, VerificationResult
from gate.verify.signatures import check_receipt_signature

REMOVED_KIND = "removed"
__all__ = ["MARKER", "NOTE", "REMOVED_KIND", "remainder_receipt_hash", "removed", "verify_remainder"]
NOTE = ("record_hash not recomputed: the record body was removed (inputs_removed); a kept copy of the "
        "record verifies against it")


def verify_remainder(record: Mapping[str, JsonValue], anchors: TrustAnchors,
                     public_key: str | None = None) -> VerificationResult:
    """The remainder's checks: `record_hash` null (noted), `receipt_hash` recomputed, the audit
    chain member's leaf over both hashes, the receipt signature over both."""
    stated, receipt = record.get("record_hash"), remainder_receipt_hash(record)
    found = (CheckResult(checks={"record_hash": None, "receipt_hash": receipt == record.get("receipt_hash")},
                         expected={"receipt_hash": receipt}, actual={"receipt_hash": record.get("receipt_hash")},
                         notes=(NOTE,))
             + CheckResult.single("audit_chain", check_audit_chain(record, stated, receipt)))
    signature = check_receipt_signature(record, anchors, public_key, stated, receipt)
    found += signature.result
    checks = dict(found.checks)
    integrity = checks["receipt_hash"] is True and checks["audit_chain"] is not False
    authentic = checks.get("receipt_signature") is True
    return VerificationResult(
        verified=integrity and authentic, integrity_valid=integrity, authenticity_valid=authentic,
        key_source=signature.key_source, checks=checks,
        failed_checks=tuple(sorted(name for name, ok in checks.items() if ok is False)),
        expected=dict(found.expected), actual=dict(found.actual), decision_id=record.get("decision_id"),
        record_kind=REMOVED_KIND, signature_algorithm=record.get("receipt_signature_algorithm"),
        key_id=record.get("receipt_key_id"), notes=found.notes)
