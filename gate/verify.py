"""Decision Record verification: the one code path for the API, the CLI and offline use.

`verify_record(record, anchors=..., original_input=..., request_public_key=...)` recomputes
every hash the record states, checks the receipt signature and the attestation signatures
against *trust anchors*, and reports each step as a named check (True / False / None for
"not applicable or not checkable"). Expected failures are values; only a record that is not a
JSON object raises (`VerificationInputError`).

Trust: only keys in `TrustAnchors` (server key registry, an operator-supplied key registry
file or PEM, an HMAC secret) can make a record authentic. A public key that arrives inside the
request or inside the record is never a trust anchor; it is used only for the diagnostic check
`signature_matches_untrusted_key` (and `rulebook_attestation_signature_matches_untrusted_key`).
HMAC records are authentic only to a holder of the secret. Digests and signatures are
compared with `hmac.compare_digest`.

See docs/verification.md for the algorithm written out step by step.
"""

from __future__ import annotations

import hmac
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from gate.attestation import (
    OUTCOME_MEMBERS,
    STATUS_SIGNED,
    STATUS_UNSIGNED,
    registry_attestation_hash,
    verify_hash_text_signature,
)
from gate.canonical import CanonicalJSONError, canonical_bytes, parse_strict, sha256_hex
from gate.chain import AUDIT_CHAIN_MEMBERS
from gate.chain import leaf_hash as chain_leaf_hash
from gate.constants import (
    ATTESTATION_SIGNATURE_ALGORITHM,
    CHAIN_ENTRY_TYPE_DECISION,
    CANONICALIZATION,
    COMPACT_FOR_VERDICT,
    HASH_ALGORITHM,
    REGISTRY_ATTESTATION_VERSION,
    RULEBOOK_ATTESTATION_SIGNATURE_VERSION,
    RULEBOOK_ATTESTATION_VERSION,
    SIG_ED25519,
    SIG_HMAC_SHA256,
    SIGNED_FIELD_BUNDLE_HASH,
    VERIFICATION_RESULT_VERSION,
)
from gate.errors import GateError
from gate.records import (
    audit_chain_signature_payload,
    decision_urls,
    receipt_hash,
    record_hash,
    rulebook_output_hash,
)
from gate.signing import (
    HmacKey,
    KeyMaterialError,
    Keyring,
    b64url_decode,
    canonical_public_key_pem,
    ed25519_verify,
    normalize_pem_text,
    public_key_fingerprint,
    raw_public_key_from_pem,
    receipt_signature_payload,
)

__all__ = [
    "SOURCE_SERVER_KEY_REGISTRY",
    "SOURCE_KEY_REGISTRY_FILE",
    "SOURCE_PUBLIC_KEY_PEM",
    "SOURCE_HMAC_SECRET",
    "INTEGRITY_CHECKS",
    "AUTHENTICITY_CHECKS",
    "DIAGNOSTIC_CHECKS",
    "TrustAnchorError",
    "VerificationInputError",
    "TrustedEd25519Key",
    "TrustedHmacSecret",
    "TrustAnchors",
    "VerificationResult",
    "verify_record",
    "verify_request_body",
    "input_hash_of",
]

SOURCE_SERVER_KEY_REGISTRY = "server_key_registry"
SOURCE_KEY_REGISTRY_FILE = "key_registry_file"
SOURCE_PUBLIC_KEY_PEM = "public_key_pem"
SOURCE_HMAC_SECRET = "hmac_secret"

# Check names, by what they establish. Every name is always present in `checks`.
INTEGRITY_CHECKS = (
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
    "confidence_hash",
    "audit_chain",
)
AUTHENTICITY_CHECKS = (
    "receipt_signature",
    "audit_chain_signature",
    "receipt_public_key_fingerprint",
    "rulebook_attestation_signature",
    "registry_attestation_signature",
)
# Informational only: never part of integrity, authenticity or failed_checks.
DIAGNOSTIC_CHECKS = (
    "signature_matches_untrusted_key",
    "rulebook_attestation_signature_matches_untrusted_key",
)


class TrustAnchorError(GateError):
    """Operator-supplied key material (registry, PEM, secret) that cannot be used."""

    def __init__(self, message: str) -> None:
        super().__init__("VERIFY_TRUST_ANCHOR_INVALID", message)


class VerificationInputError(GateError):
    """The thing to verify is not a JSON object (or a verify body lacks one)."""

    def __init__(self, message: str) -> None:
        super().__init__("VERIFY_RECORD_INVALID", message)


# --------------------------------------------------------------------------- trust anchors


@dataclass(frozen=True, slots=True)
class TrustedEd25519Key:
    """A trusted Ed25519 public key. `fingerprints` holds the canonical-PEM fingerprint and the
    fingerprint of the PEM text exactly as supplied (identical when the canonical form was
    supplied)."""

    key_id: str | None
    public_key_raw: bytes
    public_key_pem: str
    fingerprint: str
    fingerprints: frozenset[str]
    source: str
    status: str | None = None

    @classmethod
    def from_pem(cls, pem: str, *, key_id: str | None, source: str, status: str | None = None,
                 stated_fingerprint: str | None = None) -> "TrustedEd25519Key":
        try:
            raw = raw_public_key_from_pem(pem)
            canonical = canonical_public_key_pem(pem)
        except KeyMaterialError as exc:
            label = f"key {key_id!r}" if key_id else "public key"
            raise TrustAnchorError(f"{label}: {exc.message}") from exc
        fingerprint = public_key_fingerprint(canonical)
        fingerprints = {fingerprint, public_key_fingerprint(normalize_pem_text(pem))}
        if stated_fingerprint is not None and stated_fingerprint not in fingerprints:
            raise TrustAnchorError(
                f"key {key_id!r}: public_key_fingerprint does not match its public key"
            )
        return cls(key_id, raw, canonical, fingerprint, frozenset(fingerprints), source, status)


@dataclass(frozen=True, slots=True)
class TrustedHmacSecret:
    """A trusted HMAC secret. `key_id` None means: usable for whatever key id a record names."""

    key_id: str | None
    secret: bytes = field(repr=False)
    source: str = SOURCE_HMAC_SECRET


@dataclass(frozen=True, slots=True)
class TrustAnchors:
    """The keys a verifier trusts. Combine with `+`."""

    ed25519: tuple[TrustedEd25519Key, ...] = ()
    hmac: tuple[TrustedHmacSecret, ...] = ()

    def __add__(self, other: "TrustAnchors") -> "TrustAnchors":
        return TrustAnchors(self.ed25519 + other.ed25519, self.hmac + other.hmac)

    @property
    def empty(self) -> bool:
        return not self.ed25519 and not self.hmac

    # ---- constructors

    @classmethod
    def from_registry_entries(cls, entries: Iterable[Mapping[str, Any]],
                              source: str = SOURCE_SERVER_KEY_REGISTRY) -> "TrustAnchors":
        """From registry dicts ``{key_id, algorithm, public_key, public_key_fingerprint?, status}``.

        Entries whose `algorithm` is present and not "ed25519" are ignored; a bad public key or
        a fingerprint that does not match its key raises `TrustAnchorError`.
        """
        keys = []
        for index, entry in enumerate(entries):
            if not isinstance(entry, Mapping):
                raise TrustAnchorError(f"keys[{index}] must be an object")
            algorithm = entry.get("algorithm", SIG_ED25519)
            if isinstance(algorithm, str) and algorithm.lower() != SIG_ED25519:
                continue
            pem = entry.get("public_key")
            if not isinstance(pem, str):
                raise TrustAnchorError(f"keys[{index}].public_key must be PEM text")
            key_id = entry.get("key_id")
            if key_id is not None and (not isinstance(key_id, str) or not key_id):
                raise TrustAnchorError(f"keys[{index}].key_id must be a non-empty string")
            stated = entry.get("public_key_fingerprint")
            keys.append(
                TrustedEd25519Key.from_pem(
                    pem, key_id=key_id, source=source, status=entry.get("status"),
                    stated_fingerprint=stated if isinstance(stated, str) else None,
                )
            )
        return cls(ed25519=tuple(keys))

    @classmethod
    def from_keyring(cls, keyring: Keyring, source: str = SOURCE_SERVER_KEY_REGISTRY) -> "TrustAnchors":
        """Every key of the server keyring, active and retired."""
        return cls.from_registry_entries(keyring.registry_entries(), source)

    @classmethod
    def from_registry_body(cls, body: Any, source: str = SOURCE_KEY_REGISTRY_FILE) -> "TrustAnchors":
        """From a key registry body ``{keys: [...]}`` (dict, JSON text or bytes) or a bare list."""
        if isinstance(body, (str, bytes, bytearray)):
            try:
                body = parse_strict(body)
            except CanonicalJSONError as exc:
                raise TrustAnchorError(f"key registry is not valid JSON: {exc.message}") from exc
        if isinstance(body, Mapping):
            body = body.get("keys")
        if not isinstance(body, list):
            raise TrustAnchorError("key registry must be an object with a 'keys' array")
        return cls.from_registry_entries(body, source)

    @classmethod
    def from_public_key_pem(cls, pem: str, key_id: str | None = None,
                            source: str = SOURCE_PUBLIC_KEY_PEM) -> "TrustAnchors":
        """An operator-supplied PEM (matched by fingerprint, or by `key_id` when given)."""
        return cls(ed25519=(TrustedEd25519Key.from_pem(pem, key_id=key_id, source=source),))

    @classmethod
    def from_hmac_secret(cls, secret: bytes | str, key_id: str | None = None,
                         source: str = SOURCE_HMAC_SECRET) -> "TrustAnchors":
        """An HMAC secret; without `key_id` it applies to any record key id."""
        if isinstance(secret, str):
            secret = secret.encode("utf-8")
        if not secret:
            raise TrustAnchorError("HMAC secret must not be empty")
        return cls(hmac=(TrustedHmacSecret(key_id, bytes(secret), source),))

    @classmethod
    def from_hmac_key(cls, key: HmacKey, source: str = SOURCE_HMAC_SECRET) -> "TrustAnchors":
        return cls(hmac=(TrustedHmacSecret(key.key_id, key.secret, source),))

    # ---- selection

    def select_ed25519(self, key_id: Any, fingerprint: Any) -> TrustedEd25519Key | None:
        """By key id first (preferring a key whose fingerprint also matches), then by fingerprint."""
        if isinstance(key_id, str) and key_id:
            matches = [k for k in self.ed25519 if k.key_id == key_id]
            if matches:
                for key in matches:
                    if fingerprint in key.fingerprints:
                        return key
                return matches[0]
        if isinstance(fingerprint, str) and fingerprint:
            for key in self.ed25519:
                if fingerprint in key.fingerprints:
                    return key
        return None

    def select_hmac(self, key_id: Any) -> TrustedHmacSecret | None:
        """By key id; else the one secret supplied without a key id."""
        if isinstance(key_id, str) and key_id:
            for secret in self.hmac:
                if secret.key_id == key_id:
                    return secret
        wildcards = [s for s in self.hmac if s.key_id is None]
        return wildcards[0] if len(wildcards) == 1 else None


# --------------------------------------------------------------------------- result


@dataclass(frozen=True, slots=True)
class VerificationResult:
    verified: bool
    integrity_valid: bool
    authenticity_valid: bool
    key_source: str | None
    checks: dict[str, bool | None]
    failed_checks: tuple[str, ...]
    expected: dict[str, Any]
    actual: dict[str, Any]
    decision_id: Any = None
    record_kind: str = "legacy"
    signature_algorithm: Any = None
    key_id: Any = None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
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
            "checks": dict(self.checks),
            "failed_checks": list(self.failed_checks),
            "expected": dict(self.expected),
            "actual": dict(self.actual),
            "notes": list(self.notes),
        }


# --------------------------------------------------------------------------- helpers


def _digest_equal(a: Any, b: Any) -> bool:
    """Constant-time equality of two strings; False unless both are strings."""
    if not isinstance(a, str) or not isinstance(b, str):
        return False
    return hmac.compare_digest(a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass"))


def _canon_equal(a: Any, b: Any) -> bool:
    """Equal as canonical JSON (so 1 == 1.0, key order irrelevant, True != 1)."""
    try:
        return canonical_bytes(a) == canonical_bytes(b)
    except (CanonicalJSONError, TypeError, ValueError, RecursionError):
        return False


def _safe(fn: Callable[..., Any], *args: Any) -> Any:
    """Run a hash computation over untrusted data; None when the data cannot be hashed."""
    try:
        return fn(*args)
    except (CanonicalJSONError, KeyMaterialError, TypeError, ValueError, AttributeError, RecursionError):
        return None


def input_hash_of(original_input: Any) -> str:
    """sha256(canonical(request body without `response_view`))."""
    if isinstance(original_input, Mapping):
        original_input = {k: v for k, v in original_input.items() if k != "response_view"}
    return sha256_hex(original_input)


# --------------------------------------------------------------------------- verification


def verify_record(
    record: Any,
    *,
    anchors: TrustAnchors | None = None,
    original_input: Any = None,
    request_public_key: str | None = None,
) -> VerificationResult:
    """Verify a full Decision Record (legacy or rulebook mode). See module docstring."""
    if not isinstance(record, Mapping):
        raise VerificationInputError("the record to verify must be a JSON object")
    anchors = anchors or TrustAnchors()
    checks: dict[str, bool | None] = {name: None for name in (*INTEGRITY_CHECKS, *AUTHENTICITY_CHECKS, *DIAGNOSTIC_CHECKS)}
    expected: dict[str, Any] = {}
    actual: dict[str, Any] = {}
    notes: list[str] = []
    get = record.get
    rulebook_mode = "rulebook_attestation" in record or "rulebook" in record

    # 0. A rulebook record is a closed object: every member the gate always writes is present
    #    and nothing unknown was added (so deleting an unhashed member, such as the evaluation
    #    trace, or renaming one, is caught by name).
    if rulebook_mode:
        present = set(record)
        checks["record_members"] = RULEBOOK_RECORD_REQUIRED <= present <= RULEBOOK_RECORD_ALLOWED
        if not checks["record_members"]:
            expected["record_members"] = sorted(RULEBOOK_RECORD_REQUIRED - present)
            actual["record_members"] = sorted(present - RULEBOOK_RECORD_ALLOWED)

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

    # 4. compact verdict.
    if "c" in record or "v" in record:
        verdict = get("verdict")
        ok = isinstance(verdict, str) and get("c") == COMPACT_FOR_VERDICT.get(verdict)
        if rulebook_mode or "application_verdict" in record:
            ok = ok and get("v") == get("application_verdict")
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

    # 10. confidence hash copy.
    confidence = get("decision_confidence")
    if isinstance(confidence, Mapping) and "confidence_hash" in record:
        checks["confidence_hash"] = get("confidence_hash") == confidence.get("confidence_hash")

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
        record_kind="rulebook" if rulebook_mode else "legacy",
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


# --------------------------------------------------------------------------- individual checks

# Members `gate.records.build_rulebook_record` always writes, and those it may add.
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
    "decision_confidence", "confidence_hash", "audit_chain", "audit_chain_signature",
}

_INTEGRITY_MIRRORED = (
    "decision_protocol_version",
    "input_hash",
    "output_hash",
    "policy_hash",
    "policy_bundle_hash",
    "record_hash",
    "receipt_hash",
    "replay_url",
    "verify_url",
)
_INTEGRITY_SIGNATURE_MIRRORED = {
    "algorithm": "receipt_signature_algorithm",
    "key_id": "receipt_key_id",
    "public_key_fingerprint": "receipt_public_key_fingerprint",
}


def _check_integrity_block(record: Mapping[str, Any]) -> bool | None:
    """`integrity` mirrors the top level exactly: the members `seal_record` writes, no others."""
    block = record.get("integrity")
    if block is None:
        return None
    if not isinstance(block, Mapping):
        return False
    fixed = {"canonicalization": CANONICALIZATION, "hash_algorithm": HASH_ALGORITHM}
    required = set(fixed) | {name for name in _INTEGRITY_MIRRORED if name != "policy_bundle_hash"}
    if record.get("policy_bundle_hash") not in (None, ""):
        required.add("policy_bundle_hash")
    signed = "receipt_signature" in record
    if signed:
        required.add("signature")
    allowed = required | {"decision_protocol_version"}
    if not required <= set(block) <= allowed:
        return False
    for name, value in block.items():
        if name in fixed:
            if value != fixed[name]:
                return False
        elif name in _INTEGRITY_MIRRORED:
            if value != record.get(name):
                return False
        elif name == "signature":
            if not isinstance(value, Mapping):
                return False
            wanted = {inner for inner, top in _INTEGRITY_SIGNATURE_MIRRORED.items() if top in record}
            if set(value) != wanted:
                return False
            for inner, top in _INTEGRITY_SIGNATURE_MIRRORED.items():
                if inner in value and value[inner] != record.get(top):
                    return False
    return True


_HEX64 = re.compile(r"[0-9a-f]{64}")


def _check_audit_chain(record: Mapping[str, Any], expected_record_hash: Any, expected_receipt_hash: Any,
                       checks: dict[str, bool | None]) -> None:
    """The record's `audit_chain` member: what a record alone can prove of it.

    Its leaf is recomputed from the record; a first link's rolling root is its leaf; the member
    set is closed. Its placement (link hash, later roots) is proven by a packet's chain excerpt.
    """
    member = record.get("audit_chain")
    if member is None:
        if "audit_chain_signature" in record:
            checks["audit_chain"] = False
        return
    if not isinstance(member, Mapping) or set(member) != set(AUDIT_CHAIN_MEMBERS):
        checks["audit_chain"] = False
        return
    position = member.get("chain_position")
    leaf = _safe(chain_leaf_hash, record.get("decision_id"), expected_record_hash, expected_receipt_hash)
    ok = (
        leaf is not None and member.get("leaf_hash") == leaf
        and member.get("entry_type") == CHAIN_ENTRY_TYPE_DECISION
        and type(position) is int and position >= 1
        and isinstance(member.get("chain_id"), str) and member["chain_id"] != ""
        and all(_HEX64.fullmatch(member.get(name) or "") for name in ("link_hash", "merkle_root"))
        and (position != 1 or member.get("merkle_root") == leaf)
    )
    checks["audit_chain"] = bool(ok)


def _check_audit_chain_signature(record: Mapping[str, Any], anchors: "TrustAnchors",
                                 checks: dict[str, bool | None]) -> None:
    """`audit_chain_signature`: the receipt key's signature over the audit_chain member."""
    member = record.get("audit_chain")
    if member is None:
        return
    signature = record.get("audit_chain_signature")
    algorithm, key_id = record.get("receipt_signature_algorithm"), record.get("receipt_key_id")
    if not isinstance(signature, str) or algorithm not in (SIG_ED25519, SIG_HMAC_SHA256) \
            or not signature.startswith(f"{algorithm}:") or not isinstance(member, Mapping):
        checks["audit_chain_signature"] = False
        return
    payload = _safe(audit_chain_signature_payload, record.get("decision_id"), key_id, member)
    body = signature[len(algorithm) + 1:]
    if payload is None:
        checks["audit_chain_signature"] = False
    elif algorithm == SIG_HMAC_SHA256:
        secret = anchors.select_hmac(key_id)
        checks["audit_chain_signature"] = None if secret is None else _digest_equal(
            hmac.new(secret.secret, payload, "sha256").hexdigest(), body)
    else:
        key = anchors.select_ed25519(key_id, record.get("receipt_public_key_fingerprint"))
        raw = _safe(b64url_decode, body)
        checks["audit_chain_signature"] = None if key is None else bool(
            raw is not None and len(raw) == 64 and ed25519_verify(key.public_key_raw, payload, raw))


def _check_urls(record: Mapping[str, Any]) -> bool | None:
    results = []
    if "decision_url" in record:
        decision_id = record.get("decision_id")
        urls = _safe(decision_urls, decision_id) if isinstance(decision_id, str) else None
        results.append(urls is not None and record.get("decision_url") == urls["decision_url"])
    if "replay" in record:  # legacy alias of replay_url
        results.append(record.get("replay") == record.get("replay_url"))
    return all(results) if results else None


def _check_policy_consistency(record: Mapping[str, Any], rulebook_mode: bool) -> bool | None:
    results = []
    if "source_hash" in record:
        results.append(record.get("source_hash") == record.get("policy_hash"))
    rulebook = record.get("rulebook")
    if rulebook_mode:
        if not isinstance(rulebook, Mapping):
            return False
        bundle = record.get("policy_bundle")
        results += [
            record.get("policy_id") == rulebook.get("id"),
            record.get("policy_version") == rulebook.get("version"),
            record.get("policy_hash") == rulebook.get("hash"),
        ]
        if bundle is not None:
            results.append(
                isinstance(bundle, Mapping)
                and bundle.get("hash") == rulebook.get("hash")
                and bundle.get("id") == rulebook.get("id")
                and bundle.get("version") == rulebook.get("version")
            )
        contract = record.get("rulebook_contract")
        if contract is not None:
            results.append(
                isinstance(contract, Mapping)
                and contract.get("evaluator_version") == record.get("evaluator_version")
            )
    return all(results) if results else None


def _check_rulebook_attestation(record, anchors, original_input, checks, expected, actual, notes) -> None:
    attestation = record.get("rulebook_attestation")
    if attestation is None:
        if "rulebook" in record:
            checks["rulebook_attestation_bundle_hash"] = False
            notes.append("rulebook record without rulebook_attestation")
        return
    names = ("rulebook_attestation_bundle_hash", "rulebook_attestation_consistency",
             "rulebook_attestation_signature", "policy_bundle_hash")
    if not isinstance(attestation, Mapping) or not isinstance(attestation.get("bundle"), Mapping):
        for name in names:
            checks[name] = False
        return
    bundle = attestation["bundle"]

    # Bundle hash, and policy_bundle_hash equal to it.
    digest = _safe(sha256_hex, bundle)
    expected["rulebook_attestation_bundle_hash"] = digest
    actual["rulebook_attestation_bundle_hash"] = attestation.get("bundle_hash")
    checks["rulebook_attestation_bundle_hash"] = _digest_equal(digest, attestation.get("bundle_hash"))
    expected["policy_bundle_hash"] = digest
    actual["policy_bundle_hash"] = record.get("policy_bundle_hash")
    checks["policy_bundle_hash"] = _digest_equal(digest, record.get("policy_bundle_hash"))

    # Bundle consistent with the record's own members.
    outcome = {name: record.get(name) for name in OUTCOME_MEMBERS}
    consistent = (
        attestation.get("schema_version") == RULEBOOK_ATTESTATION_VERSION
        and bundle.get("engine") == record.get("engine", bundle.get("engine"))
        and bundle.get("evaluator_version") == record.get("evaluator_version")
        and _canon_equal(bundle.get("rulebook"), record.get("rulebook"))
        and _canon_equal(bundle.get("outcome"), outcome)
        and _canon_equal(bundle.get("runtime_binding"), record.get("runtime_binding"))
        and _canon_equal(bundle.get("trusted_adapter"), record.get("trusted_adapter"))
    )
    checks["rulebook_attestation_consistency"] = consistent

    # Facts hash: checkable through the adapter lineage, or the original input's context.inputs.
    facts_hash = bundle.get("input_hash")
    adapter = record.get("trusted_adapter")
    if isinstance(adapter, Mapping) and "output_hash" in adapter:
        expected["rulebook_attestation_input_hash"] = adapter.get("output_hash")
        actual["rulebook_attestation_input_hash"] = facts_hash
        checks["rulebook_attestation_input_hash"] = _digest_equal(adapter.get("output_hash"), facts_hash)
    elif isinstance(original_input, Mapping) and isinstance(original_input.get("context"), Mapping) \
            and isinstance(original_input["context"].get("inputs"), Mapping):
        facts_expected = _safe(sha256_hex, original_input["context"]["inputs"])
        expected["rulebook_attestation_input_hash"] = facts_expected
        actual["rulebook_attestation_input_hash"] = facts_hash
        checks["rulebook_attestation_input_hash"] = _digest_equal(facts_expected, facts_hash)

    # Signature over the text of the *recomputed* bundle hash.
    signature = attestation.get("signature")
    if not isinstance(signature, Mapping):
        checks["rulebook_attestation_signature"] = False
        return
    status = signature.get("status")
    well_formed = (
        signature.get("schema_version") == RULEBOOK_ATTESTATION_SIGNATURE_VERSION
        and signature.get("algorithm") == ATTESTATION_SIGNATURE_ALGORITHM
        and signature.get("signed_field") == SIGNED_FIELD_BUNDLE_HASH
    )
    if status == STATUS_UNSIGNED:
        blank = all(signature.get(n) is None for n in ("key_id", "public_key_pem", "signature"))
        checks["rulebook_attestation_signature"] = None if (well_formed and blank) else False
        return
    if status != STATUS_SIGNED or not well_formed:
        checks["rulebook_attestation_signature"] = False
        return
    embedded_pem = signature.get("public_key_pem")
    embedded_fp = _safe(public_key_fingerprint, embedded_pem) if isinstance(embedded_pem, str) else None
    key = anchors.select_ed25519(signature.get("key_id"), embedded_fp)
    if key is None:
        notes.append("rulebook attestation signature not checked: no trusted key for it")
        embedded_raw = _safe(raw_public_key_from_pem, embedded_pem) if isinstance(embedded_pem, str) else None
        if embedded_raw is not None:
            checks["rulebook_attestation_signature_matches_untrusted_key"] = verify_hash_text_signature(
                digest, signature.get("signature"), embedded_raw
            )
        return
    ok = verify_hash_text_signature(digest, signature.get("signature"), key.public_key_raw)
    if embedded_pem is not None:
        embedded_raw = _safe(raw_public_key_from_pem, embedded_pem) if isinstance(embedded_pem, str) else None
        ok = ok and embedded_raw == key.public_key_raw
    checks["rulebook_attestation_signature"] = ok


def _check_registry(record, anchors, checks, expected, actual, notes) -> None:
    registry = record.get("rulebook_registry")
    if registry is None:
        return
    if not isinstance(registry, Mapping):
        checks["rulebook_registry_consistency"] = False
        checks["registry_attestation_hash"] = False
        return
    rulebook = record.get("rulebook")
    if isinstance(rulebook, Mapping):
        checks["rulebook_registry_consistency"] = (
            registry.get("rulebook_id") == rulebook.get("id")
            and registry.get("version") == rulebook.get("version")
            and registry.get("hash") == rulebook.get("hash")
            and registry.get("evaluator_version") == record.get("evaluator_version")
        )
    else:
        checks["rulebook_registry_consistency"] = False
    attestation = registry.get("registry_attestation")
    if attestation is None:
        notes.append("rulebook_registry has no registry_attestation")
        return
    if not isinstance(attestation, Mapping):
        checks["registry_attestation_hash"] = False
        return
    digest = _safe(registry_attestation_hash, dict(registry))
    expected["registry_attestation_hash"] = digest
    actual["registry_attestation_hash"] = attestation.get("attestation_hash")
    checks["registry_attestation_hash"] = (
        attestation.get("registry_attestation_version") == REGISTRY_ATTESTATION_VERSION
        and _digest_equal(digest, attestation.get("attestation_hash"))
    )
    status = attestation.get("status")
    if status == STATUS_UNSIGNED:
        checks["registry_attestation_signature"] = (
            None if attestation.get("signature") is None and attestation.get("key_id") is None else False
        )
        return
    if status != STATUS_SIGNED or attestation.get("signature_algorithm") != SIG_ED25519:
        checks["registry_attestation_signature"] = False
        return
    key = anchors.select_ed25519(attestation.get("key_id"), None)
    if key is None:
        notes.append("registry attestation signature not checked: no trusted key for it")
        return
    checks["registry_attestation_signature"] = verify_hash_text_signature(
        digest, attestation.get("signature"), key.public_key_raw
    )


def _check_receipt_signature(record, anchors, request_public_key, expected_record_hash,
                             expected_receipt_hash, checks, notes) -> str | None:
    """Receipt signature, key fingerprint and the untrusted-key diagnostic; returns key_source.

    The signed payload is rebuilt from the *recomputed* record and receipt hashes, so a
    signature only verifies when the signer signed exactly this content.
    """
    signature = record.get("receipt_signature")
    algorithm = record.get("receipt_signature_algorithm")
    key_id = record.get("receipt_key_id")
    fingerprint = record.get("receipt_public_key_fingerprint")
    if signature is None and algorithm is None and key_id is None:
        checks["receipt_signature"] = False
        notes.append("record is not signed: it cannot be authenticated")
        return None
    if not isinstance(signature, str) or algorithm not in (SIG_ED25519, SIG_HMAC_SHA256) \
            or not isinstance(key_id, str) or not signature.startswith(algorithm + ":"):
        checks["receipt_signature"] = False
        notes.append("receipt signature fields are malformed")
        return None
    payload = None
    if isinstance(expected_record_hash, str) and isinstance(expected_receipt_hash, str):
        payload = _safe(receipt_signature_payload, record.get("decision_id"), key_id,
                        expected_receipt_hash, expected_record_hash)
    if payload is None:
        checks["receipt_signature"] = False
        notes.append("receipt signature not checked: the record cannot be hashed")
        return None
    body = signature[len(algorithm) + 1:]

    if algorithm == SIG_HMAC_SHA256:
        if fingerprint is not None:
            checks["receipt_public_key_fingerprint"] = False  # HMAC has no public key
        secret = anchors.select_hmac(key_id)
        if secret is None:
            checks["receipt_signature"] = False
            notes.append(f"no trusted HMAC secret for key id {key_id!r}")
            return None
        digest = hmac.new(secret.secret, payload, "sha256").hexdigest()
        checks["receipt_signature"] = _digest_equal(digest, body)
        return secret.source

    raw_signature = _safe(b64url_decode, body)
    if request_public_key is not None:
        untrusted = _safe(raw_public_key_from_pem, request_public_key)
        checks["signature_matches_untrusted_key"] = bool(
            untrusted is not None and raw_signature is not None and len(raw_signature) == 64
            and ed25519_verify(untrusted, payload, raw_signature)
        )
    key = anchors.select_ed25519(key_id, fingerprint)
    if key is None:
        checks["receipt_signature"] = False
        notes.append(f"no trusted Ed25519 key for key id {key_id!r}; request keys are not trust anchors")
        return None
    if fingerprint is not None:
        checks["receipt_public_key_fingerprint"] = isinstance(fingerprint, str) and fingerprint in key.fingerprints
    checks["receipt_signature"] = bool(
        raw_signature is not None and len(raw_signature) == 64
        and ed25519_verify(key.public_key_raw, payload, raw_signature)
    )
    return key.source
