"""`verify_record`: every step over one Decision Record, in order, and the verify-endpoint body."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gate.advisory.record import (
    ADVISORY_RECORD_ALLOWED,
    ADVISORY_RECORD_REQUIRED,
    advisory_output_hash,
    is_advisory_record,
    reading_consistent,
)
from gate.errors import GateError
from gate.protocol.canonical import sha256_hex
from gate.protocol.confidence import confidence_hash
from gate.protocol.records import receipt_hash, record_hash, rulebook_output_hash
from gate.verify.anchors import TrustAnchors
from gate.verify.attestations import (
    _check_registry,
    _check_rulebook_attestation,
    _check_trusted_adapter,
)
from gate.verify.checks import (
    _check_audit_chain,
    _check_integrity_block,
    _check_policy_consistency,
    _check_urls,
    _digest_equal,
    _safe,
)
from gate.verify.result import (
    AUTHENTICITY_CHECKS,
    DIAGNOSTIC_CHECKS,
    INTEGRITY_CHECKS,
    VerificationResult,
)
from gate.verify.signatures import (
    _check_audit_chain_signature,
    _check_confidence_signature,
    _check_receipt_signature,
)
from gate.vocabulary import COMPACT_FOR_VERDICT


class VerificationInputError(GateError):
    """The thing to verify is not a JSON object (or a verify body lacks one)."""

    def __init__(self, message: str) -> None:
        super().__init__("VERIFY_RECORD_INVALID", message)


# Members `gate.protocol.records.build_rulebook_record` always writes, and those it may add.
RULEBOOK_RECORD_REQUIRED = frozenset({
    "decision_protocol_version", "decision_record_version", "status", "c", "v", "verdict",
    "application_verdict", "reason_code", "matched_rule_id", "engine", "evaluator_version", "evaluation",
    "rulebook", "rulebook_contract", "runtime_binding", "rulebook_registry", "rulebook_attestation",
    "request_id", "decision_id", "evidence", "evidence_manifest", "action", "action_binding", "policy_id",
    "policy_version", "policy_hash", "source_hash", "policy_bundle", "policy_bundle_hash", "input_hash",
    "output_hash", "record_hash", "receipt_hash", "replay_url", "verify_url", "decision_url", "integrity",
    "created_at",
})
RULEBOOK_RECORD_ALLOWED = RULEBOOK_RECORD_REQUIRED | {
    "idempotency_key", "missing_fields", "invalid_fields", "trusted_adapter", "adapter_facts",
    "receipt_key_id", "receipt_signature", "receipt_signature_algorithm", "receipt_public_key_fingerprint",
    "decision_confidence", "confidence_hash", "confidence_signature", "audit_chain", "audit_chain_signature",
}


def input_hash_of(original_input: Any) -> str:
    """sha256(canonical(request body without `response_view`))."""
    if isinstance(original_input, Mapping):
        original_input = {k: v for k, v in original_input.items() if k != "response_view"}
    return sha256_hex(original_input)


def verify_record(
    record: Any,
    *,
    anchors: TrustAnchors | None = None,
    original_input: Any = None,
    request_public_key: str | None = None,
) -> VerificationResult:
    """Verify a full Decision Record (legacy or rulebook mode). See the `gate.verify` docstring."""
    if not isinstance(record, Mapping):
        raise VerificationInputError("the record to verify must be a JSON object")
    anchors = anchors or TrustAnchors()
    checks: dict[str, bool | None] = dict.fromkeys((*INTEGRITY_CHECKS, *AUTHENTICITY_CHECKS, *DIAGNOSTIC_CHECKS))
    expected: dict[str, Any] = {}
    actual: dict[str, Any] = {}
    notes: list[str] = []
    get = record.get
    rulebook_mode = "rulebook_attestation" in record or "rulebook" in record
    advisory_mode = not rulebook_mode and is_advisory_record(record)

    # 0. A rulebook record is a closed object: every member the gate always writes is present
    #    and nothing unknown was added (so deleting an unhashed member, such as the evaluation
    #    trace, or renaming one, is caught by name).
    if rulebook_mode:
        present = set(record)
        checks["record_members"] = RULEBOOK_RECORD_REQUIRED <= present <= RULEBOOK_RECORD_ALLOWED
        if not checks["record_members"]:
            expected["record_members"] = sorted(RULEBOOK_RECORD_REQUIRED - present)
            actual["record_members"] = sorted(present - RULEBOOK_RECORD_ALLOWED)
    elif advisory_mode:
        # An advisory record is closed the same way (gate.advisory.record).
        present = set(record)
        checks["record_members"] = ADVISORY_RECORD_REQUIRED <= present <= ADVISORY_RECORD_ALLOWED
        if not checks["record_members"]:
            expected["record_members"] = sorted(ADVISORY_RECORD_REQUIRED - present)
            actual["record_members"] = sorted(present - ADVISORY_RECORD_ALLOWED)

    # 1. record_hash, then receipt_hash over the *recomputed* record_hash: every expected
    #    value derives from the record's content, never from a stated hash.
    expected["record_hash"] = _safe(record_hash, record)
    actual["record_hash"] = get("record_hash")
    checks["record_hash"] = _digest_equal(expected["record_hash"], actual["record_hash"])
    expected["receipt_hash"] = (
        _safe(receipt_hash, record, expected["record_hash"]) if expected["record_hash"] else None
    )
    actual["receipt_hash"] = get("receipt_hash")
    checks["receipt_hash"] = _digest_equal(expected["receipt_hash"], actual["receipt_hash"])

    # 2. input_hash against the original request, when supplied.
    if original_input is not None:
        expected["input_hash"] = _safe(input_hash_of, original_input)
        actual["input_hash"] = get("input_hash")
        checks["input_hash"] = _digest_equal(expected["input_hash"], actual["input_hash"])
    else:
        notes.append("input_hash not checked: original input not supplied")

    # 3. output_hash (rulebook records carry the evaluation it is computed from).
    if rulebook_mode and "evaluation" in record:
        expected["output_hash"] = _safe(rulebook_output_hash, record)
        actual["output_hash"] = get("output_hash")
        checks["output_hash"] = _digest_equal(expected["output_hash"], actual["output_hash"])
    elif advisory_mode:
        # The advisory members outside the envelope (contract, votes, c/v) are bound here.
        expected["output_hash"] = _safe(advisory_output_hash, record)
        actual["output_hash"] = get("output_hash")
        checks["output_hash"] = _digest_equal(expected["output_hash"], actual["output_hash"])

    # 4. compact verdict.
    if "c" in record or "v" in record:
        verdict = get("verdict")
        ok = isinstance(verdict, str) and get("c") == COMPACT_FOR_VERDICT.get(verdict)
        if rulebook_mode or "application_verdict" in record:
            ok = ok and get("v") == get("application_verdict")
        if advisory_mode:  # an advisory approval never reads as yes (gate.advisory.record.READING)
            ok = ok and reading_consistent(record)
        checks["compact_verdict"] = ok

    # 5. integrity block mirrors the top level.
    checks["integrity_block"] = _check_integrity_block(record)

    # 6. URLs not covered by record_hash.
    checks["urls"] = _check_urls(record)

    # 7. policy identity consistency.
    checks["policy_consistency"] = _check_policy_consistency(record, rulebook_mode)

    # 8. rulebook attestation.
    _check_rulebook_attestation(record, anchors, original_input, checks, expected, actual, notes)

    # 9. rulebook registry and its attestation.
    _check_registry(record, anchors, checks, expected, actual, notes)

    # 9b. trusted adapter lineage (adapter mode): block shape, H(adapter_facts) = output_hash,
    #     binding, and the original invocation when supplied.
    if rulebook_mode:
        _check_trusted_adapter(record, original_input, checks, expected, actual, notes)

    # 10. the confidence block (outside record_hash): its hash recomputed, the top-level copy
    #     equal to it, and (step 12) its own signature.
    if "decision_confidence" in record or "confidence_hash" in record:
        confidence = get("decision_confidence")
        expected["confidence_hash"] = _safe(confidence_hash, confidence) if isinstance(confidence, Mapping) else None
        actual["confidence_hash"] = get("confidence_hash")
        checks["confidence_hash"] = bool(
            isinstance(confidence, Mapping)
            and _digest_equal(expected["confidence_hash"], confidence.get("confidence_hash"))
            and _digest_equal(expected["confidence_hash"], get("confidence_hash")))
    _check_confidence_signature(record, anchors, checks)

    # 11. the audit_chain member (outside record_hash) and its own signature.
    _check_audit_chain(record, expected["record_hash"], expected["receipt_hash"], checks)
    _check_audit_chain_signature(record, anchors, checks)

    # 12. receipt signature against trust anchors.
    key_source = _check_receipt_signature(
        record, anchors, request_public_key, expected["record_hash"], expected["receipt_hash"], checks, notes
    )

    failed = tuple(sorted(n for n, v in checks.items() if v is False and n not in DIAGNOSTIC_CHECKS))
    integrity_valid = (
        checks["record_hash"] is True
        and checks["receipt_hash"] is True
        and all(checks[n] is not False for n in INTEGRITY_CHECKS)
    )
    authenticity_valid = checks["receipt_signature"] is True and all(
        checks[n] is not False for n in AUTHENTICITY_CHECKS
    )
    return VerificationResult(
        verified=integrity_valid and authenticity_valid,
        integrity_valid=integrity_valid,
        authenticity_valid=authenticity_valid,
        key_source=key_source,
        checks=checks,
        failed_checks=failed,
        expected=expected,
        actual=actual,
        decision_id=get("decision_id"),
        record_kind="rulebook" if rulebook_mode else "advisory" if advisory_mode else "legacy",
        signature_algorithm=get("receipt_signature_algorithm"),
        key_id=get("receipt_key_id"),
        notes=tuple(notes),
    )


def verify_request_body(body: Any, *, anchors: TrustAnchors | None = None) -> VerificationResult:
    """Verify a verify-endpoint body ``{record, input?, public_key?}``.

    `public_key` is used only for the untrusted diagnostic check.
    """
    if not isinstance(body, Mapping):
        raise VerificationInputError("the verify body must be a JSON object")
    record = body.get("record")
    if not isinstance(record, Mapping):
        raise VerificationInputError("the verify body must carry 'record' as a JSON object")
    public_key = body.get("public_key")
    return verify_record(
        record,
        anchors=anchors,
        original_input=body.get("input"),
        request_public_key=public_key if isinstance(public_key, str) else None,
    )
