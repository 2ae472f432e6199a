"""Rulebook attestations and rulebook registry attestations (reference facts §4; spec tables).

Rulebook attestation (embedded in every rulebook-mode record)::

    rulebook_attestation = {
      schema_version: "rulebook_attestation_v1",
      bundle_hash:    sha256(canonical(bundle)),
      bundle: {engine, evaluator_version, rulebook: {schema_version, id, version, hash},
               input_hash: sha256(canonical(facts)),
               outcome: {status, verdict, application_verdict, action, reason_code,
                         matched_rule_id},
               runtime_binding, trusted_adapter (object or null)},
      signature: {schema_version: "rulebook_attestation_signature_v1",
                  status: "signed" | "unsigned", algorithm: "Ed25519",
                  signed_field: "bundle_hash", key_id, public_key_pem, signature}
    }

`signature.signature` is Ed25519 over the UTF-8 bytes of the `bundle_hash` hex text, base64url
without padding; when no key is configured `status` is "unsigned" and `key_id`,
`public_key_pem`, `signature` are null.

Registry entry (the record's `rulebook_registry`)::

    {rulebook_registry_version, schema_version, rulebook_id, version, hash, evaluator_version,
     hash_algorithm, canonicalization, scope_hash, registered_at,
     trusted_adapter_dependency (adapter-bound snapshots only),
     registry_attestation: {registry_attestation_version, status, attestation_hash, key_id,
                            signature_algorithm: "ed25519", signature}}

`attestation_hash` = sha256(canonical(entry without `registry_attestation`)); `signature` is
Ed25519 over the UTF-8 bytes of that hex text (base64url, no padding) or null when unsigned.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gate.keys.signing import Ed25519Key, b64url_decode, b64url_encode, ed25519_verify
from gate.protocol.canonical import clone, sha256_hex
from gate.protocol.types import (
    AttestationBundle,
    AttestationOutcome,
    AttestationSignature,
    RegistryEntry,
    RulebookAttestation,
    RulebookReference,
    RuntimeBinding,
    TrustedAdapter,
)
from gate.strict_json import JsonValue
from gate.vocabulary import (
    ATTESTATION_SIGNATURE_ALGORITHM,
    CANONICALIZATION,
    ENGINE,
    EVALUATOR_VERSION,
    HASH_ALGORITHM,
    REGISTRY_ATTESTATION_VERSION,
    RULEBOOK_ATTESTATION_SIGNATURE_VERSION,
    RULEBOOK_ATTESTATION_VERSION,
    RULEBOOK_REGISTRY_VERSION,
    RULEBOOK_SCHEMA_VERSION,
    SIG_ED25519,
    SIGNED_FIELD_BUNDLE_HASH,
)

__all__ = [
    "STATUS_SIGNED",
    "STATUS_UNSIGNED",
    "attestation_outcome",
    "build_rulebook_attestation",
    "bundle_hash",
    "registry_attestation_hash",
    "registry_entry",
    "rulebook_attestation_bundle",
    "rulebook_attestation_signature",
    "rulebook_reference",
    "sign_hash_text",
    "sign_registry_entry",
    "verify_hash_text_signature",
]

STATUS_SIGNED = "signed"
STATUS_UNSIGNED = "unsigned"

OUTCOME_MEMBERS = ("status", "verdict", "application_verdict", "action", "reason_code", "matched_rule_id")


def sign_hash_text(hex_text: str, key: Ed25519Key) -> str:
    """Ed25519 over the UTF-8 bytes of a hex hash text, base64url without padding."""
    return b64url_encode(key.sign(hex_text.encode("utf-8")))


def verify_hash_text_signature(hex_text: Any, signature: Any, public_raw: bytes) -> bool:
    """True when `signature` (strict unpadded base64url) signs the UTF-8 bytes of `hex_text`."""
    if not isinstance(hex_text, str) or not isinstance(signature, str):
        return False
    try:
        raw_signature = b64url_decode(signature)
    except ValueError:
        return False
    if len(raw_signature) != 64:
        return False
    return ed25519_verify(public_raw, hex_text.encode("utf-8"), raw_signature)


# --------------------------------------------------------------------------- rulebook attestation


def rulebook_reference(rulebook: Mapping[str, JsonValue], rulebook_hash: str) -> RulebookReference:
    """The record's `rulebook` member: ``{schema_version, id, version, hash}``."""
    return {
        "schema_version": rulebook.get("schema_version", RULEBOOK_SCHEMA_VERSION),
        "id": rulebook.get("rulebook_id"),
        "version": rulebook.get("version"),
        "hash": rulebook_hash,
    }


def attestation_outcome(
    *, status: str, verdict: str, application_verdict: str, action: str,
    reason_code: str, matched_rule_id: str | None,
) -> AttestationOutcome:
    """The bundle's `outcome` (the members a verifier compares with the record's top level)."""
    return {
        "status": status,
        "verdict": verdict,
        "application_verdict": application_verdict,
        "action": action,
        "reason_code": reason_code,
        "matched_rule_id": matched_rule_id,
    }


def rulebook_attestation_bundle(
    *,
    rulebook_ref: RulebookReference,
    facts_hash: str,
    outcome: AttestationOutcome,
    runtime_binding: RuntimeBinding,
    trusted_adapter: TrustedAdapter | None,
    engine: str = ENGINE,
    evaluator_version: str = EVALUATOR_VERSION,
) -> AttestationBundle:
    """The attested bundle; `trusted_adapter` is null (not absent) in direct mode. Its members
    are copies: the bundle shares no object with its arguments."""
    return {
        "engine": engine,
        "evaluator_version": evaluator_version,
        "rulebook": clone(rulebook_ref),
        "input_hash": facts_hash,
        "outcome": clone(outcome),
        "runtime_binding": clone(runtime_binding),
        "trusted_adapter": clone(trusted_adapter) if trusted_adapter else None,
    }


def bundle_hash(bundle: AttestationBundle) -> str:
    return sha256_hex(bundle)


def rulebook_attestation_signature(hash_hex: str, key: Ed25519Key | None) -> AttestationSignature:
    """The attestation `signature` object (signed with `key`, or the unsigned form)."""
    return {
        "schema_version": RULEBOOK_ATTESTATION_SIGNATURE_VERSION,
        "status": STATUS_SIGNED if key is not None else STATUS_UNSIGNED,
        "algorithm": ATTESTATION_SIGNATURE_ALGORITHM,
        "signed_field": SIGNED_FIELD_BUNDLE_HASH,
        "key_id": key.key_id if key is not None else None,
        "public_key_pem": key.public_key_pem if key is not None else None,
        "signature": sign_hash_text(hash_hex, key) if key is not None else None,
    }


def build_rulebook_attestation(bundle: AttestationBundle, key: Ed25519Key | None) -> RulebookAttestation:
    """``{schema_version, bundle_hash, bundle, signature}`` for `bundle`, which the attestation
    holds as it is: pass one that nothing else keeps or changes (`rulebook_attestation_bundle`
    builds one of copies)."""
    digest = bundle_hash(bundle)
    return {
        "schema_version": RULEBOOK_ATTESTATION_VERSION,
        "bundle_hash": digest,
        "bundle": bundle,
        "signature": rulebook_attestation_signature(digest, key),
    }


# --------------------------------------------------------------------------- registry


def registry_entry(
    *,
    rulebook_id: str,
    version: str,
    rulebook_hash: str,
    scope_hash: str,
    registered_at: str,
    schema_version: str = RULEBOOK_SCHEMA_VERSION,
    evaluator_version: str = EVALUATOR_VERSION,
    adapter_dependency: Mapping[str, str] | None = None,
) -> RegistryEntry:
    """An unsigned registry snapshot entry (no `registry_attestation` yet).

    A snapshot first bound by an adapter-mode decide also names its trusted adapter dependency,
    ``trusted_adapter_dependency = {adapter_id, version, manifest_hash}`` (covered by the
    registry attestation hash); direct-mode snapshots have no such member.
    """
    entry: RegistryEntry = {
        "rulebook_registry_version": RULEBOOK_REGISTRY_VERSION,
        "schema_version": schema_version,
        "rulebook_id": rulebook_id,
        "version": version,
        "hash": rulebook_hash,
        "evaluator_version": evaluator_version,
        "hash_algorithm": HASH_ALGORITHM,
        "canonicalization": CANONICALIZATION,
        "scope_hash": scope_hash,
        "registered_at": registered_at,
    }
    if adapter_dependency:
        entry["trusted_adapter_dependency"] = clone(adapter_dependency)
    return entry


def registry_attestation_hash(entry: Mapping[str, JsonValue]) -> str:
    """sha256(canonical(entry without `registry_attestation`))."""
    return sha256_hex({k: v for k, v in entry.items() if k != "registry_attestation"})


def sign_registry_entry(entry: RegistryEntry, key: Ed25519Key | None) -> dict[str, JsonValue]:
    """A copy of `entry` with its `registry_attestation` (signed when `key` is given).

    Any `registry_attestation` already on `entry` is replaced (it is excluded from the hash).
    """
    result = {k: clone(v) for k, v in entry.items() if k != "registry_attestation"}
    digest = registry_attestation_hash(result)
    result["registry_attestation"] = {
        "registry_attestation_version": REGISTRY_ATTESTATION_VERSION,
        "status": STATUS_SIGNED if key is not None else STATUS_UNSIGNED,
        "attestation_hash": digest,
        "key_id": key.key_id if key is not None else None,
        "signature_algorithm": SIG_ED25519,
        "signature": sign_hash_text(digest, key) if key is not None else None,
    }
    return result
