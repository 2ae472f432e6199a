"""Rulebook-mode checks: the rulebook attestation (bundle hash, consistency with the record, facts
hash, signature over the recomputed bundle hash) and the rulebook registry with its attestation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gate.keys.anchors import TrustAnchors
from gate.keys.detached import _digest_equal, _safe
from gate.keys.signing import public_key_fingerprint, raw_public_key_from_pem
from gate.protocol.attestation import (
    OUTCOME_MEMBERS,
    STATUS_SIGNED,
    STATUS_UNSIGNED,
    registry_attestation_hash,
    verify_hash_text_signature,
)
from gate.protocol.canonical import sha256_hex
from gate.protocol.types import TrustedAdapter
from gate.strict_json import JsonValue
from gate.verify.checks import _canon_equal, digest_check
from gate.verify.result import NOTHING_CHECKED, CheckName, CheckResult, CheckValue
from gate.vocabulary import (
    ADAPTER_AUTHORITY,
    ATTESTATION_SIGNATURE_ALGORITHM,
    BINDING_ADAPTER,
    REGISTRY_ATTESTATION_VERSION,
    RULEBOOK_ATTESTATION_SIGNATURE_VERSION,
    RULEBOOK_ATTESTATION_VERSION,
    SIG_ED25519,
    SIGNED_FIELD_BUNDLE_HASH,
)

# --------------------------------------------------------------------------- rulebook attestation

_ATTESTATION_CHECKS: tuple[CheckName, ...] = ("rulebook_attestation_bundle_hash", "rulebook_attestation_consistency",
                       "rulebook_attestation_signature", "policy_bundle_hash")


def check_rulebook_attestation(record: Mapping[str, Any], anchors: TrustAnchors,
                               original_input: Any) -> CheckResult:
    """The rulebook attestation: its bundle hash (which `policy_bundle_hash` repeats), the bundle
    consistent with the record, the facts hash when checkable, and the signature."""
    attestation = record.get("rulebook_attestation")
    if attestation is None:
        if "rulebook" in record:
            return CheckResult.single("rulebook_attestation_bundle_hash", False,
                                      "rulebook record without rulebook_attestation")
        return NOTHING_CHECKED
    if not isinstance(attestation, Mapping) or not isinstance(attestation.get("bundle"), Mapping):
        return CheckResult(checks=dict.fromkeys(_ATTESTATION_CHECKS, False))
    bundle = attestation["bundle"]
    digest = _safe(sha256_hex, bundle)
    return (
        digest_check("rulebook_attestation_bundle_hash", digest, attestation.get("bundle_hash"))
        + digest_check("policy_bundle_hash", digest, record.get("policy_bundle_hash"))
        + CheckResult.single("rulebook_attestation_consistency", _bundle_consistent(record, attestation, bundle))
        + _check_facts_hash(record, bundle, original_input)
        + _check_attestation_signature(attestation.get("signature"), digest, anchors)
    )


def _bundle_consistent(record: Mapping[str, JsonValue], attestation: Mapping[str, JsonValue],
                       bundle: Mapping[str, JsonValue]) -> bool:
    """The attested bundle says what the record's own members say."""
    outcome = {name: record.get(name) for name in OUTCOME_MEMBERS}
    return bool(
        attestation.get("schema_version") == RULEBOOK_ATTESTATION_VERSION
        and bundle.get("engine") == record.get("engine", bundle.get("engine"))
        and bundle.get("evaluator_version") == record.get("evaluator_version")
        and _canon_equal(bundle.get("rulebook"), record.get("rulebook"))
        and _canon_equal(bundle.get("outcome"), outcome)
        and _canon_equal(bundle.get("runtime_binding"), record.get("runtime_binding"))
        and _canon_equal(bundle.get("trusted_adapter"), record.get("trusted_adapter"))
    )


def _check_facts_hash(record: Mapping[str, Any], bundle: Mapping[str, Any], original_input: Any) -> CheckResult:
    """The bundle's facts hash, checkable through the adapter lineage or the original input's
    `context.inputs`; nothing to check otherwise."""
    facts_hash = bundle.get("input_hash")
    adapter = record.get("trusted_adapter")
    if isinstance(adapter, Mapping) and "output_hash" in adapter:
        return digest_check("rulebook_attestation_input_hash", adapter.get("output_hash"), facts_hash)
    if isinstance(original_input, Mapping) and isinstance(original_input.get("context"), Mapping) \
            and isinstance(original_input["context"].get("inputs"), Mapping):
        facts_expected = _safe(sha256_hex, original_input["context"]["inputs"])
        return digest_check("rulebook_attestation_input_hash", facts_expected, facts_hash)
    return NOTHING_CHECKED


def _check_attestation_signature(signature: Any, digest: Any, anchors: TrustAnchors) -> CheckResult:
    """`rulebook_attestation_signature`: a well-formed block, unsigned (None when blank) or signed
    over the text of the *recomputed* bundle hash."""
    if not isinstance(signature, Mapping):
        return CheckResult.single("rulebook_attestation_signature", False)
    status = signature.get("status")
    well_formed = (
        signature.get("schema_version") == RULEBOOK_ATTESTATION_SIGNATURE_VERSION
        and signature.get("algorithm") == ATTESTATION_SIGNATURE_ALGORITHM
        and signature.get("signed_field") == SIGNED_FIELD_BUNDLE_HASH
    )
    if status == STATUS_UNSIGNED:
        blank = all(signature.get(n) is None for n in ("key_id", "public_key_pem", "signature"))
        return CheckResult.single("rulebook_attestation_signature", None if (well_formed and blank) else False)
    if status != STATUS_SIGNED or not well_formed:
        return CheckResult.single("rulebook_attestation_signature", False)
    return _check_signed_attestation(signature, digest, anchors)


def _check_signed_attestation(signature: Mapping[str, JsonValue], digest: Any, anchors: TrustAnchors) -> CheckResult:
    """A signed attestation against a trusted key (the one its embedded key names, which must be
    that key); without one, the embedded key only feeds the diagnostic."""
    embedded_pem = signature.get("public_key_pem")
    embedded_fp = _safe(public_key_fingerprint, embedded_pem) if isinstance(embedded_pem, str) else None
    embedded_raw = _safe(raw_public_key_from_pem, embedded_pem) if isinstance(embedded_pem, str) else None
    key = anchors.select_ed25519(signature.get("key_id"), embedded_fp)
    if key is None:
        diagnostic: dict[CheckName, CheckValue] = {}
        if embedded_raw is not None:
            diagnostic["rulebook_attestation_signature_matches_untrusted_key"] = verify_hash_text_signature(
                digest, signature.get("signature"), embedded_raw)
        return CheckResult(checks=diagnostic,
                           notes=("rulebook attestation signature not checked: no trusted key for it",))
    ok = verify_hash_text_signature(digest, signature.get("signature"), key.public_key_raw)
    if embedded_pem is not None:
        ok = ok and embedded_raw == key.public_key_raw
    return CheckResult.single("rulebook_attestation_signature", ok)


# --------------------------------------------------------------------------- rulebook registry


def _dependency_matches(dependency: Any, adapter: Any) -> bool:
    """The snapshot's bound adapter dependency names the record's adapter (both absent in direct mode)."""
    if dependency is None and adapter is None:
        return True
    if not isinstance(dependency, Mapping) or not isinstance(adapter, Mapping):
        return False
    return set(dependency) == {"adapter_id", "version", "manifest_hash"} and all(
        dependency.get(name) == adapter.get(name) for name in ("adapter_id", "version", "manifest_hash"))


def check_registry(record: Mapping[str, JsonValue], anchors: TrustAnchors) -> CheckResult:
    """The rulebook registry entry: consistent with the record, and its registry attestation."""
    registry = record.get("rulebook_registry")
    if registry is None:
        return NOTHING_CHECKED
    if not isinstance(registry, Mapping):
        return CheckResult(checks={"rulebook_registry_consistency": False, "registry_attestation_hash": False})
    consistency = CheckResult.single("rulebook_registry_consistency", _registry_consistent(record, registry))
    attestation = registry.get("registry_attestation")
    if attestation is None:
        return consistency + CheckResult(notes=("rulebook_registry has no registry_attestation",))
    if not isinstance(attestation, Mapping):
        return consistency + CheckResult.single("registry_attestation_hash", False)
    digest = _safe(registry_attestation_hash, dict(registry))
    return consistency + _check_registry_attestation_hash(attestation, digest) \
        + _check_registry_attestation_signature(attestation, digest, anchors)


def _registry_consistent(record: Mapping[str, JsonValue], registry: Mapping[str, JsonValue]) -> bool:
    """The entry names the record's rulebook, evaluator and adapter dependency."""
    rulebook = record.get("rulebook")
    if not isinstance(rulebook, Mapping):
        return False
    return bool(
        registry.get("rulebook_id") == rulebook.get("id")
        and registry.get("version") == rulebook.get("version")
        and registry.get("hash") == rulebook.get("hash")
        and registry.get("evaluator_version") == record.get("evaluator_version")
        and _dependency_matches(registry.get("trusted_adapter_dependency"), record.get("trusted_adapter"))
    )


def _check_registry_attestation_hash(attestation: Mapping[str, JsonValue], digest: Any) -> CheckResult:
    """`registry_attestation_hash`: its version, and the hash recomputed from the entry."""
    compared = digest_check("registry_attestation_hash", digest, attestation.get("attestation_hash"))
    ok = (attestation.get("registry_attestation_version") == REGISTRY_ATTESTATION_VERSION
          and compared.checks["registry_attestation_hash"])
    return CheckResult(checks={"registry_attestation_hash": ok}, expected=compared.expected, actual=compared.actual)


def _check_registry_attestation_signature(attestation: Mapping[str, JsonValue], digest: Any,
                                          anchors: TrustAnchors) -> CheckResult:
    """`registry_attestation_signature`: unsigned (None when blank) or an Ed25519 signature over
    the recomputed hash by a trusted key."""
    status = attestation.get("status")
    if status == STATUS_UNSIGNED:
        blank = attestation.get("signature") is None and attestation.get("key_id") is None
        return CheckResult.single("registry_attestation_signature", None if blank else False)
    if status != STATUS_SIGNED or attestation.get("signature_algorithm") != SIG_ED25519:
        return CheckResult.single("registry_attestation_signature", False)
    key = anchors.select_ed25519(attestation.get("key_id"), None)
    if key is None:
        return CheckResult(notes=("registry attestation signature not checked: no trusted key for it",))
    return CheckResult.single("registry_attestation_signature", verify_hash_text_signature(
        digest, attestation.get("signature"), key.public_key_raw))


# --------------------------------------------------------------------------- trusted adapter


TRUSTED_ADAPTER_MEMBERS: frozenset[str] = TrustedAdapter.__required_keys__  # the eleven of reference facts §3
_HASH_MEMBERS = ("implementation_hash", "manifest_hash", "input_hash", "output_hash")


def _is_hex64(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def check_trusted_adapter(record: Mapping[str, JsonValue], original_input: Any) -> CheckResult:
    """`trusted_adapter_lineage`: the adapter block, the adapter facts and the binding agree.

    Rulebook records in adapter mode (``runtime_binding.binding_mode`` is the adapter mode, or
    `trusted_adapter` / `adapter_facts` present) must carry both members; `trusted_adapter` has
    exactly the eleven members of reference facts §3 with 64-hex hashes; ``H(adapter_facts)``
    equals `trusted_adapter.output_hash`; the runtime binding is the adapter mode with
    `adapter_authority: "facts_only"`. With the original request: its `adapter` invocation names
    the same id, version and manifest hash, ``H(adapter.input)`` equals `input_hash`, and every
    input member reappears unchanged in `adapter_facts`.
    """
    adapter = record.get("trusted_adapter")
    facts = record.get("adapter_facts")
    binding = record.get("runtime_binding")
    binding_mode = binding.get("binding_mode") if isinstance(binding, Mapping) else None
    if adapter is None and facts is None and binding_mode != BINDING_ADAPTER:
        if isinstance(binding, Mapping) and "adapter_authority" in binding:
            return CheckResult.single("trusted_adapter_lineage", False,
                                      "adapter_authority in a direct-mode runtime binding")
        return NOTHING_CHECKED
    ok = _adapter_block_well_formed(adapter, facts, binding)
    facts_hash = NOTHING_CHECKED
    if isinstance(facts, Mapping):
        stated = adapter.get("output_hash") if isinstance(adapter, Mapping) else None
        facts_hash = CheckResult(expected={"adapter_facts_hash": _safe(sha256_hex, facts)},
                                 actual={"adapter_facts_hash": stated})
        ok = ok and _digest_equal(facts_hash.expected["adapter_facts_hash"], stated)
    invocation = original_input.get("adapter") if isinstance(original_input, Mapping) else None
    notes: tuple[str, ...] = ()
    if ok and isinstance(invocation, Mapping) and isinstance(adapter, Mapping) and isinstance(facts, Mapping):
        ok = _invocation_matches(invocation, adapter, facts)
    elif ok:
        notes = ("trusted adapter input_hash not checked: original input not supplied",)
    return facts_hash + CheckResult.single("trusted_adapter_lineage", bool(ok), *notes)


def _adapter_block_well_formed(adapter: Any, facts: Any, binding: Any) -> bool:
    """Both members present, the adapter block closed with 64-hex hashes, the binding in adapter mode."""
    return bool(isinstance(adapter, Mapping) and isinstance(facts, Mapping)
                and set(adapter) == TRUSTED_ADAPTER_MEMBERS
                and all(_is_hex64(adapter.get(name)) for name in _HASH_MEMBERS)
                and isinstance(adapter.get("execution_timeout_ms"), int)
                and isinstance(binding, Mapping)
                and binding.get("binding_mode") == BINDING_ADAPTER
                and binding.get("adapter_authority") == ADAPTER_AUTHORITY)


def _invocation_matches(invocation: Mapping[str, JsonValue], adapter: Mapping[str, JsonValue],
                        facts: Mapping[str, JsonValue]) -> bool:
    """The request's adapter invocation names this adapter, hashes to its input_hash, and every
    input member reappears unchanged in the adapter facts."""
    payload = invocation.get("input")
    return bool(invocation.get("adapter_id") == adapter.get("adapter_id")
                and invocation.get("version") == adapter.get("version")
                and invocation.get("manifest_hash") == adapter.get("manifest_hash")
                and isinstance(payload, Mapping)
                and _digest_equal(_safe(sha256_hex, payload), adapter.get("input_hash"))
                and all(name in facts and _canon_equal(facts[name], value) for name, value in payload.items()))
