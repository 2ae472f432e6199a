"""`verify_record`: every step over one Decision Record, in order, and the verify-endpoint body.

Each step is a check function that returns what it found as a value (a `CheckResult` of named
checks, expected and actual values and notes, or one `CheckValue`); `_record_checks` lists them
in the order of docs/verification.md and `_conclude` turns the merged checks into the result.
The key-free steps live in `gate.verify.checks`, the rulebook ones in `gate.verify.attestations`,
the signature ones in `gate.verify.signatures`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gate.errors import CodedError
from gate.keys.anchors import TrustAnchors
from gate.keys.detached import _digest_equal, _safe
from gate.protocol.advisory_record import (
    ADVISORY_RECORD_ALLOWED,
    ADVISORY_RECORD_REQUIRED,
    advisory_output_hash,
    carries_advisory_members,
    reading_consistent,
)
from gate.protocol.canonical import sha256_hex
from gate.protocol.confidence import confidence_hash
from gate.protocol.records import receipt_hash, record_hash, rulebook_output_hash
from gate.protocol.release_arm import release_arm_hash
from gate.protocol.types import DECISION_RECORD_MEMBERS, DECISION_RECORD_REQUIRED
from gate.strict_json import JsonValue
from gate.verify.attestations import (
    check_registry,
    check_rulebook_attestation,
    check_trusted_adapter,
)
from gate.verify.checks import (
    check_audit_chain,
    check_integrity_block,
    check_policy_consistency,
    check_urls,
    digest_check,
)
from gate.verify.result import (
    AUTHENTICITY_CHECKS,
    DIAGNOSTIC_CHECKS,
    INTEGRITY_CHECKS,
    NOTHING_CHECKED,
    CheckName,
    CheckResult,
    CheckValue,
    VerificationResult,
)
from gate.verify.signatures import (
    check_audit_chain_signature,
    check_confidence_signature,
    check_receipt_signature,
    check_release_arm_signature,
)
from gate.vocabulary import COMPACT_FOR_VERDICT, is_verdict


class VerificationInputError(CodedError):
    """The thing to verify is not a JSON object (or a verify body lacks one)."""

    CODE = "VERIFY_RECORD_INVALID"


# The members of a rulebook record (`gate.protocol.types.RecordMembers`): those the builder
# always writes, and those it may add. The verifier also requires `rulebook_registry`: the gate
# registers every rulebook it decides under, so a stored record always names its entry.
RULEBOOK_RECORD_REQUIRED = DECISION_RECORD_REQUIRED | {"rulebook_registry"}
RULEBOOK_RECORD_ALLOWED = DECISION_RECORD_MEMBERS


def input_hash_of(original_input: Any) -> str:
    """sha256(canonical(request body without `response_view`))."""
    if isinstance(original_input, Mapping):
        original_input = {k: v for k, v in original_input.items() if k != "response_view"}
    return sha256_hex(original_input)


RULEBOOK, ADVISORY, LEGACY = "rulebook", "advisory", "legacy"


def record_kind(record: Mapping[str, JsonValue]) -> str:
    """`rulebook` (it has a rulebook or its attestation), `advisory`, or `legacy`."""
    if "rulebook_attestation" in record or "rulebook" in record:
        return RULEBOOK
    return ADVISORY if carries_advisory_members(record) else LEGACY


@dataclass(frozen=True, slots=True)
class RecomputedHashes:
    """`record_hash` and `receipt_hash` recomputed from the record's content (None when it
    cannot be hashed). The receipt hash is over the recomputed record hash, never the stated one."""

    record_hash: str | None
    receipt_hash: str | None


def recompute_hashes(record: Mapping[str, JsonValue]) -> RecomputedHashes:
    digest = _safe(record_hash, record)
    return RecomputedHashes(digest, _safe(receipt_hash, record, digest) if digest else None)


def check_members(record: Mapping[str, JsonValue], kind: str) -> CheckResult:
    """A rulebook or advisory record is a closed object: every member the gate always writes is
    present and nothing unknown was added (so deleting an unhashed member, such as the evaluation
    trace, or renaming one, is caught by name)."""
    if kind == RULEBOOK:
        required, allowed = RULEBOOK_RECORD_REQUIRED, RULEBOOK_RECORD_ALLOWED
    elif kind == ADVISORY:
        required, allowed = ADVISORY_RECORD_REQUIRED, ADVISORY_RECORD_ALLOWED
    else:
        return NOTHING_CHECKED
    present = set(record)
    if required <= present <= allowed:
        return CheckResult.single("record_members", True)
    return CheckResult(checks={"record_members": False}, expected={"record_members": sorted(required - present)},
                       actual={"record_members": sorted(present - allowed)})


def check_record_hashes(record: Mapping[str, JsonValue], hashes: RecomputedHashes) -> CheckResult:
    """The stated `record_hash` and `receipt_hash` against the recomputed ones."""
    return (digest_check("record_hash", hashes.record_hash, record.get("record_hash"))
            + digest_check("receipt_hash", hashes.receipt_hash, record.get("receipt_hash")))


def check_input_hash(record: Mapping[str, JsonValue], original_input: Any) -> CheckResult:
    """`input_hash` against the original request, when supplied."""
    if original_input is None:
        return CheckResult(notes=("input_hash not checked: original input not supplied",))
    return digest_check("input_hash", _safe(input_hash_of, original_input), record.get("input_hash"))


def check_output_hash(record: Mapping[str, JsonValue], kind: str) -> CheckResult:
    """`output_hash` recomputed: a rulebook record's from its evaluation; an advisory record's
    from the advisory members outside the envelope (contract, votes, c/v)."""
    if kind == RULEBOOK and "evaluation" in record:
        return digest_check("output_hash", _safe(rulebook_output_hash, record), record.get("output_hash"))
    if kind == ADVISORY:
        return digest_check("output_hash", _safe(advisory_output_hash, record), record.get("output_hash"))
    return NOTHING_CHECKED


def check_compact_verdict(record: Mapping[str, JsonValue], kind: str) -> CheckValue:
    """`c` is the compact form of `verdict`, `v` the application verdict; an advisory approval
    never reads as yes (gate.protocol.advisory_record.READING)."""
    if "c" not in record and "v" not in record:
        return None
    verdict = record.get("verdict")
    ok = isinstance(verdict, str) and record.get("c") == (COMPACT_FOR_VERDICT[verdict] if is_verdict(verdict) else None)
    if kind == RULEBOOK or "application_verdict" in record:
        ok = ok and record.get("v") == record.get("application_verdict")
    if kind == ADVISORY:
        ok = ok and reading_consistent(record)
    return ok


def check_confidence_hash(record: Mapping[str, JsonValue]) -> CheckResult:
    """The confidence block (outside record_hash): its hash recomputed, and both the block's and
    the top-level `confidence_hash` equal to it."""
    if "decision_confidence" not in record and "confidence_hash" not in record:
        return NOTHING_CHECKED
    confidence = record.get("decision_confidence")
    digest = _safe(confidence_hash, confidence) if isinstance(confidence, Mapping) else None
    ok = bool(isinstance(confidence, Mapping)
              and _digest_equal(digest, confidence.get("confidence_hash"))
              and _digest_equal(digest, record.get("confidence_hash")))
    return CheckResult(checks={"confidence_hash": ok}, expected={"confidence_hash": digest},
                       actual={"confidence_hash": record.get("confidence_hash")})


def check_release_arm_hash(record: Mapping[str, JsonValue]) -> CheckResult:
    """The release arm block (outside record_hash): its stated hash recomputed."""
    if "release_arm" not in record and "release_arm_signature" not in record:
        return NOTHING_CHECKED
    member = record.get("release_arm")
    digest = _safe(release_arm_hash, member) if isinstance(member, Mapping) else None
    ok = bool(isinstance(member, Mapping) and _digest_equal(digest, member.get("release_arm_hash")))
    return CheckResult(checks={"release_arm_hash": ok}, expected={"release_arm_hash": digest},
                       actual={"release_arm_hash": member.get("release_arm_hash") if isinstance(member, Mapping)
                               else None})


def _record_checks(record: Mapping[str, JsonValue], kind: str, hashes: RecomputedHashes, anchors: TrustAnchors,
                   original_input: Any) -> CheckResult:
    """Every key-free step and the attestation steps, in order (docs/verification.md)."""
    return (
        check_members(record, kind)
        + check_record_hashes(record, hashes)
        + check_input_hash(record, original_input)
        + check_output_hash(record, kind)
        + CheckResult.single("compact_verdict", check_compact_verdict(record, kind))
        + CheckResult.single("integrity_block", check_integrity_block(record))
        + CheckResult.single("urls", check_urls(record))
        + CheckResult.single("policy_consistency", check_policy_consistency(record, kind == RULEBOOK))
        + check_rulebook_attestation(record, anchors, original_input)
        + check_registry(record, anchors)
        + (check_trusted_adapter(record, original_input) if kind == RULEBOOK else NOTHING_CHECKED)
        + check_confidence_hash(record)
        + CheckResult.single("confidence_signature", check_confidence_signature(record, anchors))
        + check_release_arm_hash(record)
        + CheckResult.single("release_arm_signature", check_release_arm_signature(record, anchors))
        + CheckResult.single("audit_chain", check_audit_chain(record, hashes.record_hash, hashes.receipt_hash))
        + CheckResult.single("audit_chain_signature", check_audit_chain_signature(record, anchors))
    )


def _conclude(record: Mapping[str, JsonValue], kind: str, found: CheckResult, key_source: str | None) -> VerificationResult:
    """The verdicts over all checks: integrity, authenticity, and the failed checks by name."""
    checks: dict[CheckName, CheckValue] = dict.fromkeys((*INTEGRITY_CHECKS, *AUTHENTICITY_CHECKS, *DIAGNOSTIC_CHECKS))
    checks.update(found.checks)
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
        expected=dict(found.expected),
        actual=dict(found.actual),
        decision_id=record.get("decision_id"),
        record_kind=kind,
        signature_algorithm=record.get("receipt_signature_algorithm"),
        key_id=record.get("receipt_key_id"),
        notes=found.notes,
    )


def verify_record(
    record: Any,
    *,
    anchors: TrustAnchors | None = None,
    original_input: Any = None,
    request_public_key: str | None = None,
) -> VerificationResult:
    """Verify a full Decision Record (legacy, advisory or rulebook mode). See the `gate.verify`
    docstring; each step is a check function above returning its result as a value."""
    if not isinstance(record, Mapping):
        raise VerificationInputError("the record to verify must be a JSON object")
    anchors = anchors or TrustAnchors()
    kind = record_kind(record)
    hashes = recompute_hashes(record)
    found = _record_checks(record, kind, hashes, anchors, original_input)
    receipt = check_receipt_signature(record, anchors, request_public_key, hashes.record_hash, hashes.receipt_hash)
    found += receipt.result
    return _conclude(record, kind, found, receipt.key_source)


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
