"""The `decision_packet_v1` format shared by the builder and the verifier: member and check names,
the fixed verification hints, the errors, and small value helpers."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeGuard

from gate.chain.links import LINK_HASH_MEMBERS
from gate.chain.merkle import CHECKPOINT_BODY_MEMBERS
from gate.errors import CodedError, LedgerUnavailable

# One constant-time digest compare (beside the detached signatures) and one canonical equality
# for records and packets.
from gate.keys.detached import _digest_equal as _digest_equal
from gate.protocol.canonical import CanonicalJSONError, canonical_text, sha256_hex
from gate.strict_json import JsonValue
from gate.verify import VerificationInputError
from gate.verify.checks import _canon_equal as _canon_equal
from gate.vocabulary import DECISION_CONFIDENCE_VERSION

LIMIT_MIN, LIMIT_MAX, LIMIT_DEFAULT = 1, 1000, 20

# The packet's intelligence part (reference facts §6): `policy_intelligence.<section>` holds one
# sealed report of the record's policy, exactly as its endpoint serves it: its version label
# first and `<kind>_hash` = sha256(report without that member) last. The reference verifier
# reads `effectiveness` and `anomalies`; the others sit beside them.
@dataclass(frozen=True)
class IntelligenceSection:
    kind: str             # effectiveness | anomaly | confidence | benchmark
    version_member: str
    version: str

    @property
    def hash_member(self) -> str:
        return f"{self.kind}_hash"


INTELLIGENCE_SECTIONS: dict[str, IntelligenceSection] = {
    "effectiveness": IntelligenceSection("effectiveness", "decision_effectiveness_report_version",
                                         "decision_effectiveness_report_v1"),
    "anomalies": IntelligenceSection("anomaly", "decision_anomaly_report_version", "decision_anomaly_report_v1"),
    "confidence": IntelligenceSection("confidence", "decision_confidence_version", DECISION_CONFIDENCE_VERSION),
    "benchmarks": IntelligenceSection("benchmark", "decision_benchmark_version", "decision_benchmark_v1"),
}
REPORT_TYPES = tuple(section.kind for section in INTELLIGENCE_SECTIONS.values())

# Top-level members, in the order the builder writes them.
_REQUIRED_MEMBERS = (
    "decision_packet_version",
    "decision_id",
    "record_hash",
    "receipt_hash",
    "exported_at",
    "packet_manifest",
    "decision_record",
    "execution_receipts",
    "outcome_records",
    "crm_sync_records",
    "packet_hash",
)
_OPTIONAL_MEMBERS = ("original_input", "policy_intelligence", "audit_chain", "receipt_chain_head",
                     "chain_consistency", "hold_events", "hold_commitment")
PACKET_MEMBERS = frozenset(_REQUIRED_MEMBERS + _OPTIONAL_MEMBERS)

_OPTION_NAMES = ("include_input", "include_chain", "include_intelligence",
                 "execution_limit", "outcome_limit", "chain_limit")
_COMPONENT_NAMES = ("decision_record", "original_input", "execution_receipts", "outcome_records",
                    "crm_sync_records", "audit_chain_links", "intelligence_reports")
_LISTED = ("execution_receipts", "outcome_records", "crm_sync_records")
# The option that limits each listed part. The spec has three limits; CRM sync records are
# write receipts of the action like execution receipts and share `execution_limit`.
_LIMIT_OF = {"execution_receipts": "execution_limit", "outcome_records": "outcome_limit",
             "crm_sync_records": "execution_limit"}
_MANIFEST_MEMBERS = frozenset({"canonicalization", "hash_algorithm", "options", "components", "totals", "truncated"})
_CHAIN_MEMBERS = frozenset({
    "chain_id", "decision_chain_version", "merkle_strategy", "chain_size", "merkle_root",
    "head_link_hash", "links", "window", "record_position", "inclusion_proof", "checkpoint",
    "verification_hints",
})
_WINDOW_MEMBERS = frozenset({"first_position", "last_position", "previous_link_hash", "previous_merkle_root"})
_PROOF_MEMBERS = frozenset({"tree_algorithm", "leaf_index", "tree_size", "leaf_hash", "proof"})
_LINK_MEMBERS = frozenset(LINK_HASH_MEMBERS) | {"link_hash"}
_CHECKPOINT_MEMBERS = frozenset(CHECKPOINT_BODY_MEMBERS) | {"checkpoint_hash", "signature"}
_CHECKPOINT_SIGNATURE_MEMBERS = frozenset({"algorithm", "key_id", "public_key_fingerprint", "signature"})
# verify_checkpoint checks, split into integrity (content) and authenticity (key, signature).
_CHECKPOINT_INTEGRITY = ("members", "checkpoint_version", "algorithms", "tree_size", "root_hash", "checkpoint_hash")
_CHECKPOINT_AUTHENTICITY = ("public_key", "signature_algorithm", "public_key_fingerprint", "signature")

# Fixed prose (part of the v1 format: a verifier compares it exactly, so it cannot be edited
# into misleading instructions).
VERIFICATION_HINTS = {
    "links": "Recompute leaf_hash, merkle_root and link_hash of every link (gate.chain.links.verify_links) "
             "starting from window.previous_link_hash and window.previous_merkle_root; positions run "
             "from window.first_position to window.last_position without a gap.",
    "record_link": "The link at record_position names the record's decision_id, record_hash and "
                   "receipt_hash and equals the record's own audit_chain member.",
    "head": "When window.last_position equals chain_size, the last link's link_hash and merkle_root "
            "are head_link_hash and merkle_root.",
    "inclusion_proof": "RFC 6962: verify_inclusion(leaf_index, tree_size, leaf_hash, proof, "
                       "checkpoint.root_hash) with leaf_hash recomputed from the record and "
                       "leaf_index = record_position - 1.",
    "checkpoint": "Recompute checkpoint_hash and check its Ed25519 signature with a key you already "
                  "trust, chosen by signature.key_id; never with a key found in the packet. "
                  "checkpoint.tree_size equals chain_size.",
}

# Every named check; dynamic per-item names (`execution_receipts[2].execution_hash`,
# `record.receipt_signature`, ...) are added when they fail.
PACKET_CHECKS = (
    "packet_members",
    "packet_hash",
    "packet_version",
    "packet_manifest",
    "exported_at",
    "original_input",
    "record",
    "record_audit_chain",
    "execution_receipts",
    "outcome_records",
    "crm_sync_records",
    "receipt_chain_head",
    "receipt_chain_head_signature",
    "hold_events",
    "hold_events_signature",
    "hold_commitment",
    "hold_commitment_signature",
    "intelligence_reports",
    "audit_chain",
    "audit_chain.window",
    "audit_chain.links",
    "audit_chain.record_link",
    "audit_chain.head",
    "audit_chain.inclusion_proof",
    "audit_chain.checkpoint",
    "audit_chain.checkpoint_signature",
    "chain_consistency",
    "checkpoint_log",
    "hold_checkpoint_log",
)
_AUTHENTICITY = frozenset({"audit_chain.checkpoint_signature", "receipt_chain_head_signature", "hold_events_signature",
                           "hold_commitment_signature"})
# The decision's signed receipt head (gate.chain.rowseal): how many lifecycle receipts it has and the
# newest receipt row's hash, signed with the receipt key when exported.
RECEIPT_HEAD_MEMBERS = ("receipt_chain_version", "decision_id", "count", "head_row_hash", "key_id", "signature")

_HEX64 = re.compile(r"[0-9a-f]{64}")
_ISO_MS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")


class PacketSourceError(CodedError):
    """The parts read for a packet are missing or contradict each other: no packet is built
    (the spec's 503 "a required packet source cannot be read"; never partial proof material)."""

    CODE = "PACKET_SOURCE_UNAVAILABLE"


@contextmanager
def packet_sources() -> Iterator[None]:
    """Where a packet's parts are read: a part that cannot be read (the ledger unavailable, a
    member missing, the parts contradicting each other) is 503 `PACKET_SOURCE_UNAVAILABLE`,
    never partial proof material (spec)."""
    try:
        yield
    except (LedgerUnavailable, PacketSourceError, KeyError) as error:
        message = getattr(error, "message", None) or "a packet source could not be read"
        raise PacketSourceError(f"{message}; no packet was produced") from error


class PacketInputError(VerificationInputError):
    """The thing to verify is not a JSON object (or a packet verify body lacks one)."""

    CODE = "VERIFY_PACKET_INVALID"


# --------------------------------------------------------------------------- small helpers


def _is_int(value: Any) -> TypeGuard[int]:
    return type(value) is int


def _is_hex64(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and bool(_HEX64.fullmatch(value))


def _is_iso_ms(value: Any) -> TypeGuard[str]:
    if not isinstance(value, str) or not _ISO_MS.fullmatch(value):
        return False
    try:
        datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ")
    except ValueError:
        return False
    return True


def _object(value: Any) -> Mapping[str, JsonValue]:
    """`value` when it is a JSON object, else an empty one (for reading untrusted members)."""
    return value if isinstance(value, Mapping) else {}


def _array(value: Any) -> list[Any]:
    """`value` when it is a JSON array, else an empty one (for reading untrusted members)."""
    return value if isinstance(value, list) else []


def _short(value: Any, width: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _canon(value: Any) -> str | None:
    try:
        return canonical_text(value)
    except (CanonicalJSONError, TypeError, ValueError, RecursionError):
        return None


def report_hash(report: Mapping[str, JsonValue], kind: str) -> str:
    """`<kind>_hash` of an intelligence report: sha256 of the report without that member, so the
    hash a report endpoint published stays valid inside a packet. Raises on non-JSON content."""
    member = f"{kind}_hash"
    return sha256_hex({k: v for k, v in report.items() if k != member})


def sealed_report_problem(section: str, report: Any) -> str | None:
    """Why `report` cannot be `policy_intelligence.<section>` (None when it can, policy aside)."""
    spec = INTELLIGENCE_SECTIONS.get(section)
    if spec is None:
        return f"not one of {sorted(INTELLIGENCE_SECTIONS)}"
    if not isinstance(report, Mapping):
        return "a report must be an object"
    if report.get(spec.version_member) != spec.version:
        return f"{spec.version_member} must be {spec.version}"
    try:
        expected = report_hash(report, spec.kind)
    except (CanonicalJSONError, TypeError, ValueError, RecursionError):
        return "the report is not canonical JSON"
    if not _digest_equal(expected, report.get(spec.hash_member)):
        return f"{spec.hash_member} is not the sha256 of the report without it"
    return None


def _exact_members(problems: list[str], label: str, value: Any, members: frozenset[str]) -> bool:
    if not isinstance(value, Mapping):
        problems.append(f"{label} must be an object")
        return False
    extra, missing = sorted(set(value) - members, key=str), sorted(members - set(value))
    if extra:
        problems.append(f"{label} has unknown members {extra}")
    if missing:
        problems.append(f"{label} lacks members {missing}")
    return not extra and not missing
