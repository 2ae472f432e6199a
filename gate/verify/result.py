"""What `verify_record` reports: the check names, by what they establish, what one step finds
(`CheckResult`) and the result value (`VerificationResult`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from gate.vocabulary import VERIFICATION_RESULT_VERSION

IntegrityCheck = Literal[
    "record_members", "record_hash", "receipt_hash", "input_hash", "output_hash", "compact_verdict",
    "integrity_block", "urls", "policy_consistency", "policy_bundle_hash", "rulebook_attestation_bundle_hash",
    "rulebook_attestation_consistency", "rulebook_attestation_input_hash", "rulebook_registry_consistency",
    "registry_attestation_hash", "trusted_adapter_lineage", "confidence_hash", "release_arm_hash", "audit_chain",
]
AuthenticityCheck = Literal[
    "receipt_signature", "audit_chain_signature", "confidence_signature", "release_arm_signature",
    "receipt_public_key_fingerprint", "rulebook_attestation_signature", "registry_attestation_signature",
]
DiagnosticCheck = Literal["signature_matches_untrusted_key", "rulebook_attestation_signature_matches_untrusted_key"]
CheckName = IntegrityCheck | AuthenticityCheck | DiagnosticCheck
"""The name of one check of `verify_record`: every name is always present in its `checks`."""
Compared = CheckName | Literal["adapter_facts_hash"]
"""A name in `expected` / `actual`: a check's, or `adapter_facts_hash` (the lineage check's facts hash)."""

# Check names, by what they establish. Every name is always present in `checks`.
INTEGRITY_CHECKS: tuple[IntegrityCheck, ...] = (
    "record_members",
    "record_hash",
    "receipt_hash",
    "input_hash",
    "output_hash",
    "compact_verdict",
    "integrity_block",
    "urls",
    "policy_consistency",
    "policy_bundle_hash",
    "rulebook_attestation_bundle_hash",
    "rulebook_attestation_consistency",
    "rulebook_attestation_input_hash",
    "rulebook_registry_consistency",
    "registry_attestation_hash",
    "trusted_adapter_lineage",
    "confidence_hash",
    "release_arm_hash",
    "audit_chain",
)
AUTHENTICITY_CHECKS: tuple[AuthenticityCheck, ...] = (
    "receipt_signature",
    "audit_chain_signature",
    "confidence_signature",
    "release_arm_signature",
    "receipt_public_key_fingerprint",
    "rulebook_attestation_signature",
    "registry_attestation_signature",
)
# Informational only: never part of integrity, authenticity or failed_checks.
DIAGNOSTIC_CHECKS: tuple[DiagnosticCheck, ...] = (
    "signature_matches_untrusted_key",
    "rulebook_attestation_signature_matches_untrusted_key",
)


CheckValue = bool | None
"""One check: True (holds), False (fails) or None (not applicable, or not checkable)."""


@dataclass(frozen=True, slots=True)
class CheckResult:
    """What one verification step found: its check values, the expected and actual values it
    compared, and its notes. Each step returns one; `verify_record` merges them in step order."""

    checks: Mapping[CheckName, CheckValue] = field(default_factory=dict)
    expected: Mapping[Compared, object] = field(default_factory=dict)  # recomputed values
    actual: Mapping[Compared, object] = field(default_factory=dict)  # what the record states (untrusted)
    notes: tuple[str, ...] = ()

    @classmethod
    def single(cls, name: CheckName, value: CheckValue, *notes: str) -> CheckResult:
        """One named check, with optional notes."""
        return cls(checks={name: value}, notes=notes)

    def __add__(self, other: CheckResult) -> CheckResult:
        """Both results, `other`'s values after (and over) this one's."""
        return CheckResult(
            checks={**self.checks, **other.checks},
            expected={**self.expected, **other.expected},
            actual={**self.actual, **other.actual},
            notes=self.notes + other.notes,
        )


NOTHING_CHECKED = CheckResult()


class VerificationReport(TypedDict):
    """`VerificationResult.to_dict()`: the result as JSON (the verify endpoint's body without `ok`,
    the `record` member of a packet's verification, `gate verify --json`), in this member order."""

    verification_version: str
    verified: bool
    integrity_valid: bool
    authenticity_valid: bool
    key_source: str | None
    decision_id: Any  # as the record states it (untrusted)
    record_kind: str
    signature_algorithm: Any  # as the record states it (untrusted)
    key_id: Any  # as the record states it (untrusted)
    checks: dict[str, CheckValue]  # a `CheckName` each; the hosted verification adds the ledger's
    failed_checks: list[str]  # as `checks`
    expected: dict[Compared, object]
    actual: dict[Compared, object]
    notes: list[str]


@dataclass(frozen=True, slots=True)
class VerificationResult:
    verified: bool
    integrity_valid: bool
    authenticity_valid: bool
    key_source: str | None
    checks: dict[CheckName, CheckValue]
    failed_checks: tuple[CheckName, ...]
    expected: dict[Compared, object]
    actual: dict[Compared, object]
    decision_id: Any = None
    record_kind: str = "legacy"
    signature_algorithm: Any = None
    key_id: Any = None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> VerificationReport:
        return {
            "verification_version": VERIFICATION_RESULT_VERSION,
            "verified": self.verified,
            "integrity_valid": self.integrity_valid,
            "authenticity_valid": self.authenticity_valid,
            "key_source": self.key_source,
            "decision_id": self.decision_id,
            "record_kind": self.record_kind,
            "signature_algorithm": self.signature_algorithm,
            "key_id": self.key_id,
            "checks": dict(self.checks.items()),
            "failed_checks": list(self.failed_checks),
            "expected": dict(self.expected),
            "actual": dict(self.actual),
            "notes": list(self.notes),
        }
